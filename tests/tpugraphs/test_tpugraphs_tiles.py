"""pipeline.tpugraphs.tiles: a tile config relative to the kernel's output, on hand-checked kernels."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.tpugraphs.schema import IS_ROOT_COLUMN, SHAPE_COLUMNS
from pipeline.tpugraphs.tiles import TILE_INPUT_DIM, TILE_INPUT_NAMES, output_shape, tile_geometry, tile_inputs

SHAPE = np.array([100, 200, -1, -1, -1, -1], np.float64)   # a 100 x 200 output (-1 = prune's re-padding)


def configs(*tiles) -> np.ndarray:
    """config_feat rows whose output_bounds_0..5 are the given tiles (-1 padded, as prune leaves them)."""
    feat = np.full((len(tiles), 24), -1.0, np.float32)
    for row, tile in enumerate(tiles):
        feat[row, 8:8 + len(tile)] = tile
    return feat


def named(shape, feat) -> dict[str, np.ndarray]:
    return dict(zip(TILE_INPUT_NAMES, tile_inputs(shape, feat).T))


def test_output_shape_is_the_last_root():
    raw = np.full((3, 140), -1, np.float32)
    raw[:, SHAPE_COLUMNS.start] = [5, 7, 9]
    raw[:, IS_ROOT_COLUMN] = [1, 1, 0]             # node 1 is the last root: its shape, not the last node's
    assert output_shape(raw)[0] == 7
    raw[:, IS_ROOT_COLUMN] = 0                     # no root flagged: the last node
    assert output_shape(raw)[0] == 9


def test_geometry_of_partial_and_untiled_tiles():
    geo = tile_geometry(SHAPE, configs([64, 128], [100, 0], []))
    # 64 x 128 tiles: 2 x 2 of them compute 128 x 256 = 32768 elements for 20000
    assert geo.rank == 2 and geo.elements == 20000
    assert geo.tiles.tolist()[0][:2] == [2, 2] and geo.padded[0] == 32768
    # an untiled dim (0) and an empty list (-1 padding) are the whole dim: one 100 x 200 tile
    assert geo.bounds[1, :2].tolist() == [100, 200] and geo.bounds[2, :2].tolist() == [100, 200]
    assert geo.padded[1] == 20000 and geo.tiles[2].prod() == 1
    # TPU (8, 128) padding: 64 x 128 is aligned; 100 x 200 pads to 104 x 256
    assert geo.tpu_padded_tile.tolist()[:2] == [8192, 104 * 256]


def test_tile_inputs_hand_checked():
    f = named(SHAPE, configs([64, 128], [100, 0]))
    assert tile_inputs(SHAPE, configs([64, 128])).shape == (1, TILE_INPUT_DIM)
    assert f["log_tiles_0"] == pytest.approx([np.log(2), 0]) and f["log_tiles_1"] == pytest.approx([np.log(2), 0])
    assert f["log_tiles_2"].tolist() == [0, 0]
    assert f["log_tiles"] == pytest.approx([np.log(4), 0])
    assert f["log_pad_ratio"] == pytest.approx([np.log(32768 / 20000), 0])
    assert f["log_tile_fraction"] == pytest.approx([np.log(8192 / 20000), 0])
    assert f["log_tile_elements"] == pytest.approx([np.log(8192), np.log(20000)])
    assert f["log_tpu_pad_ratio"] == pytest.approx([0, np.log(104 * 256 / 20000)])
    assert f["minor_rem128"] == pytest.approx([0, 72 / 128])
    assert f["second_minor_rem8"] == pytest.approx([0, 4 / 8])


def test_a_kernel_10x_larger_gives_finite_unsaturated_inputs():
    """Train sees the 100 x 200 kernel; a 1000 x 2000 one (10x per dim) moves every size input by its log ratio."""
    feat = configs([64, 128], [])                  # the same 64 x 128 tile, and the whole output
    small, large = named(SHAPE, feat), named(SHAPE * [10, 10, 1, 1, 1, 1], feat)
    assert np.all(np.isfinite(tile_inputs(SHAPE * [10, 10, 1, 1, 1, 1], feat)))
    assert large["log_tiles"][0] == pytest.approx(np.log(16 * 16))          # ceil(1000/64) x ceil(2000/128)
    assert large["log_tiles"][0] > 2 * small["log_tiles"][0]
    assert large["log_tile_elements"][1] == pytest.approx(small["log_tile_elements"][1] + np.log(100))
    assert large["log_tile_fraction"][0] == pytest.approx(small["log_tile_fraction"][0] - np.log(100))


def test_bad_config_feat_is_named():
    with pytest.raises(ValueError, match=r"config_feat: expected \[configs, 24\]"):
        tile_inputs(SHAPE, np.zeros((3, 23)))
