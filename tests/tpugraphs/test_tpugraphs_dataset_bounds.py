"""pipeline.tpugraphs.dataset at its bounds: the largest layout value, row indices outside [0, C), reads of the
memory map in several blocks, a tile file carrying a node_config_feat member, splits and sibling collections."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import make_layout_arrays, make_tile_arrays, write_npz
from pipeline.tpugraphs import dataset
from pipeline.tpugraphs.dataset import Collection, load_graph

LAYOUT = Collection.parse("layout:xla:random")
TILE = Collection.parse("tile:xla")


def test_the_largest_dimension_number_5_is_a_valid_layout_value(tmp_path):
    arrays = make_layout_arrays()
    arrays["node_config_feat"][2, 1, :6] = [5, 4, 3, 2, 1, 0]     # a rank-6 minor-to-major order
    graph = load_graph(write_npz(tmp_path / "g.npz", arrays), LAYOUT, "train")
    assert graph.read_node_config_feat([2])[0, 1, :6].tolist() == [5, 4, 3, 2, 1, 0]


@pytest.mark.parametrize("index", [[-1], [0, 4]])
def test_a_row_index_outside_the_configs_is_refused_not_wrapped(tmp_path, index):
    graph = load_graph(write_npz(tmp_path / "g.npz", make_layout_arrays()), LAYOUT, "train")   # 4 configs
    with pytest.raises(IndexError, match=r"row index out of range \[0, 4\)"):
        graph.read_node_config_feat(index)
    graph.node_config_feat_source = make_layout_arrays()["node_config_feat"]   # in memory: numpy would wrap -1
    with pytest.raises(IndexError, match=r"row index out of range \[0, 4\)"):
        graph.read_node_config_feat(index)


def test_the_memory_map_is_read_in_blocks_of_rows_without_losing_any(tmp_path, monkeypatch):
    values = make_layout_arrays()["node_config_feat"]
    graph = load_graph(write_npz(tmp_path / "g.npz", make_layout_arrays()), LAYOUT, "train")   # stored, not deflated
    monkeypatch.setattr(dataset, "CONFIG_CHUNK_BYTES", 2 * 2 * 18 * 4)   # 2 rows of [2, 18] float32 per block
    assert graph._chunk_rows() == 2
    assert (graph.read_node_config_feat([3, 2, 1, 0, 3]) == values[[3, 2, 1, 0, 3]]).all()


def test_a_tile_file_never_exposes_a_node_config_feat_member(tmp_path):
    arrays = {**make_tile_arrays(), "node_config_feat": make_layout_arrays()["node_config_feat"]}
    graph = load_graph(write_npz(tmp_path / "t.npz", arrays), TILE, "train")
    assert graph.node_config_feat_source is None


def test_load_graph_refuses_an_unknown_split(tmp_path):
    path = write_npz(tmp_path / "g.npz", make_layout_arrays())
    with pytest.raises(ValueError, match="unknown split 'validation'"):
        load_graph(path, LAYOUT, "validation")


def test_the_sibling_is_the_other_source_both_ways():
    assert LAYOUT.sibling.name == "layout:nlp:random"
    assert Collection.parse("layout:nlp:default").sibling.name == "layout:xla:default"
    assert TILE.sibling is None
