"""Inference forward of the layout model on CPU, the same function as `LayoutModel.segment_summary`, computed in
config chunks that stay in cache.

Why: at inference a batch of configs is a `[configs, nodes, hidden]` tensor of tens to hundreds of MB; every
element-wise op of the plain forward then streams it from memory and first page-faults a fresh allocation of that
size, so the plain CPU forward runs far below the matmul rate. Here the batch is cut into chunks of a few configs
(`gnn.infer_chunk_mb` of node states each, `chunk_configs`), kept node-major (`[nodes, chunk, hidden]`) so that
message passing is one sparse-dense product per direction (`adjacency`), and fused where the algebra allows:

- the config encoder's per-graph work once per batch (`chunked_inputs.ConfigInputs`: the first layer as one
  `embedding_bag` over a per-graph table, the mismatch features from the config-dependent edges only), a chunk's
  inputs built where the first block reads them;
- instance norm as two sums and one multiply, its bias passed through the conv as a per-node bias that the conv's
  output starts from; the conv transforms, then aggregates, each sparse product accumulating into that output;
- the per-node config mixer needs statistics over ALL configs of the batch. ConfigCenter is linear, so each block
  is one pass over the chunks: (W_self + W_diff) h is accumulated onto the residual, and the per-node part
  b_self - W_diff mean_configs(h) is added by the next pass as it reads each chunk. ConfigGate (its softmax max and
  normaliser) needs a second pass over the block's outputs;
- the per-node head's last layer is linear, so its input is summed over the nodes first;
- SharedDropout is the identity at inference (the module must be in eval mode).

Everything else (node encoder, readout) is the model's own modules, so results equal the plain forward within
float rounding (tests/graphnet/test_graphnet_chunked.py, test_graphnet_chunked_inputs.py). Gradients are not
supported: callers use it under `torch.no_grad()` only.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.graphnet.attention import ConfigCenter, ConfigGate
from pipeline.graphnet.chunked_inputs import ConfigInputs, repeat_configs, sparse_csr
from pipeline.graphnet.data import GraphTensors
from pipeline.graphnet.layers import SAGEBlock

FLOAT_BYTES = 4


def chunk_configs(n_nodes: int, hidden: int, chunk_mb: float) -> int:
    """Configs per chunk so that one chunk's node states `[nodes, chunk, hidden]` float32 take about chunk_mb MB."""
    return max(1, int(chunk_mb * 2 ** 20 // max(1, n_nodes * hidden * FLOAT_BYTES)))


def adjacency(graph: GraphTensors) -> tuple[torch.Tensor, ...]:
    """The two mean-aggregation matrices of `layers.mean_aggregate` as sparse CSR [nodes, nodes]: from producers
    (row = consumer, 1 / its producers) and from consumers (row = producer, 1 / its consumers), repeated edges
    adding up as index_add does; then float [nodes] 1 where a node has producers / consumers (a mean over no
    messages is 0, so the bias of that message direction only reaches nodes that have some)."""
    n = graph.n_nodes
    has_producer = torch.zeros(n, device=graph.consumer.device).index_fill_(0, graph.consumer, 1.0)  # [nodes]
    has_consumer = torch.zeros(n, device=graph.producer.device).index_fill_(0, graph.producer, 1.0)  # [nodes]
    return (sparse_csr(graph.consumer, graph.producer, graph.inv_deg_consumer[graph.consumer], (n, n)),
            sparse_csr(graph.producer, graph.consumer, graph.inv_deg_producer[graph.producer], (n, n)),
            has_producer, has_consumer)


class _Conv:
    """GELU(SAGEConv(norm(x))) of node-major chunks [nodes, chunk, dim] for one block (dropout: identity in eval),
    with the weights and the per-node bias prepared once per batch.

    Instance norm is (x - mean) * rsqrt(var + eps) * weight + bias per config and channel; its `bias` is the same
    for every node, and each aggregation matrix's rows sum to 1 (0 for a node with no messages), so the conv
    receives it as a per-node bias (W_self + has_producer W_p + has_consumer W_c) bias instead of one more pass
    over the chunk. The chunk's output starts as that bias, and the three products accumulate into it."""

    def __init__(self, block: SAGEBlock, adj: tuple[torch.Tensor, ...]):
        self.norm, self.act, self.adj, dim = block.norm, block.act, adj, block.conv.dim_out
        w, b = block.conv.lin.weight.split(dim), block.conv.lin.bias.split(dim)  # self, producers, consumers
        if self.norm.kind == "instance":
            b = [bk + F.linear(self.norm.bias, wk) for wk, bk in zip(w, b)]      # the norm's bias, through W
        self.weights = [wk.t().contiguous() for wk in w]                         # 3 x [dim_in, dim]
        self.bias = (b[0] + adj[2][:, None] * b[1] + adj[3][:, None] * b[2]).unsqueeze(1)  # [nodes, 1, dim]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        norm = self.norm
        n, chunk, width = x.shape
        if norm.kind == "instance":
            # two-pass statistics with sums over the leading axis (var_mean / vector_norm over axis 0 are far slower)
            x = x - x.sum(dim=0, keepdim=True) / n                               # [nodes, chunk, dim] centered
            var = (x * x).sum(dim=0, keepdim=True) / n                           # [1, chunk, dim]
            x = x.mul_(torch.rsqrt(var + norm.eps) * norm.weight)                # [nodes, chunk, dim]
        elif norm.kind == "layer":
            x = norm.layer(x)
        flat = x.reshape(n * chunk, width)                                       # [nodes * chunk, dim_in]
        out = repeat_configs(self.bias, chunk)                                   # [nodes, chunk, dim]
        rows = out.view(n * chunk, -1)                                           # [nodes * chunk, dim]
        rows.addmm_(flat, self.weights[0])
        # transform, then aggregate: the sparse products accumulate into the output (no zero-filled result)
        message = torch.empty_like(rows)                                         # [nodes * chunk, dim]
        for weight, matrix in zip(self.weights[1:], self.adj[:2]):
            torch.mm(flat, weight, out=message)
            out.view(n, -1).addmm_(matrix, message.view(n, -1))                  # [nodes, chunk * dim]
        return self.act(out)                                                     # [nodes, chunk, dim]


def _gate_into(mixer: ConfigGate, xs: list[torch.Tensor], hs: list[torch.Tensor], residual: bool,
               n_configs: int) -> list[torch.Tensor]:
    """x + ConfigGate(h) (just ConfigGate(h) without `residual`) for every chunk (each [nodes, chunk, dim], configs
    axis 1): its softmax over the configs needs the maximum and the normaliser over all chunks first. Updates the xs
    in place."""
    temperature = mixer.temperature.abs().clamp(min=1e-2)
    top = torch.stack([(h.float() / temperature).amax(dim=1) for h in hs]).amax(dim=0)   # [nodes, dim]
    exps = [torch.exp(h.float() / temperature - top.unsqueeze(1)) for h in hs]           # [nodes, chunk, dim]
    total = sum(e.sum(dim=1, keepdim=True) for e in exps)                                # [nodes, 1, dim]
    mixed = [mixer.mix_self(h) + mixer.mix_cross(h * (e / total * n_configs).to(h.dtype)) for h, e in zip(hs, exps)]
    return [x.add_(m) if residual else m for x, m in zip(xs, mixed)]


def _linear_mix(block: SAGEBlock, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """x + mixer(h) (mixer(h) without residual) of one chunk [nodes, chunk, dim], less the mixer's per-node part that
    needs every config (`_pending_shift`): ConfigCenter(h) = (W_self + W_diff) h + b_self - W_diff mean_configs(h);
    no mixer: h. Updates x in place when residual."""
    mixer = block.mixer
    if mixer is None:
        return x.add_(h) if block.residual else h
    n, chunk, dim = h.shape
    weight = (mixer.mix_self.weight + mixer.mix_diff.weight).t()                # [dim, dim]
    flat = h.view(n * chunk, dim)                                                # [nodes * chunk, dim]
    y = x.view(n * chunk, dim).addmm_(flat, weight) if block.residual else flat @ weight
    return y.view(n, chunk, dim)                                                 # [nodes, chunk, dim]


def _pending_shift(mixer: nn.Module | None, h_total: torch.Tensor, n_configs: int) -> torch.Tensor | None:
    """What `_linear_mix` left out, the same for every config: b_self - W_diff mean_configs(h), [nodes, 1, dim]
    from the sum over all configs of h [nodes, 1, dim]; None without a mixer."""
    if mixer is None:
        return None
    return mixer.mix_self.bias - F.linear(h_total / n_configs, mixer.mix_diff.weight)


@torch.no_grad()
def chunked_summary(model: nn.Module, graph: GraphTensors, configs: torch.Tensor, chunk: int,
                    own: torch.Tensor | None = None) -> torch.Tensor:
    """`model.segment_summary(graph, configs, own)` of a LayoutModel in eval mode, computed `chunk` configs at a
    time: [configs, summary_dim].

    One pass over the chunks per block (and one for the head): a chunk's inputs are built where the first block
    reads them; a linear mixer (ConfigCenter, or none) leaves a per-node shift that the next pass adds as it reads
    each chunk; ConfigGate needs a second pass (`_gate_into`)."""
    if model.training:
        raise RuntimeError("chunked_summary is an inference path; put the model in eval mode")
    for block in model.blocks:
        if block.mixer is not None and not isinstance(block.mixer, (ConfigCenter, ConfigGate)):
            raise TypeError(f"no chunked form of config mixer {type(block.mixer).__name__}")
    n_configs = configs.shape[0]
    node_h = model.nodes(graph.node_feat, graph.node_opcode)                    # [nodes, hidden]
    config_inputs = ConfigInputs(model.configs, graph, configs)
    base = config_inputs.base(node_h)                                           # [nodes, hidden]
    adj = adjacency(graph)
    parts = [slice(lo, lo + chunk) for lo in range(0, n_configs, chunk)]
    xs: list[torch.Tensor | None] = [None] * len(parts)
    shift = None                                                                 # [nodes, 1, hidden] pending

    def read(i: int) -> torch.Tensor:
        """Chunk i's node states [nodes, chunk, hidden], the pending shift added (in place)."""
        if xs[i] is None:                     # built here, so its int64 config arrays are still in cache
            return config_inputs.node_states(base, parts[i])
        return xs[i] if shift is None else xs[i].add_(shift)

    for block in model.blocks:
        if isinstance(block.mixer, ConfigGate):
            xs = [read(i) for i in range(len(parts))]
            conv = _Conv(block, adj)
            xs, shift = _gate_into(block.mixer, xs, [conv(x) for x in xs], block.residual, n_configs), None
            continue
        h_total, conv = 0, _Conv(block, adj)
        for i in range(len(parts)):
            x = read(i)
            h = conv(x)                                                          # [nodes, chunk, hidden]
            h_total = h_total + h.sum(dim=1, keepdim=True)                      # [nodes, 1, hidden]
            xs[i] = _linear_mix(block, x, h)
        shift = _pending_shift(block.mixer, h_total, n_configs)
    head, summaries = model.node_head, []
    for i in range(len(parts)):
        x = read(i)
        if own is not None:
            x = x[own]                                                           # [own nodes, chunk, hidden]
        # the head's last layer is linear: sum its input over the nodes, then apply it once per config
        hidden = head[1](F.linear(x, head[0].weight, head[0].bias)).sum(dim=0)   # [chunk, hidden]
        per_node = F.linear(hidden, head[3].weight, head[3].bias * x.shape[0])    # [chunk, 1]
        summaries.append(torch.cat([per_node, x.sum(dim=0), x.amax(dim=0)], dim=-1))
    return torch.cat(summaries)                                                 # [configs, summary_dim]
