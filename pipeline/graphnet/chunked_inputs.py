"""The first block's input of the chunked CPU path (`pipeline.graphnet.chunked`): `LayoutConfigEncoder.forward` of a
chunk of configs, built node-major (`[nodes, chunk, hidden]`) with the per-graph work done once per batch.

- `ConfigInputs`: the config encoder. The 18 layout values enter its first linear layer as one `embedding_bag`
  over a [18 slots x 7 values, hidden] table (the value embedding folded into that layer, both linear), and the
  per-block dimension features (3 blocks x `encoder.block_width`) with it, from a per-graph table. Rows are
  node-major (configurable node, then config), so the per-config part lands in the chunk's node states without a
  transpose.
- `MismatchEdges`: the per-node mismatch features (`layout_inputs.mismatch_features`) from the edges whose mismatch
  can change with the config only (a configurable producer, or a consumer's explicit input/kernel block; every
  other edge reads its producer's HLO layout as produced), summed per node by one sparse product.

Both equal the encoder's own `config_parts` within float rounding (sums in another order);
tests/graphnet/test_graphnet_chunked_inputs.py checks that.
"""
from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.graphnet.data import GraphTensors
from pipeline.graphnet.embeddings import DIM_FEATURES_PER_BLOCK, DIM_ROLES, LAYOUT_VALUES, ROLE_POSITIONS, padding_waste
from pipeline.graphnet.layout_inputs import MISMATCH_FEATURES, index_block_codes
from pipeline.tpugraphs import layouts
from pipeline.tpugraphs.layouts import TPU_TILE_MINOR, TPU_TILE_SECOND_MINOR
from pipeline.tpugraphs.schema import LAYOUT_BLOCKS, MAX_DIMS, NODE_CONFIG_FEAT_DIM


