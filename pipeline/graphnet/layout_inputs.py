"""What a layout configuration means for each node and edge: effective layouts and layout mismatches (copies).

A layout config gives each configurable node three minor-to-major blocks (output, input = first operand,
kernel = second operand); an all -1 block leaves the compiler's choice, which the graph records as the node's
HLO layout (`node_feat_raw` columns `layout_minor_to_major_0..5`). Two per-config views follow from that:

- effective blocks (`effective_configs`): a default block replaced by the layout it stands for (output: the node's
  own HLO layout; input / kernel: the HLO layout of that operand), so a block set explicitly to its default
  and an all -1 block look the same to the model; a per-block "was default" flag keeps the distinction.
- mismatched edges (`mismatch_features`): runtime is a sum of per-op costs plus a transpose copy wherever a
  consumer reads its producer's output in a layout other than the one produced. An edge mismatches when the
  producer's effective output layout differs from the layout the consumer expects: its explicit input (kernel)
  block when it has one, else the producer's HLO layout (what it would have read under the default config).
  Per node this gives (mismatched in-edges, their log tensor size, mismatched out-edges, their log tensor size).

Layout blocks are compared by a base-7 code of their values (+1), so equal codes <=> equal layouts.
"""
from __future__ import annotations

import numpy as np
import torch

LAYOUT_COLUMNS = slice(134, 140)   # node_feat_raw columns layout_minor_to_major_0..5 (the node's HLO layout)
SHAPE_COLUMNS = slice(21, 27)      # node_feat_raw columns shape_dimensions_0..5
MAX_DIMS = 6                       # slots per layout block
LAYOUT_BLOCKS = 3                  # output, input (operand 0), kernel (operand 1)
MISMATCH_FEATURES = 4              # per node: in-edges, in log-size, out-edges, out log-size
_BASE = 7                          # values -1..5 stored +1 as 0..6
NO_SLOT = -1


def hlo_layouts(node_feat_raw: np.ndarray) -> np.ndarray:
    """int64 [nodes, 6]: each node's HLO minor-to-major layout stored +1 (0 = padding).

    A row that is not a permutation of 0..rank-1 padded with -1 (e.g. the zero-padded original files) falls back
    to XLA's row-major default for the node's rank (rank = non-negative entries of shape_dimensions).
    """
    raw = np.asarray(node_feat_raw, dtype=np.float64)
    layout = np.rint(raw[:, LAYOUT_COLUMNS]).astype(np.int64)                   # [nodes, 6]
    rank = (raw[:, SHAPE_COLUMNS] >= 0).sum(axis=1)                              # [nodes]
    slots = np.arange(MAX_DIMS)
    inside = slots[None, :] < rank[:, None]                                      # [nodes, 6]
    row_major = np.where(inside, rank[:, None] - 1 - slots[None, :], -1)         # [nodes, 6]
    values = np.where(inside, layout, -1)
    counts = np.stack([(values == d).sum(axis=1) for d in range(MAX_DIMS)], axis=1)   # [nodes, 6]
    valid = np.all(np.where(inside, counts == 1, counts == 0), axis=1) & np.all(np.where(inside, True, layout == -1), 1)
    return np.where(valid[:, None], layout, row_major) + 1


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
    """int64 [edges]: config block (1 input, 2 kernel) an edge feeds: operand 0 / 1 of a configurable consumer in
    edge order; NO_SLOT for other edges."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    configurable = np.zeros(n_nodes, bool)
    configurable[node_config_ids] = True
    rank = operand_rank(edges[:, 0])                                             # [edges]
    fed = configurable[edges[:, 0]] & (rank < LAYOUT_BLOCKS - 1)
    return np.where(fed, 1 + rank, NO_SLOT).astype(np.int64)


def log_elements(node_feat_raw: np.ndarray) -> np.ndarray:
    """float32 [nodes]: log1p of the number of elements of each node's output tensor."""
    shape = np.asarray(node_feat_raw, dtype=np.float64)[:, SHAPE_COLUMNS]
    return np.log1p(np.where(shape > 0, shape, 1.0).prod(axis=1)).astype(np.float32)


def block_codes(blocks: torch.Tensor) -> torch.Tensor:
    """int64 [...] base-7 code of layout blocks [..., 6] stored +1; all-padding (default) blocks get code 0."""
    weights = _BASE ** torch.arange(MAX_DIMS, device=blocks.device)
    return (blocks * weights).sum(dim=-1)


def effective_configs(configs: torch.Tensor, default_blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Default blocks replaced by the layouts they stand for.

    Args:
        configs: int64 [configs, configurable, 18] values +1 (0 = -1).
        default_blocks: int64 [configurable, 3, 6] the HLO layouts (+1) of each node's output / operand 0 / operand 1.
    Returns:
        (int64 [configs, configurable, 18] effective blocks, bool [configs, configurable, 3] block was default).
    """
    n_configs, n_cfg, _ = configs.shape
    blocks = configs.reshape(n_configs, n_cfg, LAYOUT_BLOCKS, MAX_DIMS)           # [configs, configurable, 3, 6]
    is_default = (blocks == 0).all(dim=-1)                                       # [configs, configurable, 3]
    eff = torch.where(is_default.unsqueeze(-1), default_blocks.unsqueeze(0), blocks)
    return eff.reshape(n_configs, n_cfg, -1), is_default                         # [configs, configurable, 18]


def mismatch_features(configs: torch.Tensor, is_default: torch.Tensor, graph) -> torch.Tensor:
    """float32 [configs, nodes, MISMATCH_FEATURES]: mismatched in/out edges of every node and their log sizes.

    Args:
        configs: int64 [configs, configurable, 18] effective blocks (`effective_configs`).
        is_default: bool [configs, configurable, 3].
        graph: GraphTensors with hlo_code, node_config_ids, edge_slot, log_elements.
    """
    n_configs = configs.shape[0]
    codes = block_codes(configs.reshape(n_configs, configs.shape[1], LAYOUT_BLOCKS, MAX_DIMS))  # [configs, cfg, 3]
    produced = graph.hlo_code.unsqueeze(0).expand(n_configs, -1).clone()        # [configs, nodes]
    produced[:, graph.node_config_ids] = codes[:, :, 0]
    expected = graph.hlo_code[graph.producer].unsqueeze(0).expand(n_configs, -1).clone()  # [configs, edges]
    fed = graph.edge_slot >= 0                                                   # [edges]
    if bool(fed.any()):
        k, slot = graph.edge_consumer_k[fed], graph.edge_slot[fed]
        explicit = ~is_default[:, k, slot]                                       # [configs, fed edges]
        expected[:, fed] = torch.where(explicit, codes[:, k, slot], expected[:, fed])
    mismatch = (produced[:, graph.producer] != expected).float()                # [configs, edges]
    size = mismatch * graph.log_elements[graph.producer]                         # [configs, edges]
    per_edge = torch.stack([mismatch, size], dim=-1)                             # [configs, edges, 2]
    out = per_edge.new_zeros(n_configs, graph.n_nodes, MISMATCH_FEATURES)
    out[..., :2].index_add_(1, graph.consumer, per_edge)                         # copies this node reads
    out[..., 2:].index_add_(1, graph.producer, per_edge)                         # copies of this node's output
    return out
