"""Inference forward of the layout model on CPU, the same function as `LayoutModel.segment_summary`, computed in
config chunks that stay in cache.

Why: at inference a batch of configs is a `[configs, nodes, hidden]` tensor of tens to hundreds of MB; every
element-wise op of the plain forward then streams it from memory and first page-faults a fresh allocation of that
size, so the plain CPU forward runs far below the matmul rate. Here the batch is cut into chunks of a few configs
(`gnn.infer_chunk_mb` of node states each, `chunk_configs`), kept node-major (`[nodes, chunk, hidden]`) so that
message passing is one sparse-dense product per direction (`adjacency`), and fused where the algebra allows:

- instance norm folded into one `addcmul` (scale and shift per config and channel, from one `var_mean`);
- the per-node config mixer needs statistics over ALL configs of the batch (ConfigCenter: the mean; ConfigGate:
  the softmax max and normaliser), so each block runs in two passes over the chunks: conv -> statistics, then
  mixer + residual; ConfigCenter's two matmuls become one ((W_self + W_diff) h - W_diff mean);
- SharedDropout is the identity at inference (the module must be in eval mode).

Everything else (encoders, heads, readout) is the model's own modules, so results equal the plain forward within
float rounding (tests/graphnet/test_graphnet_chunked.py). Gradients are not supported: callers use it under
`torch.no_grad()` only.
"""
from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.graphnet.attention import ConfigCenter, ConfigGate
from pipeline.graphnet.data import GraphTensors
from pipeline.graphnet.layers import SAGEBlock

FLOAT_BYTES = 4