def sparse_csr(rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """float32 CSR matrix of `shape` with values[i] at (rows[i], cols[i]); repeated entries add up."""
    coo = torch.sparse_coo_tensor(torch.stack([rows, cols]), values.to(torch.float32), shape, check_invariants=False)
    with warnings.catch_warnings():                                              # "CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return coo.coalesce().to_sparse_csr()


def repeat_configs(rows: torch.Tensor, n_configs: int) -> torch.Tensor:
    """A new tensor [nodes, n_configs, dim] holding rows [nodes, dim] (or [nodes, 1, dim]) for every config (never a
    view of `rows`, even for one config: callers write into it)."""
    out = rows.new_empty(rows.shape[0], n_configs, rows.shape[-1])              # [nodes, configs, dim]
    return out.copy_(rows.view(rows.shape[0], 1, -1))                          # [nodes, 1, dim] broadcast


class MismatchEdges:
    """`layout_inputs.mismatch_features` node-major, from the edges whose mismatch depends on the config.

    An edge mismatches when its producer's effective output layout differs from the layout its consumer expects.
    The producer side changes with the config only for a configurable producer, the expected side only for an
    edge that feeds a consumer's input/kernel block; on every other edge both are the producer's HLO layout, so it
    never mismatches. Per kept edge: where to read its two block codes among a config's [configurable x 3 blocks]
    codes, and the producer's HLO code for the default sides; the four features per node are one CSR product
    [4 x nodes, kept edges] x [kept edges, configs] (in-edges, their log size, out-edges, their log size)."""

    def __init__(self, graph: GraphTensors):
        n, n_blocks = graph.n_nodes, len(LAYOUT_BLOCKS)
        position = torch.as_tensor(layouts.config_positions(graph.node_config_ids.numpy(), n))  # [nodes]
        producer_k = position[graph.producer]                                   # [edges] -1: not configurable
        kept = (graph.edge_slot >= 0) | (producer_k >= 0)                        # [edges]
        producer, consumer = graph.producer[kept], graph.consumer[kept]          # [kept edges]
        self.produced_from = producer_k[kept] >= 0                               # [kept edges]
        self.produced_at = producer_k[kept].clamp(min=0) * n_blocks              # code of the output block
        self.fed = graph.edge_slot[kept] >= 0                                    # [kept edges]
        self.expected_at = (graph.edge_consumer_k[kept].clamp(min=0) * n_blocks
                            + graph.edge_slot[kept].clamp(min=0))                # code of the fed block
        self.hlo = graph.hlo_code[producer]                                      # [kept edges]
        size = graph.log_elements[producer]                                      # [kept edges]
        ones = torch.ones_like(size)
        rows = torch.cat([consumer, consumer + n, producer + 2 * n, producer + 3 * n])
        cols = torch.arange(len(producer)).repeat(MISMATCH_FEATURES)
        self.sums = sparse_csr(rows, cols, torch.cat([ones, size, ones, size]),
                               (MISMATCH_FEATURES * n, len(producer)))          # [4 x nodes, kept edges]
        self.n_nodes = n

    def mismatched(self, codes: torch.Tensor, is_default: torch.Tensor) -> torch.Tensor:
        """float32 [configs, kept edges], 1 where the edge mismatches, from the codes (`layouts.block_codes`) of
        the effective blocks int [configurable * 3, configs] and their default flags bool [configurable * 3,
        configs]."""
        hlo = self.hlo.unsqueeze(1).to(codes.dtype)                              # [kept edges, 1]
        produced = torch.where(self.produced_from.unsqueeze(1), codes.index_select(0, self.produced_at), hlo)
        fed = ~is_default.index_select(0, self.expected_at) & self.fed.unsqueeze(1)  # [kept edges, configs]
        expected = torch.where(fed, codes.index_select(0, self.expected_at), hlo)  # [kept edges, configs]
        return (produced != expected).t().float()                                # [configs, kept edges]

    def features(self, mismatched: torch.Tensor) -> torch.Tensor:
        """The mismatch features [nodes, configs, 4] of `mismatched` [configs, kept edges] (some configs)."""
        per_node = self.sums @ mismatched.t()                                    # [4 x nodes, configs]
        return per_node.view(MISMATCH_FEATURES, self.n_nodes, -1).permute(1, 2, 0)  # [nodes, configs, 4]


class ConfigInputs:
    """`LayoutConfigEncoder.forward` for inference, node-major, with the per-graph work done once (`__init__`).

    The encoder's first linear layer sees [18 embedded values | 3 blocks x `block_width` dimension features |
    3 default flags (effective layouts)] of a configurable node's config. All of it is linear in per-slot terms:
    slot s with value v adds its value embedding through the layer, and the dimension features it feeds, which
    depend only on (configurable node, block, value): log1p of the size of the dim the value names and its remainders
    by the tile (`embeddings.layout_dim_features`), with `padding` its padding waste, with `roles` its roles. So the
    layer (bias included) is one `embedding_bag` over a per-graph table
    [configurable x 18 slots x 7 values, hidden]. With effective layouts, a default block (all values -1) reads the
    layout it stands for, plus its flag: 3 more bag rows per config, a per-(node, block) correction from what its
    -1 values gave, or a zero row when the block is explicit. Rows are node-major (configurable node, then config),
    so the per-config part lands in the chunk's node states without a transpose, and a node's rows of the table
    stay in cache for the configs of a chunk."""

    @torch.no_grad()
    def __init__(self, encoder: nn.Module, graph: GraphTensors, configs: torch.Tensor):
        self.encoder, self.graph, self.configs = encoder, graph, configs
        first, last = encoder.proj[0], encoder.proj[2]                           # the two Linear layers
        hidden, value_dim = first.out_features, encoder.value.embedding_dim
        n_cfg, n_blocks, n_values = len(graph.node_config_ids), len(LAYOUT_BLOCKS), NODE_CONFIG_FEAT_DIM * value_dim
        slots = first.weight[:, :n_values].reshape(hidden, NODE_CONFIG_FEAT_DIM, value_dim)  # [hidden, 18, dim]
        values = torch.einsum("hsd,vd->svh", slots, encoder.value.weight)        # [18, 7, hidden]
        width = n_blocks * encoder.block_width
        w_dims = first.weight[:, n_values:n_values + width].t()                 # [3 * block_width, hidden]
        w_dims = w_dims.reshape(n_blocks, encoder.block_width, hidden)          # [3, block_width, hidden]
        n_rows = n_cfg * NODE_CONFIG_FEAT_DIM * LAYOUT_VALUES                   # one per (node, slot, value)
        extra = n_cfg * n_blocks + 1 if encoder.effective else 0                 # corrections, a zero row
        self.table = torch.empty(n_rows + extra, hidden)                         # [rows, hidden]
        table = self.table[:n_rows].view(n_cfg, n_blocks, MAX_DIMS, LAYOUT_VALUES, hidden)  # [cfg, 3, 6, 7, hidden]
        # per configurable node, block and value (+1; 0 = -1, no dim): the size of the dim it names
        sizes = F.pad(graph.operand_dims.float(), (1, 0))[:, :, None, :, None]  # [cfg, 3, 1, 7, 1]
        torch.addcmul(values.view(n_blocks, MAX_DIMS, LAYOUT_VALUES, hidden), torch.log1p(sizes),
                      w_dims[:, :MAX_DIMS, None], out=table)                     # [cfg, 3, 6, 7, hidden]
        table[:, :, :1].addcmul_(sizes % TPU_TILE_MINOR / TPU_TILE_MINOR, w_dims[:, MAX_DIMS:MAX_DIMS + 1, None])
        table[:, :, 1:2].addcmul_(sizes % TPU_TILE_SECOND_MINOR / TPU_TILE_SECOND_MINOR,
                                  w_dims[:, MAX_DIMS + 1:MAX_DIMS + 2, None])
        if encoder.padding:   # the padding waste of the dim a value names: to 128 most-minor, to 8 second-minor
            at = DIM_FEATURES_PER_BLOCK
            table[:, :, :1].addcmul_(padding_waste(sizes, TPU_TILE_MINOR), w_dims[:, at:at + 1, None])
            table[:, :, 1:2].addcmul_(padding_waste(sizes, TPU_TILE_SECOND_MINOR), w_dims[:, at + 1:at + 2, None])
        if encoder.roles:     # the roles of the dim a value names, read at the two most-minor slots
            roles = F.pad(graph.operand_roles.float(), (0, 0, 1, 0))             # [cfg, 3, 7, roles]: -1 names none
            w_roles = w_dims[:, encoder.roles_at:].reshape(n_blocks, ROLE_POSITIONS, DIM_ROLES, hidden)
            for position in range(ROLE_POSITIONS):                               # table[:, :, position]: [cfg, 3, 7, hidden]
                table[:, :, position] += torch.einsum("cbvr,brh->cbvh", roles, w_roles[:, position])
        table[:, 0, 0] += first.bias                                             # once per row: in slot 0
        self.index_base = torch.arange(n_cfg * NODE_CONFIG_FEAT_DIM).view(n_cfg, 1, -1) * LAYOUT_VALUES  # [cfg, 1, 18]
        if encoder.effective:
            chosen = table.gather(3, graph.default_blocks[..., None, None].expand(-1, -1, -1, 1, hidden))
            correction = self.table[n_rows:-1].view(n_cfg, n_blocks, hidden)     # [cfg, 3, hidden]
            torch.sum(chosen.squeeze(3) - table[:, :, :, 0], dim=2, out=correction)
            correction += first.weight[:, n_values + width:].t()                 # the default flags
            self.table[-1] = 0
            self.correction_at = n_rows + torch.arange(n_cfg * n_blocks).view(n_cfg, 1, n_blocks)  # [cfg, 1, 3]
            self.no_correction = torch.tensor(n_rows + n_cfg * n_blocks)         # the zero row
        self.last_bias = last.bias - encoder.not_configurable                    # delta replaces the marker
        # the batch's block codes, default flags and mismatch features: int work in a few large operations
        self.is_default, self.mismatched = None, None
        if encoder.effective or encoder.copies is not None:
            blocks = configs.reshape(configs.shape[0], -1, MAX_DIMS)             # [configs, configurable * 3, 6]
            codes = index_block_codes(blocks)                                    # [configs, configurable * 3]
            self.is_default = codes == 0                                         # all six values -1
        if encoder.copies is not None:
            default_codes = index_block_codes(graph.default_blocks).view(-1, 1)  # [cfg * 3, 1]
            codes, is_default = codes.t().contiguous(), self.is_default.t()      # [configurable * 3, configs]
            codes = torch.where(is_default, default_codes, codes)                # of the effective blocks
            self.edges = MismatchEdges(graph)
            self.mismatched = self.edges.mismatched(codes, is_default)          # [configs, kept edges]
        self.copies = None if encoder.copies is None else encoder.copies.weight.t()  # [4, hidden]

    def base(self, node_h: torch.Tensor) -> torch.Tensor:
        """What every config adds to a node's embedding node_h [nodes, hidden]: the not-configurable marker (that
        `parts`' delta replaces) and the bias of the mismatch layer: [nodes, hidden]."""
        enc = self.encoder
        base = node_h + enc.not_configurable                                     # [nodes, hidden]
        return base if enc.copies is None else base.add_(enc.copies.bias)

    def parts(self, part: slice, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`LayoutConfigEncoder.config_parts(graph, configs[part], dtype)` node-major: (delta [configurable,
        configs, hidden], mismatch features [nodes, configs, 4] or None)."""
        enc, configs = self.encoder, self.configs[part]                          # [configs, configurable, 18]
        n_configs, n_cfg, _ = configs.shape
        index = configs.transpose(0, 1) + self.index_base                       # [configurable, configs, 18]
        if enc.effective:
            default = self.is_default[part].view(n_configs, n_cfg, -1).transpose(0, 1)  # [configurable, configs, 3]
            index = torch.cat([index, torch.where(default, self.correction_at, self.no_correction)], dim=-1)
        h = F.embedding_bag(index.reshape(n_cfg * n_configs, -1), self.table, mode="sum")  # [cfg * configs, hidden]
        delta = F.linear(enc.proj[1](h), enc.proj[2].weight, self.last_bias)     # [configurable * configs, hidden]
        mismatch = None if self.mismatched is None else self.edges.features(self.mismatched[part]).to(dtype)
        return delta.view(n_cfg, n_configs, -1).to(dtype), mismatch             # [cfg, configs, hidden]

    def node_states(self, base: torch.Tensor, part: slice) -> torch.Tensor:
        """`LayoutConfigEncoder.forward` of configs[part] node-major: [nodes, configs, hidden], from `base`
        [nodes, hidden] (`self.base` of the node embedding)."""
        delta, mismatch = self.parts(part, base.dtype)
        x = repeat_configs(base, delta.shape[1])                                # [nodes, configs, hidden]
        if mismatch is not None:
            rows = mismatch.reshape(-1, MISMATCH_FEATURES)                       # [nodes * configs, 4]
            x.view(-1, x.shape[-1]).addmm_(rows, self.copies)                    # [nodes * configs, hidden]
        return x.index_add_(0, self.graph.node_config_ids, delta)
