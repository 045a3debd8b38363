"""pipeline.tpugraphs.layouts: the layout semantics both models use, on hand-written rows."""
from __future__ import annotations

import numpy as np
import torch

from pipeline.tpugraphs import layouts
from pipeline.tpugraphs.schema import LAYOUT_COLUMNS, NODE_FEAT_DIM, SHAPE_COLUMNS


def raw_rows(shapes: list[tuple[int, ...]], hlo: list[tuple[int, ...]]) -> np.ndarray:
    """node_feat_raw [nodes, 140]: -1 everywhere but the given shape_dimensions and layout_minor_to_major."""
    raw = np.full((len(shapes), NODE_FEAT_DIM), -1.0, np.float32)
    for i, (shape, layout) in enumerate(zip(shapes, hlo)):
        raw[i, SHAPE_COLUMNS.start:SHAPE_COLUMNS.start + len(shape)] = shape
        raw[i, LAYOUT_COLUMNS.start:LAYOUT_COLUMNS.start + len(layout)] = layout
    return raw


def test_is_layout_needs_a_permutation_of_the_rank_then_padding():
    rank = np.array([2, 2, 2, 3, 0])
    blocks = np.array([[1, 0, -1, -1, -1, -1],      # valid
                       [0, 0, -1, -1, -1, -1],      # repeated dim
                       [1, 0, 2, -1, -1, -1],       # a dim past the rank
                       [2, 0, 1, -1, -1, -1],       # valid rank 3
                       [-1] * 6])                   # rank 0: all padding
    assert layouts.is_layout(blocks, rank).tolist() == [True, False, False, True, True]


def test_hlo_layouts_fall_back_to_row_major():
    raw = raw_rows([(4, 8), (4, 8, 2), (4, 8)], [(0, 1), (), (1, 1)])
    raw[1, LAYOUT_COLUMNS] = 0.0                    # the original files' zero padding: not a layout of rank 3
    assert layouts.hlo_layouts(raw).tolist() == [[0, 1, -1, -1, -1, -1],
                                                 [2, 1, 0, -1, -1, -1],
                                                 [1, 0, -1, -1, -1, -1]]
    assert layouts.ranks(raw).tolist() == [2, 3, 2]


def test_block_codes_are_base_seven_digits_of_the_values_plus_one():
    blocks = np.array([[-1] * 6, [1, 0, -1, -1, -1, -1], [0, 1, -1, -1, -1, -1]])
    assert layouts.block_codes(blocks).tolist() == [0, 2 + 1 * 7, 1 + 2 * 7]


def test_operand_slots_follow_edge_order_of_configurable_consumers():
    # node 1 is configurable: its in-edges from 0 and 2 feed input (1) and kernel (2); a third operand feeds nothing
    edges = np.array([(1, 0), (3, 1), (1, 2), (1, 3)])
    assert layouts.operand_slots(edges, np.array([1]), 4).tolist() == [1, layouts.NOT_FED, 2, layouts.NOT_FED]
    assert layouts.config_positions(np.array([3, 1]), 4).tolist() == [-1, 1, -1, 0]


def test_element_counts_ignore_padding():
    raw = raw_rows([(4, 8), (3,), ()], [(), (), ()])
    assert layouts.element_counts(raw).tolist() == [32.0, 3.0, 1.0]


def test_padded_length_by_hand_on_arrays_and_tensors():
    sizes = np.array([1.0, 8.0, 9.0, 127.0, 128.0, 129.0, 300.0])
    assert layouts.padded_length(sizes, 128).tolist() == [128, 128, 128, 128, 128, 256, 384]
    assert layouts.padded_length(sizes, 8).tolist() == [8, 8, 16, 128, 128, 136, 304]
    tensor = layouts.padded_length(torch.tensor(sizes, dtype=torch.float32), 8)
    assert tensor.dtype == torch.float32 and tensor.tolist() == [8, 8, 16, 128, 128, 136, 304]