def chunk_configs(n_nodes: int, hidden: int, chunk_mb: float) -> int:
    """Configs per chunk so that one chunk's node states `[nodes, chunk, hidden]` float32 take about chunk_mb MB."""
    if chunk_mb <= 0:
        raise ValueError(f"gnn.infer_chunk_mb={chunk_mb}; expected > 0")
    return max(1, int(chunk_mb * 2 ** 20 // max(1, n_nodes * hidden * FLOAT_BYTES)))


def adjacency(graph: GraphTensors) -> tuple[torch.Tensor, ...]:
    """The two mean-aggregation matrices of `layers.mean_aggregate` as sparse CSR [nodes, nodes]: from producers
    (row = consumer, 1 / its producers) and from consumers (row = producer, 1 / its consumers), repeated edges
    adding up as index_add does; then float [nodes] 1 where a node has producers / consumers (a mean over no
    messages is 0, so the bias of that message direction only reaches nodes that have some)."""
    n = graph.n_nodes

    def csr(dst: torch.Tensor, src: torch.Tensor, inv_deg: torch.Tensor) -> torch.Tensor:
        values = inv_deg[dst].to(torch.float32)                                  # [edges]
        coo = torch.sparse_coo_tensor(torch.stack([dst, src]), values, (n, n), check_invariants=False)
        with warnings.catch_warnings():                                          # "CSR support is in beta"
            warnings.simplefilter("ignore", UserWarning)
            return coo.coalesce().to_sparse_csr()

    has_producer = torch.zeros(n, device=graph.consumer.device).index_fill_(0, graph.consumer, 1.0)  # [nodes]
    has_consumer = torch.zeros(n, device=graph.producer.device).index_fill_(0, graph.producer, 1.0)  # [nodes]
    return (csr(graph.consumer, graph.producer, graph.inv_deg_consumer),
            csr(graph.producer, graph.consumer, graph.inv_deg_producer), has_producer, has_consumer)


def _conv(block: SAGEBlock, x: torch.Tensor, adj: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """GELU(SAGEConv(norm(x))) of one node-major chunk [nodes, chunk, dim] (dropout: identity in eval)."""
    norm = block.norm
    if norm.kind == "instance":
        # two-pass statistics with sums over the leading axis (var_mean over axis 0 is far slower on CPU)
        centered = x - x.sum(dim=0, keepdim=True) / x.shape[0]                  # [nodes, chunk, dim]
        var = torch.linalg.vector_norm(centered, dim=0, keepdim=True).square() / x.shape[0]  # [1, chunk, dim]
        x = centered.mul_(torch.rsqrt(var + norm.eps) * norm.weight).add_(norm.bias)         # [nodes, chunk, dim]
    elif norm.kind == "layer":
        x = norm.layer(x)
    lin, dim = block.conv.lin, block.conv.dim_out
    n, chunk, width = x.shape
    w, b = lin.weight.split(dim), lin.bias.split(dim)                           # self, producers, consumers
    flat = x.reshape(n, chunk * width)                                           # [nodes, chunk * dim]
    # aggregation is linear, so aggregate first and transform after: one (per-node) bias, three accumulating gemms
    out = (b[0] + adj[2][:, None] * b[1] + adj[3][:, None] * b[2]).unsqueeze(1).expand(n, chunk, dim)
    out = out.reshape(n * chunk, dim)                                            # [nodes * chunk, dim] (a copy)
    for weight, h in ((w[0], flat), (w[1], adj[0] @ flat), (w[2], adj[1] @ flat)):
        out.addmm_(h.reshape(n * chunk, width), weight.t())
    return block.act(out.reshape(n, chunk, dim))                                 # [nodes, chunk, dim]


def _mix_into(mixer: nn.Module | None, xs: list[torch.Tensor], hs: list[torch.Tensor], residual: bool,
              n_configs: int) -> list[torch.Tensor]:
    """x + mixer(h) (just mixer(h) without `residual`) for every chunk (each [nodes, chunk, dim], configs axis 1);
    the mixer's statistics run over all chunks. Updates the xs in place."""
    if mixer is None:
        return [x.add_(h) if residual else h for x, h in zip(xs, hs)]
    if isinstance(mixer, ConfigCenter):
        mean = sum(h.sum(dim=1, keepdim=True) for h in hs) / n_configs          # [nodes, 1, dim]
        weight = (mixer.mix_self.weight + mixer.mix_diff.weight).t()            # [dim, dim]
        shift = mixer.mix_self.bias - F.linear(mean, mixer.mix_diff.weight)     # [nodes, 1, dim]
        out = []
        for x, h in zip(xs, hs):
            n, chunk, dim = h.shape
            flat = h.reshape(n * chunk, dim)                                     # [nodes * chunk, dim]
            y = x.view(n * chunk, dim).addmm_(flat, weight) if residual else flat @ weight
            out.append(y.view(n, chunk, dim).add_(shift))                        # [nodes, chunk, dim]
        return out
    if isinstance(mixer, ConfigGate):
        temperature = mixer.temperature.abs().clamp(min=1e-2)
        top = torch.stack([(h.float() / temperature).amax(dim=1) for h in hs]).amax(dim=0)   # [nodes, dim]
        exps = [torch.exp(h.float() / temperature - top.unsqueeze(1)) for h in hs]           # [nodes, chunk, dim]
        total = sum(e.sum(dim=1, keepdim=True) for e in exps)                                # [nodes, 1, dim]
        mixed = [mixer.mix_self(h) + mixer.mix_cross(h * (e / total * n_configs).to(h.dtype))
                 for h, e in zip(hs, exps)]
        return [x.add_(m) if residual else m for x, m in zip(xs, mixed)]
    raise TypeError(f"no chunked form of config mixer {type(mixer).__name__}")


@torch.no_grad()
def chunked_summary(model: nn.Module, graph: GraphTensors, configs: torch.Tensor, chunk: int,
                    own: torch.Tensor | None = None) -> torch.Tensor:
    """`model.segment_summary(graph, configs, own)` of a LayoutModel in eval mode, computed `chunk` configs at a
    time: [configs, summary_dim]."""
    if model.training:
        raise RuntimeError("chunked_summary is an inference path; put the model in eval mode")
    n_configs = configs.shape[0]
    node_h = model.nodes(graph.node_feat, graph.node_opcode)                    # [nodes, hidden]
    adj = adjacency(graph)
    delta, mismatch = model.configs.config_parts(graph, configs, node_h.dtype)  # once for the batch: small
    xs = [model.configs.node_major(node_h, graph, d, None if mismatch is None else mismatch[i:i + chunk])
          for i, d in zip(range(0, n_configs, chunk), delta.split(chunk))]       # [nodes, chunk, hidden] each
    for block in model.blocks:
        hs = [_conv(block, x, adj) for x in xs]                                 # [nodes, chunk, hidden] each
        xs = _mix_into(block.mixer, xs, hs, block.residual, n_configs)
    parts = []
    for x in xs:
        per_node = model.node_head(x).squeeze(-1)                               # [nodes, chunk]
        if own is not None:
            x, per_node = x[own], per_node[own]                                 # [own nodes, chunk, (hidden)]
        parts.append(torch.cat([per_node.sum(dim=0).unsqueeze(-1), x.sum(dim=0), x.amax(dim=0)], dim=-1))
    return torch.cat(parts)                                                     # [configs, summary_dim]
