"""Per-configuration features of a layout graph, vectorised over configurations.

A layout configuration gives every configurable node three minor-to-major blocks of `node_config_feat`
(output_layout 0-5, input_layout 6-11, kernel_layout 12-17; -1 padded; an all -1 block = compiler default).
`layout_features(context, node_config_feat)` turns a chunk `[configs, NC, 18]` into `[configs, F]` with numpy
operations over the whole chunk (no Python loop per configuration). Feature groups:

- `layout_default`: compiler-default blocks per tensor (output/input/kernel) and default output blocks per node kind;
- `layout_perm`: how many nodes of each kind (conv/dot/reshape/other) use each minor-to-major permutation, per
  tensor and rank (ranks 1..`max_perm_rank`; larger ranks counted together);
- `layout_disagree`: copies the compiler must insert: edges between two configurable nodes whose producer
  output_layout differs from the consumer input_layout (both chosen; one default; under the effective layouts
  where a default block means the node's HLO layout), configurable consumers whose chosen input_layout differs
  from the HLO layout of a fixed producer, and nodes whose chosen output_layout differs from their HLO layout;
- `layout_minor`: sizes of the two most-minor output dimensions under the effective layout and the padding
  waste of TPU (8, 128) tiles: sum of log2 sizes, counts of aligned/small dims, padded/raw element ratio;
- `layout_top_nodes`: the layout of each of the `top_nodes` largest configurable nodes, slot by slot
  (`pipeline.features.top_nodes`).
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from pipeline.choices import LGBM_LAYOUT_GROUPS
from pipeline.features import top_nodes as features_top_nodes
from pipeline.pruned import PrunedGraph
from pipeline.tpugraphs import layouts
from pipeline.tpugraphs.layouts import TPU_TILE_MINOR, TPU_TILE_SECOND_MINOR, block_codes, padded_length
from pipeline.tpugraphs.schema import (CONVOLUTION_OPCODE, DOT_OPCODE, LAYOUT_BLOCKS, LAYOUT_VALUE_MIN, MAX_DIMS,
                                       RESHAPE_OPCODE, SHAPE_COLUMNS)

NODE_KIND_OPCODES = {"conv": CONVOLUTION_OPCODE, "dot": DOT_OPCODE, "reshape": RESHAPE_OPCODE}
NODE_KINDS = (*NODE_KIND_OPCODES, "other")    # what the layout_default / layout_perm counts are split by
LAYOUT_GROUPS = LGBM_LAYOUT_GROUPS


@dataclass(frozen=True)
class LayoutContext:
    """What the configuration features need from one graph, computed once per graph.

    Position k counts the configurable nodes in increasing node id, whatever order the file stores
    `node_config_ids` in (the format allows any): `layout_features` reorders each chunk's node axis by `order`,
    so every feature, sums over nodes included, is bit-for-bit independent of the stored order.
    """

    ids: np.ndarray           # [NC] int64 node ids in increasing order (position k -> node id)
    order: np.ndarray | None  # [NC] stored position of the k-th id (argsort of node_config_ids); None: already sorted
    kind: np.ndarray          # [NC] index into NODE_KINDS
    shape: np.ndarray         # [NC, 6] float64 output dimension sizes, -1 past the rank
    hlo_layout: np.ndarray    # [NC, 6] int8 effective layout used for default blocks (HLO layout or XLA default)
    edge_pairs: np.ndarray    # [P, 2] (consumer k, producer k), both configurable (k indexes ids)
    fixed_consumer: np.ndarray  # [Q] configurable consumer k with a non-configurable producer
    fixed_layout: np.ndarray  # [Q, 6] int8 HLO layout of that producer
    hlo_code: np.ndarray      # [NC] int32 block code of hlo_layout
    fixed_code: np.ndarray    # [Q] int32 block code of fixed_layout
    edge_elements: np.ndarray  # [P] float64 elements of the producer tensor of each configurable edge
    fixed_elements: np.ndarray  # [Q] float64 elements of each fixed producer's tensor
    minor_table: np.ndarray   # [NC, 7, 7, 9] float64 statistics per (most-minor, second-minor) dim, see _minor_table


def layout_context(graph: PrunedGraph) -> LayoutContext:
    """Precompute node kinds, shapes, HLO layouts and the configurable edges of one layout graph."""
    if graph.node_config_ids is None:
        raise ValueError(f"graph {graph.graph_id!r}: node_config_ids missing; layout features need a layout graph")
    stored = np.asarray(graph.node_config_ids, dtype=np.int64)
    order = np.argsort(stored, kind="stable")
    ids = stored[order]
    raw = np.asarray(graph.node_feat_raw)
    opcode = np.asarray(graph.node_opcode)[ids]
    kind = np.full(len(ids), len(NODE_KINDS) - 1, dtype=np.int64)
    for k, code in enumerate(NODE_KIND_OPCODES.values()):
        kind[opcode == code] = k
    all_shape = raw[:, SHAPE_COLUMNS].astype(np.float64)                     # [N, 6]
    all_layout = layouts.hlo_layouts(raw).astype(np.int8)                    # [N, 6], row-major fallback
    position = layouts.config_positions(ids, len(raw))                       # node id -> k, -1 if fixed
    edges = np.asarray(graph.edge_index, dtype=np.int64).reshape(-1, 2)       # [E, 2] (consumer, producer)
    consumer_k, producer_k = position[edges[:, 0]], position[edges[:, 1]]
    both = (consumer_k >= 0) & (producer_k >= 0)
    fixed = (consumer_k >= 0) & (producer_k < 0)
    fixed_layout = all_layout[edges[fixed, 1]]
    all_elements = layouts.element_counts(raw)                               # [N]
    sorted_already = bool(np.all(order == np.arange(len(order))))
    return LayoutContext(ids=ids, order=None if sorted_already else order, kind=kind, shape=all_shape[ids],
                         hlo_layout=all_layout[ids],
                         edge_pairs=np.stack([consumer_k[both], producer_k[both]], 1),
                         fixed_consumer=consumer_k[fixed], fixed_layout=fixed_layout,
                         edge_elements=all_elements[edges[both, 1]], fixed_elements=all_elements[edges[fixed, 1]],
                         hlo_code=block_codes(all_layout[ids]), fixed_code=block_codes(fixed_layout),
                         minor_table=_minor_table(all_shape[ids]))


@functools.lru_cache(maxsize=8)
def _perm_table(max_perm_rank: int) -> tuple[np.ndarray, list[str]]:
    """Lookup base-7 block code -> permutation column (-1: default block or rank > max_perm_rank)."""
    table = np.full(layouts.CODE_BASE ** MAX_DIMS, -1, dtype=np.int64)
    names = []
    for rank in range(1, max_perm_rank + 1):
        for perm in itertools.permutations(range(rank)):
            block = np.array(list(perm) + [LAYOUT_VALUE_MIN] * (MAX_DIMS - rank))
            table[int(block_codes(block))] = len(names)
            names.append("".join(map(str, perm)))
    return table, names + ["rank_gt"]


def layout_feature_names(groups: set[str], max_perm_rank: int, top_nodes: int = 0) -> list[str]:
    """Column names of `layout_features` for the enabled groups, in order."""
    names = []
    if "layout_default" in groups:
        names += [f"default_{t}" for t in LAYOUT_BLOCKS] + [f"default_output_{k}" for k in NODE_KINDS]
    if "layout_perm" in groups:
        _, perms = _perm_table(max_perm_rank)
        names += [f"perm_{t}_{k}_{p}" for t in LAYOUT_BLOCKS for k in NODE_KINDS for p in perms]
    if "layout_disagree" in groups:
        names += ["disagree_edges", "disagree_edges_one_default", "disagree_edges_effective",
                  "disagree_fixed_producer", "disagree_own_hlo_layout",
                  "copy_elements_log2", "copy_elements_effective_log2", "copy_elements_fixed_log2"]
    if "layout_minor" in groups:
        names += ["minor0_log2_sum", "minor1_log2_sum", "minor0_aligned128", "minor1_aligned8",
                  "minor0_small", "minor0_log2_weighted", "minor0_aligned128_weighted",
                  "minor1_aligned8_weighted", "pad_ratio", "pad_waste_log2"]
    if "layout_top_nodes" in groups:
        names += features_top_nodes.top_node_names(top_nodes)
    return names


def layout_features(ctx: LayoutContext, node_config_feat: np.ndarray, groups: set[str],
                    max_perm_rank: int, top_nodes: int = 0) -> np.ndarray:
    """Features of a chunk of configurations.

    Args:
        ctx: `layout_context` of the graph.
        node_config_feat: int8 [configs, NC, 18] rows of the graph's node_config_feat, node axis as stored.
        groups: enabled feature groups (names in LAYOUT_GROUPS; others are ignored).
        max_perm_rank: largest rank whose permutations get their own `layout_perm` column.

    Returns:
        float32 [configs, len(layout_feature_names(groups, max_perm_rank, top_nodes))].
    """
    feat = np.asarray(node_config_feat, dtype=np.int8)
    if ctx.order is not None:
        feat = feat[:, ctx.order]                                             # node axis in increasing node id
    n_configs, n_nodes = feat.shape[:2]
    blocks = feat.reshape(n_configs, n_nodes, len(LAYOUT_BLOCKS), MAX_DIMS)   # [configs, NC, 3, 6]
    code = block_codes(blocks)                                                # [configs, NC, 3]
    is_default = code == 0
    out, inp = code[:, :, 0], code[:, :, 1]                                   # [configs, NC]
    columns = []
    if "layout_default" in groups:
        weights = np.zeros((n_nodes, len(LAYOUT_BLOCKS), len(LAYOUT_BLOCKS) + len(NODE_KINDS)), dtype=np.float32)
        weights[:, np.arange(len(LAYOUT_BLOCKS)), np.arange(len(LAYOUT_BLOCKS))] = 1.0    # default blocks per tensor
        weights[np.arange(n_nodes), 0, len(LAYOUT_BLOCKS) + ctx.kind] = 1.0         # default outputs per node kind
        flat = is_default.astype(np.float32).reshape(n_configs, -1)          # [configs, NC * 3]
        columns.append(flat @ weights.reshape(n_nodes * len(LAYOUT_BLOCKS), -1))    # [configs, 3 + kinds]
    if "layout_perm" in groups:
        table, perms = _perm_table(max_perm_rank)
        col = table[code]                                                     # [configs, NC, 3]
        col = np.where((col < 0) & ~is_default, len(perms) - 1, col)          # rank > max_perm_rank
        tensor = np.arange(len(LAYOUT_BLOCKS))[None, None, :]
        n_cols = len(LAYOUT_BLOCKS) * len(NODE_KINDS) * len(perms)
        flat = (tensor * len(NODE_KINDS) + ctx.kind[None, :, None]) * len(perms) + col \
            + np.arange(n_configs)[:, None, None] * n_cols
        counts = np.bincount(flat[col >= 0], minlength=n_configs * n_cols)
        columns.append(counts.reshape(n_configs, n_cols))                     # [configs, 3 * kinds * perms]
    effective = np.where(is_default[:, :, 0], ctx.hlo_code[None], out)        # [configs, NC]
    if "layout_disagree" in groups:
        c, p = ctx.edge_pairs[:, 0], ctx.edge_pairs[:, 1]
        consumer_default, producer_default = is_default[:, c, 1], is_default[:, p, 0]   # [configs, P]
        consumer_in = np.where(consumer_default, ctx.hlo_code[None, p], inp[:, c])
        q = ctx.fixed_consumer
        copies = ~consumer_default & ~producer_default & (out[:, p] != inp[:, c])     # [configs, P]
        copies_effective = effective[:, p] != consumer_in
        copies_fixed = ~is_default[:, q, 1] & (inp[:, q] != ctx.fixed_code[None])     # [configs, Q]
        columns.append(np.stack([
            copies.sum(1), (consumer_default ^ producer_default).sum(1), copies_effective.sum(1),
            copies_fixed.sum(1), (~is_default[:, :, 0] & (out != ctx.hlo_code[None])).sum(1),
            np.log2(1.0 + copies @ ctx.edge_elements), np.log2(1.0 + copies_effective @ ctx.edge_elements),
            np.log2(1.0 + copies_fixed @ ctx.fixed_elements),
        ], 1))
    if groups & {"layout_minor", "layout_top_nodes"}:
        slot0, slot1 = _minor_slots(ctx, blocks, is_default[:, :, 0])     # once for both groups
    if "layout_minor" in groups:
        columns.append(_minor_features(ctx, slot0, slot1))
    if "layout_top_nodes" in groups:
        columns.append(features_top_nodes.top_node_features(ctx.shape, ctx.ids, ctx.kind, ctx.minor_table, blocks,
                                                            slot0, slot1, top_nodes))
    if not columns:
        return np.zeros((n_configs, 0), dtype=np.float32)
    return np.concatenate(columns, axis=1).astype(np.float32)


def _minor_table(shape: np.ndarray) -> np.ndarray:
    """float64 [NC, 7, 7, 6]: minor-dim statistics of each node for (most-minor dim + 1, second-minor dim + 1).

    Statistics: log2 minor0, log2 minor1, minor0 % 128 == 0, minor1 % 8 == 0, minor0 < 128, the first and
    the two alignment flags weighted by the node's elements, padded elements (minor0 padded to 128 and minor1
    to 8). Dim -1 (rank 0 or 1) has size 1.
    """
    sizes = np.concatenate([np.ones((len(shape), 1)), np.where(shape > 0, shape, 1.0)], axis=1)  # [NC, 7]
    minor0, minor1 = sizes[:, :, None], sizes[:, None, :]                     # [NC, 7, 1], [NC, 1, 7]
    elements = sizes.prod(1)[:, None, None]
    padded_minor = padded_length(minor0, TPU_TILE_MINOR) * padded_length(minor1, TPU_TILE_SECOND_MINOR)
    stats = [np.log2(minor0), np.log2(minor1), minor0 % TPU_TILE_MINOR == 0, minor1 % TPU_TILE_SECOND_MINOR == 0,
             minor0 < TPU_TILE_MINOR]
    stats += [elements * stats[0], elements * stats[2], elements * stats[3],
              elements / (minor0 * minor1) * padded_minor]
    return np.stack(np.broadcast_arrays(*stats), axis=-1).astype(np.float64)


def _minor_slots(ctx: LayoutContext, blocks: np.ndarray, out_default: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int64 [configs, NC] each: the most-minor and second-minor output dim under the effective layout (-1: none)."""
    slot0 = np.where(out_default, ctx.hlo_layout[None, :, 0], blocks[:, :, 0, 0]).astype(np.int64)
    slot1 = np.where(out_default, ctx.hlo_layout[None, :, 1], blocks[:, :, 0, 1]).astype(np.int64)
    return slot0, slot1


def _minor_features(ctx: LayoutContext, slot0: np.ndarray, slot1: np.ndarray) -> np.ndarray:
    """[configs, 10] minor-dimension sizes and (8, 128) padding waste under the effective output layouts
    (`slot0`, `slot1`: `_minor_slots`)."""
    n_nodes = slot0.shape[1]
    index = (np.arange(n_nodes)[None, :] * 7 + slot0 + 1) * 7 + slot1 + 1
    stats = ctx.minor_table.reshape(-1, ctx.minor_table.shape[-1])[index].sum(1)  # [configs, 9]
    elements = max(np.where(ctx.shape > 0, ctx.shape, 1.0).prod(1).sum(), 1.0)
    return np.column_stack([stats[:, :5], stats[:, 5:8] / elements, stats[:, 8] / elements,
                            np.log2(1.0 + np.maximum(stats[:, 8] - elements, 0.0))])
