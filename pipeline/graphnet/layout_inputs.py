"""What a layout configuration means for each node and edge: effective layouts and layout mismatches (copies).

A layout config gives each configurable node three minor-to-major blocks (output, input = first operand,
kernel = second operand); an all -1 block leaves the compiler's choice, which the graph records as the node's
HLO layout (`pipeline.tpugraphs.layouts`, which defines these semantics for every model). Two per-config views
follow from that, in torch because they are computed per config batch on the model's device:

- effective blocks (`effective_configs`): a default block replaced by the layout it stands for (output: the node's
  own HLO layout; input / kernel: the HLO layout of that operand), so a block set explicitly to its default
  and an all -1 block look the same to the model; a per-block "was default" flag keeps the distinction.
- mismatched edges (`mismatch_features`): runtime is a sum of per-op costs plus a transpose copy wherever a
  consumer reads its producer's output in a layout other than the one produced. An edge mismatches when the
  producer's effective output layout differs from the layout the consumer expects: its explicit input (kernel)
  block when it has one, else the producer's HLO layout (what it would have read under the default config).
  Per node this gives (mismatched in-edges, their log tensor size, mismatched out-edges, their log tensor size).

Layout blocks are compared by their codes (`layouts.block_codes`), so equal codes <=> equal layouts.
"""
from __future__ import annotations

import numpy as np
import torch

from pipeline.tpugraphs import layouts
from pipeline.tpugraphs.schema import LAYOUT_BLOCKS, LAYOUT_VALUE_MIN, MAX_DIMS

MISMATCH_FEATURES = 4              # per node: in-edges, in log-size, out-edges, out log-size


def hlo_layout_indices(node_feat_raw: np.ndarray) -> np.ndarray:
    """int64 [nodes, 6]: each node's HLO layout (`layouts.hlo_layouts`, row-major fallback) stored +1 (0 = padding),
    the encoding of the model's layout inputs."""
    return layouts.hlo_layouts(node_feat_raw) - LAYOUT_VALUE_MIN


def log_elements(node_feat_raw: np.ndarray) -> np.ndarray:
    """float32 [nodes]: log1p of the number of elements of each node's output tensor."""
    return np.log1p(layouts.element_counts(node_feat_raw)).astype(np.float32)


def index_block_codes(blocks: torch.Tensor) -> torch.Tensor:
    """int64 [...]: `layouts.block_codes` of layout blocks [..., 6] stored +1, on the blocks' device (per config
    batch, so it stays in torch); all-padding (default) blocks get code 0."""
    weights = torch.as_tensor(layouts.BLOCK_CODE_WEIGHTS, device=blocks.device)
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
    blocks = configs.reshape(n_configs, n_cfg, len(LAYOUT_BLOCKS), MAX_DIMS)           # [configs, configurable, 3, 6]
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
    blocks = configs.reshape(n_configs, configs.shape[1], len(LAYOUT_BLOCKS), MAX_DIMS)   # [configs, cfg, 3, 6]
    codes = index_block_codes(blocks)                                            # [configs, cfg, 3]
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
