"""The cost models: one score per configuration, lower = predicted faster.

- `LayoutModel` (early fusion): node + layout-config embeddings `[configs, nodes, hidden]` -> SAGE blocks (each with
  the cross-config gate when enabled) -> mean+max pooling over nodes -> config self-attention -> MLP head.
- `TileModel` (late fusion, 1st place): the graph is encoded once (`[1, nodes, hidden]`, config-independent),
  pooled, then joined with the embedded 24 tile config features -> config self-attention -> MLP head.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from pipeline.gnn.attention import ConfigGate, ConfigSelfAttention
from pipeline.gnn.data import GraphTensors
from pipeline.gnn.embeddings import LayoutConfigEncoder, NodeEncoder, TileConfigEncoder
from pipeline.gnn.layers import SAGEBlock

KINDS = ("layout", "tile")


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to rebuild a model (stored with its weights)."""

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

    @classmethod
    def from_cfg(cls, kind: str, node_feat_dim: int, gnn) -> "ModelSpec":
        """Build from the `gnn` config group."""
        return cls(kind=kind, node_feat_dim=int(node_feat_dim), hidden=int(gnn.hidden), opcode_dim=int(gnn.opcode_dim),
                   config_value_dim=int(gnn.config_value_dim), layers=int(gnn.layers), dropout=float(gnn.dropout),
                   norm=str(gnn.norm), residual=bool(gnn.residual), cross_attention=bool(gnn.cross_attention),
                   attention_heads=int(gnn.attention_heads))

    def to_dict(self) -> dict:
        return asdict(self)


def pool_nodes(x: torch.Tensor) -> torch.Tensor:
    """Mean and max over nodes: [configs, nodes, dim] -> [configs, 2 * dim]."""
    return torch.cat([x.mean(dim=1), x.amax(dim=1)], dim=-1)


def _head(dim_in: int, hidden: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim_in, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, 1))


def _blocks(spec: ModelSpec, gated: bool) -> nn.ModuleList:
    return nn.ModuleList(
        SAGEBlock(spec.hidden, spec.norm, spec.dropout, spec.residual, ConfigGate(spec.hidden) if gated else None)
        for _ in range(spec.layers))


class LayoutModel(nn.Module):
    """forward(graph, configs int64 [configs, configurable nodes, 18] in 0..6) -> scores [configs]."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.nodes = NodeEncoder(spec.node_feat_dim, spec.hidden, spec.opcode_dim)
        self.configs = LayoutConfigEncoder(spec.hidden, spec.config_value_dim)
        self.blocks = _blocks(spec, gated=spec.cross_attention)
        pooled = 2 * spec.hidden
        self.attention = ConfigSelfAttention(pooled, spec.attention_heads, spec.dropout) if spec.cross_attention else None
        self.head = _head(pooled, spec.hidden, spec.dropout)
        self.node_head = _head(spec.hidden, spec.hidden, spec.dropout)   # additive per-node cost (mean over nodes)

    def forward(self, graph: GraphTensors, configs: torch.Tensor) -> torch.Tensor:
        if graph.node_config_ids is None:
            raise ValueError(f"graph {graph.graph_id}: a layout model needs node_config_ids")
        node_h = self.nodes(graph.node_feat, graph.node_opcode)              # [nodes, hidden]
        x = self.configs(node_h, graph.node_config_ids, configs, graph.operand_dims)  # [configs, nodes, hidden]
        for block in self.blocks:
            x = block(x, graph)                                              # [configs, nodes, hidden]
        per_node = self.node_head(x).squeeze(-1).mean(dim=1)                 # [configs]
        z = pool_nodes(x)                                                    # [configs, 2 * hidden]
        if self.attention is not None:
            z = self.attention(z)
        return self.head(z).squeeze(-1) + per_node                           # [configs]


class TileModel(nn.Module):
    """forward(graph, configs float32 [configs, 24] normalised) -> scores [configs]."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.nodes = NodeEncoder(spec.node_feat_dim, spec.hidden, spec.opcode_dim)
        self.blocks = _blocks(spec, gated=False)  # the graph pass has one "config": nothing to compare
        self.configs = TileConfigEncoder(spec.hidden)
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


def build_model(spec: ModelSpec) -> nn.Module:
    """The model for a collection kind."""
    if spec.kind == "layout":
        return LayoutModel(spec)
    if spec.kind == "tile":
        return TileModel(spec)
    raise ValueError(f"unknown collection kind {spec.kind!r}; expected one of {KINDS}")
