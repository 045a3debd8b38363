"""The cost models: one score per configuration, lower = predicted faster.

- `LayoutModel` (early fusion): node + layout-config embeddings `[configs, nodes, hidden]` (optionally with the
  effective layouts and the mismatched edges a config causes) -> SAGE blocks (each with a cross-config mixer when
  enabled: the 1st-place gate or centering over configs) -> score = reduction (sum or mean) over nodes of a
  per-node scalar head (runtime is a sum of per-op costs, as the 2nd place's sum-reduced outputs) + optionally an
  MLP head on mean+max pooled nodes (after config self-attention when enabled).
- `TileModel` (late fusion, 1st place): the graph is encoded once (`[1, nodes, hidden]`, config-independent),
  pooled, then joined with the embedded 24 tile config features -> config self-attention -> MLP head.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from pipeline.choices import GNN_REDUCTIONS
from pipeline.graphnet.attention import MIXERS, ConfigSelfAttention
from pipeline.graphnet.chunked import chunk_configs, chunked_summary
from pipeline.graphnet.data import GraphTensors
from pipeline.graphnet.embeddings import LayoutConfigEncoder, NodeEncoder, TileConfigEncoder
from pipeline.graphnet.layers import SAGEBlock, SharedDropout
from pipeline.tpugraphs.schema import COLLECTION_KINDS

REDUCTIONS = GNN_REDUCTIONS


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to rebuild a model (stored with its weights); from the `gnn` group by
    `pipeline.settings.gnn.model_spec`."""

    kind: str
    node_feat_dim: int
    hidden: int
    opcode_dim: int
    config_value_dim: int
    layers: int
    dropout: float
    norm: str
    residual: bool
    cross_attention: bool
    attention_heads: int
    cross_mixer: str          # per-node config mixer in every block when cross_attention: one of MIXERS
    cross_pooled: bool        # config self-attention over pooled embeddings when cross_attention
    effective_layout: bool    # layout: default blocks replaced by the layouts they stand for (+ flags)
    edge_mismatch: bool       # layout: per-node counts of mismatched (copy) edges under the config
    node_reduce: str | None   # layout: one of REDUCTIONS, of the per-node scalar head over nodes (tile: None)
    pooled_head: bool         # layout: add the MLP head on mean+max pooled nodes
    tile_geometry: bool = False   # tile: also read the tile relative to the kernel's output (tiles.tile_inputs);
                                  # the default only serves checkpoints saved before the setting existed
    layout_roles: bool = False    # layout: also read the roles of each block's two most-minor dims (a convolution's
                                  # feature / batch dims); the default serves checkpoints saved before it existed
    layout_padding: bool = False  # layout: also read the TPU (8, 128) tiling's padding waste of each block's two
                                  # most-minor dims; the default serves checkpoints saved before it existed

    def to_dict(self) -> dict:
        return asdict(self)


def pool_nodes(x: torch.Tensor) -> torch.Tensor:
    """Mean and max over nodes: [configs, nodes, dim] -> [configs, 2 * dim]."""
    return torch.cat([x.mean(dim=1), x.amax(dim=1)], dim=-1)


def _head(dim_in: int, hidden: int, dropout: float) -> nn.Sequential:
    """MLP to one scalar; the output layer starts at zero, so the first scores are all equal (no random initial
    order whose scale the ranking loss would first have to shrink, which summing over nodes makes large)."""
    out = nn.Linear(hidden, 1)
    nn.init.zeros_(out.weight)
    nn.init.zeros_(out.bias)
    return nn.Sequential(nn.Linear(dim_in, hidden), nn.GELU(), SharedDropout(dropout), out)


def _blocks(spec: ModelSpec, mixed: bool) -> nn.ModuleList:
    return nn.ModuleList(
        SAGEBlock(spec.hidden, spec.norm, spec.dropout, spec.residual,
                  MIXERS[spec.cross_mixer](spec.hidden) if mixed else None)
        for _ in range(spec.layers))


