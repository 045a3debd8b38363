"""Re-padding: give the entries that the real files zero-pad an explicit pad value (-1 by default).

The official `node_feat` writes 0 past the end of every fixed-length list (a `_i` entry is 0 when i >= the list's
length), so a padded slot looks like dimension index 0. `node_config_feat` already pads with -1. For each column
family we recover the list's length from the row itself, then write `pad_value` into the slots past it. Only
entries that are 0 are ever replaced, so with `pad_value=0` re-padding is the identity (the ablation), and a
non-zero value is never lost. `_sum`, `_product` and count columns are aggregates, not lists: left as they are.

How the length of each `node_feat` family is known (r = the node's rank):
- `shape_dimensions_0..5`: r = 1 + the position of the last non-zero dimension (trailing zeros are padding;
  a zero-size dimension inside the shape is kept). Slots >= r are padded.
- `layout_minor_to_major_0..5`: the layout of an r-dimensional shape has r entries. Slots >= r are padded
  (non-array shapes such as tuples have r = 0, so their whole layout is padding).
- `convolution_dim_numbers_*` (93-106): present iff any entry is non-zero (a convolution's batch and feature
  dimensions are distinct, so they cannot both be 0). Absent: the whole block is padded. Present: the input and
  kernel spatial dims have r - 2 entries (rank minus batch and feature); slots >= r - 2 are padded.
- `dimensions_0..5`: a list of distinct dimension indices whose length depends on the opcode. At most one entry
  can be 0, so every 0 after the first 0 is padding. The first 0 stays 0 (it is a real index 0, or the list
  ended there; the file cannot tell).
- `window_{size,stride,padding_low,padding_high,window_dilation,base_dilation,window_reversal}_0..5`: one entry
  per window dimension; window sizes are >= 1, so the window rank w = 1 + the last non-zero `window_size_i`.
  Slots >= w of all seven families are padded (w = 0 for nodes without a window).
- `slice_dims_{start,stride,limit}_0,1`: strides are >= 1, so the slice length s = 1 + the last non-zero stride.
- `dynamic_slice_sizes_0,1`: sizes are >= 1 (length = 1 + the last non-zero size).
- `padding_config_edge_padding_{low,high}_0,1`: one entry per dimension of the padded shape: slots >= r padded.

`config_feat` (tile): `{kernel,output,input}_bounds_0..5` are tile sizes >= 1, so each block's length is 1 + its
last non-zero entry; slots past it are padded.
"""
from __future__ import annotations

import numpy as np

from pipeline.tpugraphs.schema import (CONFIG_FEAT_BLOCKS, CONFIG_FEAT_COLUMN, CONFIG_FEAT_DIM, CONV_SPATIAL_DIMS,
                                       MAX_DIMS, NODE_FEAT_COLUMN, NODE_FEAT_DIM)

NON_SPATIAL_DIMS = 2  # batch + feature dimensions of a convolution operand
_COL = NODE_FEAT_COLUMN


def _cols(prefix: str, n: int, table: dict[str, int] = _COL) -> np.ndarray:
    return np.array([table[f"{prefix}_{i}"] for i in range(n)])


SHAPE_DIMS = _cols("shape_dimensions", MAX_DIMS)
LAYOUT = _cols("layout_minor_to_major", MAX_DIMS)
DIMENSIONS = _cols("dimensions", MAX_DIMS)
WINDOW_FAMILIES = [_cols(f"window_{f}", MAX_DIMS) for f in
                   ("size", "stride", "padding_low", "padding_high", "window_dilation", "base_dilation",
                    "window_reversal")]
CONV_BLOCK = np.arange(_COL["convolution_dim_numbers_input_batch_dim"],
                       _COL["convolution_dim_numbers_output_feature_dim"] + 1)
CONV_SPATIAL_FAMILIES = [_cols("convolution_dim_numbers_input_spatial_dims", CONV_SPATIAL_DIMS),
                         _cols("convolution_dim_numbers_kernel_spatial_dims", CONV_SPATIAL_DIMS)]
