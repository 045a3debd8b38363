"""Inference forward of the layout model on CPU, the same function as `LayoutModel.segment_summary`, computed in
config chunks that stay in cache.

Why: at inference a batch of configs is a `[configs, nodes, hidden]` tensor of tens to hundreds of MB; every
element-wise op of the plain forward then streams it from memory and first page-faults a fresh allocation of that
size, so the plain CPU forward runs far below the matmul rate. Here the batch is cut into chunks of a few configs
(`gnn.infer_chunk_mb` of node states each, `chunk_configs`), kept node-major (`[nodes, chunk, hidden]`) so that
message passing is one sparse-dense product per direction (`adjacency`), and fused where the algebra allows:

- the config encoder's per-graph work once (`ConfigInputs`: layout values through one `embedding_bag`, dimension
  features from one per-graph table), a chunk's config inputs built where the first block reads them;
- instance norm as two sums and one multiply, its bias passed through the conv as a per-node bias;
- the per-node config mixer needs statistics over ALL configs of the batch. ConfigCenter is linear, so each block
  is one pass over the chunks: (W_self + W_diff) h is accumulated onto the residual, and the per-node part
  b_self - W_diff mean_configs(h) is added by the next pass as it reads each chunk. ConfigGate (its softmax max and
  normaliser) needs a second pass over the block's outputs;
- SharedDropout is the identity at inference (the module must be in eval mode).

Everything else (node encoder, heads, readout) is the model's own modules, so results equal the plain forward within
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
from pipeline.graphnet.embeddings import LAYOUT_VALUES
from pipeline.graphnet.layers import SAGEBlock
from pipeline.graphnet.layout_inputs import effective_configs, mismatch_features
from pipeline.tpugraphs.layouts import TPU_TILE_MINOR, TPU_TILE_SECOND_MINOR
from pipeline.tpugraphs.schema import LAYOUT_BLOCKS, MAX_DIMS, NODE_CONFIG_FEAT_DIM

FLOAT_BYTES = 4


def chunk_configs(n_nodes: int, hidden: int, chunk_mb: float) -> int:
    """Configs per chunk so that one chunk's node states `[nodes, chunk, hidden]` float32 take about chunk_mb MB."""
    if chunk_mb <= 0:
        raise ValueError(f"gnn.infer_chunk_mb={chunk_mb}; expected > 0")
    return max(1, int(chunk_mb * 2 ** 20 // max(1, n_nodes * hidden * FLOAT_BYTES)))


class ConfigInputs:
    """`LayoutConfigEncoder.config_parts` for inference, with the per-graph work done once (`__init__`).

    The encoder's first linear layer sees [18 embedded values | 24 dimension features | 3 default flags (effective
    layouts)]. Both the embedding and that linear layer are linear, so the 18 values enter as a sum of 18 rows of a
    table [18 slots x 7 values, hidden] (one `embedding_bag`), never as the [configs, configurable, 18 * value_dim]
    embedding. A dimension feature depends only on (configurable node, block, layout value): log1p of the size of
    the dim the value names, its remainder by the tile (`embeddings.layout_dim_features`), so the 24 features are one
    gather from a per-graph table. Equal to `config_parts` within float rounding (sums in another order)."""

    def __init__(self, encoder: nn.Module, graph: GraphTensors):
        self.encoder, self.graph = encoder, graph
        first = encoder.proj[0]                                                  # Linear(width, hidden)
        hidden, value_dim = first.out_features, encoder.value.embedding_dim
        n_values = NODE_CONFIG_FEAT_DIM * value_dim
        slots = first.weight[:, :n_values].reshape(hidden, NODE_CONFIG_FEAT_DIM, value_dim)  # [hidden, 18, dim]
        self.values = torch.einsum("hsd,vd->svh", slots, encoder.value.weight)   # [18, 7, hidden]
        self.values = self.values.reshape(-1, hidden).contiguous()               # [18 * 7, hidden]
        self.offsets = torch.arange(NODE_CONFIG_FEAT_DIM) * LAYOUT_VALUES        # [18] first row of each slot
        self.w_rest = first.weight[:, n_values:].t().contiguous()                # [24 (+3), hidden]
        self.bias = first.bias
        # per configurable node, block and value (+1; 0 = -1, no dim): size of the named dim, then its 3 features
        sizes = F.pad(graph.operand_dims.float(), (1, 0))                        # [configurable, 3, 7]
        table = torch.stack([torch.log1p(sizes), sizes % TPU_TILE_MINOR / TPU_TILE_MINOR,
                             sizes % TPU_TILE_SECOND_MINOR / TPU_TILE_SECOND_MINOR], dim=2)  # [configurable, 3, 3, 7]
        self.table = table.reshape(-1)
        # feature j of a block: log1p at positions 0..5, then the minor's and the second-minor's remainder
        self.position = torch.tensor([*range(MAX_DIMS), 0, 1])                   # [8] value slot feature j reads
        kind = torch.tensor([0] * MAX_DIMS + [1, 2])                             # [8] which of the 3 features
        n_cfg = sizes.shape[0]
        node_block = torch.arange(n_cfg * len(LAYOUT_BLOCKS)).reshape(n_cfg, len(LAYOUT_BLOCKS), 1)
        self.base = (node_block * 3 + kind) * LAYOUT_VALUES                      # [configurable, 3, 8]

    def __call__(self, configs: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(delta [configs, configurable, hidden], mismatch features [configs, nodes, 4] or None), as
        `LayoutConfigEncoder.config_parts(graph, configs, dtype)`."""
        enc, graph = self.encoder, self.graph
        n_configs, n_cfg, _ = configs.shape
        mismatch = None
        if enc.effective or enc.mismatch:
            effective, is_default = effective_configs(configs, graph.default_blocks)  # [configs, configurable, 18]
        if enc.effective:
            configs = effective
        rows = configs.reshape(-1, NODE_CONFIG_FEAT_DIM)                         # [configs * configurable, 18]
        h = F.embedding_bag(rows + self.offsets, self.values, mode="sum")        # [configs * configurable, hidden]
        blocks = configs.reshape(n_configs, n_cfg, len(LAYOUT_BLOCKS), MAX_DIMS)  # [configs, configurable, 3, 6]
        slots = blocks.index_select(-1, self.position)                          # [configs, configurable, 3, 8]
        dims = torch.take(self.table, slots.add_(self.base))                    # [configs, configurable, 3, 8]
        rest = dims.reshape(len(rows), -1)                                       # [configs * configurable, 24]
        if enc.effective:
            rest = torch.cat([rest, is_default.reshape(len(rows), -1).to(rest.dtype)], dim=-1)  # [.., 27]
        h = enc.proj[1:](h.addmm_(rest, self.w_rest).add_(self.bias))           # [configs * configurable, hidden]
        if enc.copies is not None:
            mismatch = mismatch_features(effective, is_default, graph).to(dtype)  # [configs, nodes, 4]
        delta = (h - enc.not_configurable).reshape(n_configs, n_cfg, -1)          # [configs, configurable, hidden]
        return delta.to(dtype), mismatch


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
    """GELU(SAGEConv(norm(x))) of one node-major chunk [nodes, chunk, dim] (dropout: identity in eval).

    Instance norm is (x - mean) * rsqrt(var + eps) * weight + bias per config and channel; its `bias` is the same
    for every node, and each aggregation matrix's rows sum to 1 (0 for a node with no messages), so the conv
    receives it as a per-node bias (W_self + has_producer W_p + has_consumer W_c) bias instead of one more pass
    over the chunk."""
    norm, lin, dim = block.norm, block.conv.lin, block.conv.dim_out
    n, chunk, width = x.shape
    w, b = lin.weight.split(dim), lin.bias.split(dim)                           # self, producers, consumers
    if norm.kind == "instance":
        # two-pass statistics with sums over the leading axis (var_mean / vector_norm over axis 0 are far slower)
        x = x - x.sum(dim=0, keepdim=True) / n                                   # [nodes, chunk, dim] centered
        var = (x * x).sum(dim=0, keepdim=True) / n                               # [1, chunk, dim]
        x = x.mul_(torch.rsqrt(var + norm.eps) * norm.weight)                    # [nodes, chunk, dim]
        b = [bk + F.linear(norm.bias, wk) for wk, bk in zip(w, b)]               # the norm's bias, through W
    elif norm.kind == "layer":
        x = norm.layer(x)
    bias = b[0] + adj[2][:, None] * b[1] + adj[3][:, None] * b[2]               # [nodes, dim]
    flat = x.reshape(n, chunk * width)                                           # [nodes, chunk * dim]
    # aggregation is linear, so aggregate first and transform after: three accumulating gemms, then the bias
    out = torch.mm(flat.view(n * chunk, width), w[0].t())                        # [nodes * chunk, dim]
    for weight, h in ((w[1], adj[0] @ flat), (w[2], adj[1] @ flat)):
        out.addmm_(h.view(n * chunk, width), weight.t())
    return block.act(out.view(n, chunk, dim).add_(bias.unsqueeze(1)))           # [nodes, chunk, dim]


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
    adj = adjacency(graph)
    config_inputs, parts = ConfigInputs(model.configs, graph), configs.split(chunk)
    xs: list[torch.Tensor | None] = [None] * len(parts)
    shift = None                                                                 # [nodes, 1, hidden] pending

    def read(i: int) -> torch.Tensor:
        """Chunk i's node states [nodes, chunk, hidden], the pending shift added (in place)."""
        if xs[i] is None:                     # built here, so its int64 config arrays are still in cache
            delta, mismatch = config_inputs(parts[i], node_h.dtype)
            return model.configs.node_major(node_h, graph, delta, mismatch)
        return xs[i] if shift is None else xs[i].add_(shift)

    for block in model.blocks:
        if isinstance(block.mixer, ConfigGate):
            xs = [read(i) for i in range(len(parts))]
            xs, shift = _gate_into(block.mixer, xs, [_conv(block, x, adj) for x in xs], block.residual,
                                   n_configs), None
            continue
        h_total = 0
        for i in range(len(parts)):
            x = read(i)
            h = _conv(block, x, adj)                                             # [nodes, chunk, hidden]
            h_total = h_total + h.sum(dim=1, keepdim=True)                      # [nodes, 1, hidden]
            xs[i] = _linear_mix(block, x, h)
        shift = _pending_shift(block.mixer, h_total, n_configs)
    summaries = []
    for i in range(len(parts)):
        x = read(i)
        per_node = model.node_head(x).squeeze(-1)                               # [nodes, chunk]
        if own is not None:
            x, per_node = x[own], per_node[own]                                 # [own nodes, chunk, (hidden)]
        summaries.append(torch.cat([per_node.sum(dim=0).unsqueeze(-1), x.sum(dim=0), x.amax(dim=0)], dim=-1))
    return torch.cat(summaries)                                                 # [configs, summary_dim]