class LayoutModel(nn.Module):
    """forward(graph, configs int64 [configs, configurable nodes, 18] in 0..6) -> scores [configs]."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.nodes = NodeEncoder(spec.node_feat_dim, spec.hidden, spec.opcode_dim)
        self.configs = LayoutConfigEncoder(spec.hidden, spec.config_value_dim, spec.effective_layout,
                                           spec.edge_mismatch, spec.layout_roles, spec.layout_padding)
        self.blocks = _blocks(spec, mixed=spec.cross_attention)
        pooled = 2 * spec.hidden
        self.attention = None
        if spec.pooled_head and spec.cross_attention and spec.cross_pooled:
            self.attention = ConfigSelfAttention(pooled, spec.attention_heads, spec.dropout)
        self.head = _head(pooled, spec.hidden, spec.dropout) if spec.pooled_head else None
        self.node_head = _head(spec.hidden, spec.hidden, spec.dropout)   # additive per-node cost
        self.infer_chunk_mb: float | None = None   # CPU inference in config chunks (`chunked`); None = plain path

    @property
    def summary_dim(self) -> int:
        """Width of `segment_summary`: [sum of per-node scores (1), sum of node states, max of node states]."""
        return 1 + 2 * self.spec.hidden

    def head_parameters(self) -> list[nn.Parameter]:
        """The parameters after the node summary (config attention + pooled head): what GST fine-tunes."""
        return [p for m in (self.attention, self.head) if m is not None for p in m.parameters()]

    def segment_summary(self, graph: GraphTensors, configs: torch.Tensor,
                        own: torch.Tensor | None = None) -> torch.Tensor:
        """Additive summary of the nodes `own` (all when None): [configs, summary_dim].

        Columns: sum over those nodes of the per-node score, sum of their final states, max of their final states.
        Summaries of disjoint node sets combine exactly (sums add, maxima take the max), so a graph's summary can be
        assembled from its segments (pipeline.graphnet.segments) and `readout` gives the same score as `forward`.
        """
        if graph.node_config_ids is None:
            raise ValueError(f"graph {graph.graph_id}: a layout model needs node_config_ids")
        if (self.infer_chunk_mb is not None and not self.training and not torch.is_grad_enabled()
                and configs.device.type == "cpu"):
            chunk = chunk_configs(graph.n_nodes, self.spec.hidden, self.infer_chunk_mb)
            return chunked_summary(self, graph, configs, chunk, own)
        node_h = self.nodes(graph.node_feat, graph.node_opcode)              # [nodes, hidden]
        x = self.configs(node_h, graph, configs)                             # [configs, nodes, hidden]
        for block in self.blocks:
            x = block(x, graph)                                              # [configs, nodes, hidden]
        per_node = self.node_head(x).squeeze(-1)                             # [configs, nodes]
        if own is not None:
            x, per_node = x[:, own], per_node[:, own]                        # [configs, own nodes, (hidden)]
        return torch.cat([per_node.sum(dim=1, keepdim=True), x.sum(dim=1), x.amax(dim=1)], dim=-1)

    def readout(self, summary: torch.Tensor, n_nodes: int) -> torch.Tensor:
        """Scores [configs] from a whole graph's summary [configs, summary_dim] (`segment_summary`)."""
        hidden = self.spec.hidden
        node_sum, x_sum, x_max = summary.split([1, hidden, hidden], dim=-1)
        score = node_sum.squeeze(-1)                                         # [configs]
        if self.spec.node_reduce == "mean":
            score = score / n_nodes
        if self.head is None:
            return score
        z = torch.cat([x_sum / n_nodes, x_max], dim=-1)                      # [configs, 2 * hidden]: mean + max
        if self.attention is not None:
            z = self.attention(z)
        return self.head(z).squeeze(-1) + score                              # [configs]

    def forward(self, graph: GraphTensors, configs: torch.Tensor) -> torch.Tensor:
        return self.readout(self.segment_summary(graph, configs), graph.n_nodes)


class TileModel(nn.Module):
    """forward(graph, configs float32 [configs, 24 + tile inputs] (`data.tile_config_batch`)) -> scores [configs]."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.nodes = NodeEncoder(spec.node_feat_dim, spec.hidden, spec.opcode_dim)
        self.blocks = _blocks(spec, mixed=False)  # the graph pass has one "config": nothing to compare
        self.configs = TileConfigEncoder(spec.hidden, spec.tile_geometry)
        fused = 2 * spec.hidden
        self.fuse = nn.Sequential(nn.Linear(3 * spec.hidden, fused), nn.GELU())
        self.attention = ConfigSelfAttention(fused, spec.attention_heads, spec.dropout) if spec.cross_attention else None
        self.head = _head(fused, spec.hidden, spec.dropout)

    def encode_graph(self, graph: GraphTensors) -> torch.Tensor:
        """The configuration-independent graph embedding: [2 * hidden]."""
        x = self.nodes(graph.node_feat, graph.node_opcode).unsqueeze(0)      # [1, nodes, hidden]
        for block in self.blocks:
            x = block(x, graph)
        return pool_nodes(x).squeeze(0)                                      # [2 * hidden]

    def forward(self, graph: GraphTensors, configs: torch.Tensor) -> torch.Tensor:
        g = self.encode_graph(graph)                                         # [2 * hidden]
        c = self.configs(configs)                                            # [configs, hidden]
        z = self.fuse(torch.cat([g.expand(c.shape[0], -1), c], dim=-1))     # [configs, 2 * hidden]
        if self.attention is not None:
            z = self.attention(z)
        return self.head(z).squeeze(-1)                                      # [configs]


def build_model(spec: ModelSpec, infer_chunk_mb: float | None = None) -> nn.Module:
    """The model for a collection kind; layout models run CPU inference in chunks of `infer_chunk_mb` MB of node
    states when given (`gnn.infer_chunk_mb`, pipeline.graphnet.chunked)."""
    if spec.kind == "layout":
        model = LayoutModel(spec)
        model.infer_chunk_mb = None if infer_chunk_mb is None else float(infer_chunk_mb)
        return model
    if spec.kind == "tile":
        return TileModel(spec)
    raise ValueError(f"unknown collection kind {spec.kind!r}; expected one of {COLLECTION_KINDS}")
