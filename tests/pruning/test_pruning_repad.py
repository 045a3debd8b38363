"""-1 re-padding of node_feat and config_feat on hand-written rows."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.pruning.repad import list_length, repad_config_feat, repad_node_feat
from pipeline.tpugraphs.schema import CONFIG_FEAT_NAMES, NODE_FEAT_NAMES

COL = {name: i for i, name in enumerate(NODE_FEAT_NAMES)}


def row(**values) -> np.ndarray:
    """A zero node_feat row with `prefix=[v0, v1, ...]` written into prefix_0, prefix_1, ..."""
    r = np.zeros(140, np.float32)
    for prefix, vals in values.items():
        vals = np.atleast_1d(vals)
        if len(vals) == 1 and prefix in COL:
            r[COL[prefix]] = vals[0]
        else:
            for i, v in enumerate(vals):
                r[COL[f"{prefix}_{i}"]] = v
    return r


def get(x: np.ndarray, prefix: str, n: int) -> list[float]:
    return x[[COL[f"{prefix}_{i}"] for i in range(n)]].tolist()


CONV = "convolution_dim_numbers"


def test_rank3_array_node():
    x = repad_node_feat(row(shape_dimensions=[4, 8, 16], shape_dimensions_sum=28, shape_dimensions_product=512,
                            layout_minor_to_major=[2, 0, 1])[None])[0]
    assert get(x, "shape_dimensions", 6) == [4, 8, 16, -1, -1, -1]
    assert x[COL["shape_dimensions_sum"]] == 28 and x[COL["shape_dimensions_product"]] == 512   # aggregates kept
    assert get(x, "layout_minor_to_major", 6) == [2, 0, 1, -1, -1, -1]
    assert get(x, "padding_config_edge_padding_low", 2) == [0, 0]      # rank 3 > 2 slots: both real
    assert get(x, "window_size", 6) == [-1] * 6                        # no window
    assert get(x, "slice_dims_start", 2) == [-1, -1]                   # no slice
    assert get(x, "dimensions", 6) == [0, -1, -1, -1, -1, -1]          # first 0 kept (ambiguous), rest padding
    conv_cols = [i for n, i in COL.items() if n.startswith(CONV)]
    assert (x[conv_cols] == -1).all()                                 # not a convolution
    assert x[COL["feature_group_count"]] == 0 and x[COL["is_root"]] == 0


def test_rank4_convolution():
    r = row(shape_dimensions=[1, 14, 14, 64], layout_minor_to_major=[3, 0, 2, 1],
            window_size=[3, 3], window_stride=[1, 1], window_padding_low=[0, 1], window_window_dilation=[1, 1],
            feature_group_count=1)
    r[COL[f"{CONV}_input_feature_dim"]] = 3                              # input batch dim 0 stays 0
    r[[COL[f"{CONV}_input_spatial_dims_{i}"] for i in range(2)]] = [1, 2]
    r[COL[f"{CONV}_kernel_input_feature_dim"]] = 2
    r[COL[f"{CONV}_kernel_output_feature_dim"]] = 3
    r[COL[f"{CONV}_kernel_spatial_dims_1"]] = 1                          # kernel spatial dims {0, 1}
    r[COL[f"{CONV}_output_feature_dim"]] = 3
    x = repad_node_feat(r[None])[0]
    assert get(x, "layout_minor_to_major", 6) == [3, 0, 2, 1, -1, -1]
    assert x[COL[f"{CONV}_input_batch_dim"]] == 0 and x[COL[f"{CONV}_output_batch_dim"]] == 0
    assert get(x, f"{CONV}_input_spatial_dims", 4) == [1, 2, -1, -1]
    assert get(x, f"{CONV}_kernel_spatial_dims", 4) == [0, 1, -1, -1]
    assert get(x, "window_size", 6) == [3, 3, -1, -1, -1, -1]
    assert get(x, "window_padding_low", 6) == [0, 1, -1, -1, -1, -1]
    assert get(x, "window_padding_high", 6) == [0, 0, -1, -1, -1, -1]
    assert get(x, "window_base_dilation", 6) == [0, 0, -1, -1, -1, -1]   # missing in the row: 0 inside w, -1 past


def test_scalar_transpose_reduce_and_slice_rows():
    scalar = row(shape_dimensions_product=1)                              # rank 0: empty product is 1
    transpose = row(shape_dimensions=[2, 3, 5], dimensions=[1, 0, 2], layout_minor_to_major=[2, 1, 0])
    reduce = row(shape_dimensions=[7], dimensions=[2, 3])
    sliced = row(shape_dimensions=[5], slice_dims_start=[0], slice_dims_stride=[1], slice_dims_limit=[5],
                 dynamic_slice_sizes=[4])
    x = repad_node_feat(np.stack([scalar, transpose, reduce, sliced]))
    assert get(x[0], "shape_dimensions", 6) == [-1] * 6 and get(x[0], "layout_minor_to_major", 6) == [-1] * 6
    assert get(x[0], "padding_config_edge_padding_high", 2) == [-1, -1]
    assert x[0, COL["shape_dimensions_product"]] == 1
    assert get(x[1], "dimensions", 6) == [1, 0, 2, -1, -1, -1]       # the 0 before a non-zero is real
    assert get(x[2], "dimensions", 6) == [2, 3, 0, -1, -1, -1]       # a trailing 0 may be real: kept
    assert get(x[3], "slice_dims_start", 2) == [0, -1]
    assert get(x[3], "slice_dims_stride", 2) == [1, -1] and get(x[3], "slice_dims_limit", 2) == [5, -1]
    assert get(x[3], "dynamic_slice_sizes", 2) == [4, -1]
    assert get(x[3], "padding_config_edge_padding_low", 2) == [0, -1]   # rank 1


def test_only_zeros_change_and_pad_value_zero_is_identity():
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 4, size=(300, 140)).astype(np.float32)
    x[rng.random(x.shape) < 0.5] = 0
    original = x.copy()
    padded = repad_node_feat(x, pad_value=-7)
    changed = padded != x
    assert changed.any() and (x[changed] == 0).all() and (padded[changed] == -7).all()
    assert np.array_equal(repad_node_feat(x, pad_value=0), x)
    assert np.array_equal(x, original)      # the input is not modified in place


def test_config_feat_bounds():
    names = {n: i for i, n in enumerate(CONFIG_FEAT_NAMES)}
    c = np.zeros((2, 24), np.float32)
    c[0, [names["output_bounds_0"], names["output_bounds_1"]]] = [8, 128]
    c[0, names["output_bounds_product"]] = 1024
    c[1, names["kernel_bounds_0"]] = 3
    x = repad_config_feat(c)
    out = [names[f"output_bounds_{i}"] for i in range(6)]
    assert x[0, out].tolist() == [8, 128, -1, -1, -1, -1]
    assert x[0, names["output_bounds_product"]] == 1024 and x[0, names["input_bounds_sum"]] == 0
    assert x[0, [names[f"input_bounds_{i}"] for i in range(6)]].tolist() == [-1] * 6
    assert x[1, [names[f"kernel_bounds_{i}"] for i in range(6)]].tolist() == [3, -1, -1, -1, -1, -1]


def test_list_length_and_shape_errors():
    assert list_length(np.array([[0, 0, 0], [3, 0, 0], [3, 0, 2], [0, 0, 1]])).tolist() == [0, 1, 3, 3]
    with pytest.raises(ValueError, match=r"expected node_feat \[nodes, 140\], found \(2, 139\)"):
        repad_node_feat(np.zeros((2, 139)))
    with pytest.raises(ValueError, match="config_feat"):
        repad_config_feat(np.zeros((2, 23)))
