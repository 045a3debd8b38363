"""What layouts mean, in numpy, for every model: HLO layouts with their row-major fallback, block codes, operand
slots and tensor sizes (docs/tpugraphs-format.md, section 2e).

A layout block is a minor-to-major list of `MAX_DIMS` slots (dimension indices 0..rank-1, then -1 padding). A
layout configuration gives every configurable node three blocks (`LAYOUT_BLOCKS`: output, input = operand 0,
kernel = operand 1); an all -1 block leaves the compiler's choice, which the graph records as the node's HLO layout
(node_feat `layout_minor_to_major_0..5`). LightGBM features (pipeline.features.layout) and GNN inputs
(pipeline.graphnet.layout_inputs, pipeline.graphnet.data) both build on these functions.
"""
from __future__ import annotations

import numpy as np

from pipeline.tpugraphs.schema import LAYOUT_BLOCKS, LAYOUT_COLUMNS, LAYOUT_VALUE_MIN, MAX_DIMS, SHAPE_COLUMNS

CODE_BASE = 7                                        # block values -1..5, shifted by +1 to 0..6, are base-7 digits
BLOCK_CODE_WEIGHTS = CODE_BASE ** np.arange(MAX_DIMS)   # [6] int64 weight of each slot's digit
NOT_FED = -1                                         # operand_slots of an edge that feeds no layout block
TPU_TILE_MINOR, TPU_TILE_SECOND_MINOR = 128, 8       # TPU (8, 128) vector tile: minor dim pads to 128, 2nd-minor to 8


def padded_length(size, tile: int):
    """The length a dim of `size` (an array or tensor of sizes >= 1) occupies on tiles of `tile`:
    ceil(size / tile) * tile, in the type of `size`. LightGBM's layout and tile features and the GNN's padding
    inputs all pad through this one function."""
    return -(-size // tile) * tile


def ranks(node_feat_raw: np.ndarray) -> np.ndarray:
    """int64 [nodes]: each node's output rank (non-negative entries of shape_dimensions, as re-padded by prune)."""
    return (np.asarray(node_feat_raw)[:, SHAPE_COLUMNS] >= 0).sum(axis=1)


def is_layout(layout: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """bool [nodes]: layout[i] [6] is a permutation of 0..rank[i]-1 followed by -1 padding."""
    slots = np.arange(MAX_DIMS)
    inside = slots[None, :] < rank[:, None]                                       # [nodes, 6]
    pad_ok = np.all(np.where(inside, True, layout == -1), axis=1)
    values = np.where(inside, layout, -1)
    counts = np.stack([(values == d).sum(axis=1) for d in range(MAX_DIMS)], axis=1)   # [nodes, 6]
    return pad_ok & np.all(np.where(inside, counts == 1, counts == 0), axis=1)


def row_major(rank: np.ndarray) -> np.ndarray:
    """int64 [nodes, 6]: XLA's default layout for each rank (most minor = last dim: rank-1, ..., 0, then -1)."""
    slots = np.arange(MAX_DIMS)
    return np.where(slots[None, :] < rank[:, None], rank[:, None] - 1 - slots[None, :], -1)


def hlo_layouts(node_feat_raw: np.ndarray) -> np.ndarray:
    """int64 [nodes, 6]: each node's HLO minor-to-major layout, values -1..5.

    A row that is not a layout of the node's rank (e.g. the zero-padded original files) falls back to XLA's
    row-major default (`row_major`).
    """
    raw = np.asarray(node_feat_raw)
    layout = np.rint(raw[:, LAYOUT_COLUMNS]).astype(np.int64)                    # [nodes, 6]
    rank = ranks(raw)
    return np.where(is_layout(layout, rank)[:, None], layout, row_major(rank))


def block_codes(blocks: np.ndarray) -> np.ndarray:
    """int32 [...]: base-7 code of each layout block [..., 6] (values -1..5); equal codes <=> equal blocks, and an
    all -1 (default) block has code 0."""
    code = np.zeros(blocks.shape[:-1], dtype=np.int32)
    for slot in range(MAX_DIMS):
        code += (blocks[..., slot].astype(np.int32) - LAYOUT_VALUE_MIN) * int(BLOCK_CODE_WEIGHTS[slot])
    return code


def config_positions(node_config_ids: np.ndarray, n_nodes: int) -> np.ndarray:
    """int64 [nodes]: position k of each node in node_config_ids, -1 for non-configurable nodes."""
    position = np.full(n_nodes, -1, np.int64)
    position[node_config_ids] = np.arange(len(node_config_ids))
    return position


def operand_rank(consumers: np.ndarray) -> np.ndarray:
    """int64 [edges]: operand index of each edge at its consumer, i.e. its rank among the edges of the same
    consumer in edge order (edge order = operand order). Vectorised: no Python loop over edges."""
    consumers = np.asarray(consumers, dtype=np.int64)
    order = np.argsort(consumers, kind="stable")                                  # edges grouped by consumer
    grouped = consumers[order]
    new_group = np.r_[True, grouped[1:] != grouped[:-1]] if len(grouped) else np.zeros(0, bool)
    starts = np.flatnonzero(new_group)                                           # first sorted index per group
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(grouped)]))       # [edges] in sorted order
    rank = np.empty(len(consumers), np.int64)
    rank[order] = np.arange(len(consumers)) - group_start
    return rank


def operand_slots(edges: np.ndarray, node_config_ids: np.ndarray, n_nodes: int) -> np.ndarray:
    """int64 [edges]: the layout block (1 input, 2 kernel) each edge (consumer, producer) feeds, NOT_FED otherwise.

    Operand i of a configurable consumer is its i-th in-edge in edge order; operands 0 and 1 feed blocks 1 and 2.
    """
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)                     # [edges, 2] (consumer, producer)
    configurable = config_positions(node_config_ids, n_nodes) >= 0
    rank = operand_rank(edges[:, 0])                                             # [edges]
    fed = configurable[edges[:, 0]] & (rank < len(LAYOUT_BLOCKS) - 1)
    return np.where(fed, 1 + rank, NOT_FED).astype(np.int64)


def element_counts(node_feat_raw: np.ndarray) -> np.ndarray:
    """float64 [nodes]: elements of each node's output tensor (product of its positive dimension sizes)."""
    shape = np.asarray(node_feat_raw, dtype=np.float64)[:, SHAPE_COLUMNS]
    return np.where(shape > 0, shape, 1.0).prod(axis=1)
