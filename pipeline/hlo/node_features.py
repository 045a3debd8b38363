"""The 140 node-feature columns of the official extractor, computed from `HloNode`s.

Column map (tpugraphs-format.md §2a): 0 is_root, 1 element_size_in_bits (always 0), 2-20 element-type one-hot,
21-28 shape dims 0..5/sum/product, 29 tuple size, 30 parameter number, 31-36 dimensions, 37-92 window
(size, stride, padding low/high, window/base dilation: 0..5/sum/product; reversal 0..5/true/false count),
93-106 convolution dimension numbers, 107 feature_group_count, 108 batch_group_count, 109-120 slice
start/stride/limit (0,1/sum/product), 121-124 dynamic-slice sizes, 125-132 padding low/high, 133 is_stable,
134-139 layout minor_to_major (zero padded). Empty lists give sum 0 and product 1, as the extractor does.
"""
from __future__ import annotations

from math import prod

import numpy as np

from pipeline.hlo.graph import HloGraph, HloNode

from pipeline.tpugraphs.schema import ELEMENT_TYPES, LAYOUT_COLUMNS, MAX_DIMS, NODE_FEAT_DIM


def _seq(values, leading: int) -> list[float]:
    """`leading` entries zero padded, then sum and product (product 1 on an empty list)."""
    values = [int(v) for v in values]
    head = values[:leading] + [0] * (leading - min(leading, len(values)))
    return [float(v) for v in head] + [float(sum(values)), float(prod(values))]


def _no_aggregate(values, leading: int) -> list[float]:
    values = [float(v) for v in values][:leading]
    return values + [0.0] * (leading - len(values))


def default_minor_to_major(rank: int) -> tuple[int, ...]:
    """The HLO's own (row-major) layout: the last dimension is the most minor."""
    return tuple(range(rank - 1, -1, -1))


def node_row(node: HloNode) -> list[float]:
    """One 140-float row for `node`."""
    row = [1.0 if node.is_root else 0.0, 0.0]
    row += [1.0 if t == node.dtype else 0.0 for t in ELEMENT_TYPES]
    row += _seq(node.shape, 6)
    row += [float(node.tuple_size), float(node.parameter_number)]
    row += _no_aggregate(node.dimensions, 6)
    w = node.window
    for values in ((w.size, w.stride, w.pad_low, w.pad_high, w.window_dilation, w.base_dilation) if w else
                   ((),) * 6):
        row += _seq(values, 6)
    reversal = [1.0 if r else 0.0 for r in (w.reversal if w else ())]
    row += _no_aggregate(reversal, 6) + [float(sum(reversal)), float(len(reversal) - sum(reversal))]
    c = node.conv
    if c:
        row += [c.input_batch, c.input_feature] + _no_aggregate(c.input_spatial, 4)
        row += [c.kernel_input_feature, c.kernel_output_feature] + _no_aggregate(c.kernel_spatial, 4)
        row += [c.output_batch, c.output_feature]
    else:
        row += [0.0] * 14
    row += [float(node.feature_group_count), float(node.batch_group_count)]
    start, stride, limit = node.slice or ((), (), ())
    row += _seq(start, 2) + _seq(stride, 2) + _seq(limit, 2)
    row += _seq(node.dynamic_slice_sizes, 2)
    low, high = node.padding or ((), ())
    row += _seq(low, 2) + _seq(high, 2)
    row += [1.0 if node.is_stable else 0.0]
    layout = default_minor_to_major(node.rank) if node.layout is None else node.layout
    row += _no_aggregate(layout, 6)
    return row


def with_layouts(node_feat: np.ndarray, minor_to_major: list[tuple[int, ...]]) -> np.ndarray:
    """float32 [nodes, 140]: a copy of node_feat whose layout columns (134-139) hold `minor_to_major[i]` for node
    i, written as the extractor writes them (first 6 entries, zero padded)."""
    if len(minor_to_major) != len(node_feat):
        raise ValueError(f"{len(minor_to_major)} layouts for {len(node_feat)} nodes")
    out = np.array(node_feat, dtype=np.float32, copy=True)
    out[:, LAYOUT_COLUMNS] = np.array([_no_aggregate(m, MAX_DIMS) for m in minor_to_major], np.float32).reshape(
        len(out), MAX_DIMS)                                                 # [nodes, 6]
    return out


def node_feat_matrix(graph: HloGraph) -> np.ndarray:
    """float32 [nodes, 140]."""
    rows = [node_row(n) for n in graph.nodes]
    bad = [i for i, r in enumerate(rows) if len(r) != NODE_FEAT_DIM]
    if bad:
        raise AssertionError(f"node {bad[0]} has {len(rows[bad[0]])} feature columns, expected {NODE_FEAT_DIM}")
    return np.array(rows, dtype=np.float32)   # [nodes, 140]
