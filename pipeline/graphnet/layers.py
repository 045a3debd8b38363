"""GraphSAGE message passing over both edge directions, with configurable norm, residual and dropout.

Node states are `[configs, nodes, hidden]`; edges are shared by every config. Mean aggregation is written with
`index_add` (no torch-geometric needed): messages from producers to consumers and from consumers to producers
have separate weights, as in the 1st/3rd/5th-place models.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.choices import GNN_NORMS
from pipeline.graphnet.data import GraphTensors

NORMS = GNN_NORMS


def mean_aggregate(x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, inv_deg: torch.Tensor,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """Mean of x over the in-edges src -> dst of each node, for every config.

    Args:
        x: [configs, nodes, dim] node states.
        src, dst: [edges] node ids; the message of edge e goes from src[e] to dst[e].
        inv_deg: [nodes] 1 / number of messages each node receives (1 when it receives none).
        out: [configs, nodes, dim] to add the means into (in place), instead of zeros.
    Returns:
        [configs, nodes, dim] (`out` when given); nodes that receive nothing get zeros (out unchanged).
    """
    weight = inv_deg.to(x.dtype)[dst]                                # [edges]: each message pre-divided
    messages = x.index_select(1, src) * weight[None, :, None]       # [configs, edges, dim]
    out = torch.zeros_like(x) if out is None else out
    return out.index_add_(1, dst, messages)                          # [configs, nodes, dim] sums over in-edges


class NodeNorm(nn.Module):
    """instance: normalise each config's channel over the nodes (InstanceNorm, as the 1st place); layer: over
    channels; none: identity."""

    def __init__(self, kind: str, dim: int, eps: float = 1e-5):
        super().__init__()
        self.kind, self.eps = kind, eps
        self.layer = nn.LayerNorm(dim) if kind == "layer" else None
        self.weight = nn.Parameter(torch.ones(dim)) if kind == "instance" else None
        self.bias = nn.Parameter(torch.zeros(dim)) if kind == "instance" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [configs, nodes, dim]
        if self.kind == "layer":
            return self.layer(x)
        if self.kind == "instance":
            if x.shape[1] < 2:                                       # one node (a tile kernel can have one): zero
                return (x - x) * self.weight + self.bias             # deviation, torch's norm refuses to train on it
            # torch's instance norm normalises [batch, channels, length] over length: here nodes, per config and
            # channel (x.var over the nodes axis, written out, trains 1.9x slower at 430 nodes on a CPU)
            out = F.instance_norm(x.transpose(1, 2), weight=self.weight, bias=self.bias, eps=self.eps)
            return out.transpose(1, 2)                               # [configs, dim, nodes] -> [configs, nodes, dim]
        return x


class SharedDropout(nn.Module):
    """Dropout whose mask is shared by every config: [configs, nodes, dim], one mask [1, nodes, dim].

    Configs of a graph are compared with each other; independent masks per config would add noise to every
    node of every config, swamping the few nodes in which `default`-search configs differ.
    """

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = torch.empty((1, *x.shape[1:]), device=x.device, dtype=x.dtype).bernoulli_(1.0 - self.p)
        return x * keep.div_(1.0 - self.p)                           # [configs, nodes, dim]; mask pre-scaled


class SAGEConv(nn.Module):
    """x_i' = W_self x_i + W_p mean_{producers j of i} x_j + W_c mean_{consumers j of i} x_j."""

    def __init__(self, dim_in: int, dim_out: int):
        super().__init__()
        self.dim_out = dim_out
        self.lin = nn.Linear(dim_in, 3 * dim_out)  # self, from-producers, from-consumers in one matmul

    def forward(self, x: torch.Tensor, graph: GraphTensors) -> torch.Tensor:
        h = self.lin(x)                                              # [configs, nodes, 3 * dim_out]
        h_self, h_prod, h_cons = h.split(self.dim_out, dim=-1)       # 3 x [configs, nodes, dim_out]
        # aggregation is linear, so transforming before aggregating is equivalent and as cheap; both means are
        # added into a copy of the self term (no zeroed buffers, no sums of whole states)
        out = h_self.clone(memory_format=torch.contiguous_format)    # [configs, nodes, dim_out]
        mean_aggregate(h_prod, graph.producer, graph.consumer, graph.inv_deg_consumer, out)  # from producers
        return mean_aggregate(h_cons, graph.consumer, graph.producer, graph.inv_deg_producer, out)  # from consumers


class SAGEBlock(nn.Module):
    """norm -> SAGEConv -> GELU -> dropout -> [config mixer] -> (+ residual). Keeps the width `dim`.

    `mixer` is an optional module [configs, nodes, dim] -> same (the cross-config gate), applied before the residual.
    """

    def __init__(self, dim: int, norm: str, dropout: float, residual: bool, mixer: nn.Module | None = None):
        super().__init__()
        self.norm = NodeNorm(norm, dim)
        self.conv = SAGEConv(dim, dim)
        self.act = nn.GELU()
        self.dropout = SharedDropout(dropout)
        self.mixer = mixer
        self.residual = residual

    def forward(self, x: torch.Tensor, graph: GraphTensors) -> torch.Tensor:
        h = self.dropout(self.act(self.conv(self.norm(x), graph)))   # [configs, nodes, dim]
        if self.mixer is not None:
            h = self.mixer(h)
        return x + h if self.residual else h