SLICE_FAMILIES = [_cols(f"slice_dims_{f}", 2) for f in ("stride", "start", "limit")]   # stride gives the length
DYNAMIC_SLICE_SIZES = _cols("dynamic_slice_sizes", 2)
PADDING_CONFIG = [_cols(f"padding_config_edge_padding_{f}", 2) for f in ("low", "high")]
BOUNDS = [_cols(block, MAX_DIMS, CONFIG_FEAT_COLUMN) for block in CONFIG_FEAT_BLOCKS]


def list_length(block: np.ndarray) -> np.ndarray:
    """[rows] int: 1 + position of the last non-zero entry of each row of `block` [rows, k] (0 if all zero)."""
    nonzero = block != 0
    k = block.shape[1]
    last = k - 1 - np.argmax(nonzero[:, ::-1], axis=1)
    return np.where(nonzero.any(axis=1), last + 1, 0)


def _pad_past(x: np.ndarray, cols: np.ndarray, length: np.ndarray, pad_value: float) -> None:
    """In place: x[i, cols[j]] = pad_value where j >= length[i] and the entry is 0."""
    block = x[:, cols]
    mask = (np.arange(len(cols))[None, :] >= length[:, None]) & (block == 0)   # [rows, len(cols)]
    block[mask] = pad_value
    x[:, cols] = block


def _pad_repeated_zeros(x: np.ndarray, cols: np.ndarray, pad_value: float) -> None:
    """In place, for lists of distinct indices: every 0 after the first 0 of the row becomes pad_value."""
    block = x[:, cols]
    zero = block == 0
    first_zero = np.where(zero.any(axis=1), np.argmax(zero, axis=1), len(cols))
    mask = zero & (np.arange(len(cols))[None, :] > first_zero[:, None])
    block[mask] = pad_value
    x[:, cols] = block


def repad_node_feat(node_feat: np.ndarray, pad_value: float = -1.0) -> np.ndarray:
    """A copy of `node_feat` [nodes, 140] with the zero-padded list slots set to `pad_value` (see module doc)."""
    if node_feat.ndim != 2 or node_feat.shape[1] != NODE_FEAT_DIM:
        raise ValueError(f"repad_node_feat: expected node_feat [nodes, {NODE_FEAT_DIM}], found {node_feat.shape}")
    x = np.array(node_feat, dtype=np.float32, copy=True)
    if pad_value == 0:
        return x
    rank = list_length(node_feat[:, SHAPE_DIMS])
    window_rank = list_length(node_feat[:, WINDOW_FAMILIES[0]])
    slice_len = list_length(node_feat[:, SLICE_FAMILIES[0]])
    has_conv = (node_feat[:, CONV_BLOCK] != 0).any(axis=1)
    spatial = np.where(has_conv, np.maximum(rank - NON_SPATIAL_DIMS, 0), 0)

    _pad_past(x, SHAPE_DIMS, rank, pad_value)
    _pad_past(x, LAYOUT, rank, pad_value)
    _pad_repeated_zeros(x, DIMENSIONS, pad_value)
    for cols in WINDOW_FAMILIES:
        _pad_past(x, cols, window_rank, pad_value)
    _pad_past(x, CONV_BLOCK, np.where(has_conv, len(CONV_BLOCK), 0), pad_value)   # absent block: all padding
    for cols in CONV_SPATIAL_FAMILIES:
        _pad_past(x, cols, spatial, pad_value)
    for cols in SLICE_FAMILIES:
        _pad_past(x, cols, slice_len, pad_value)
    _pad_past(x, DYNAMIC_SLICE_SIZES, list_length(node_feat[:, DYNAMIC_SLICE_SIZES]), pad_value)
    for cols in PADDING_CONFIG:
        _pad_past(x, cols, rank, pad_value)
    return x


def repad_config_feat(config_feat: np.ndarray, pad_value: float = -1.0) -> np.ndarray:
    """A copy of tile `config_feat` [configs, 24] with bound slots past each block's length set to `pad_value`."""
    if config_feat.ndim != 2 or config_feat.shape[1] != CONFIG_FEAT_DIM:
        raise ValueError(f"repad_config_feat: expected config_feat [configs, {CONFIG_FEAT_DIM}], "
                         f"found {config_feat.shape}")
    x = np.array(config_feat, dtype=np.float32, copy=True)
    if pad_value == 0:
        return x
    for cols in BOUNDS:
        _pad_past(x, cols, list_length(config_feat[:, cols]), pad_value)
    return x
