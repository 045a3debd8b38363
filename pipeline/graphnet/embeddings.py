"""Input embeddings: nodes (opcode + normalised features), layout config values, tile config features.

Layout configs enter early: every node gets its graph embedding plus a config part, which for configurable nodes
embeds the 18 layout values (-1..5, so the -1 padding has its own vector) and for every other node is one learned
"not configurable" marker. The result is `[configs, nodes, hidden]`, so many configs of a graph share one pass.
"""
from __future__ import annotations

import torch
from torch import nn

from pipeline.graphnet.layout_inputs import MISMATCH_FEATURES, effective_configs, mismatch_features
from pipeline.tpugraphs.layouts import TPU_TILE_MINOR, TPU_TILE_SECOND_MINOR, padded_length
from pipeline.tpugraphs.tiles import TILE_INPUT_DIM
from pipeline.tpugraphs.schema import (CONFIG_FEAT_DIM, LAYOUT_BLOCKS, LAYOUT_VALUE_MAX, LAYOUT_VALUE_MIN, MAX_DIMS,
                                       NODE_CONFIG_FEAT_DIM, OPCODE_COUNT)

LAYOUT_VALUES = LAYOUT_VALUE_MAX - LAYOUT_VALUE_MIN + 1   # 7 distinct values, -1..5
DIM_FEATURES_PER_BLOCK = MAX_DIMS + 2        # log sizes of the 6 dims, tile remainders of the 2 most minor
PADDING_FEATURES_PER_BLOCK = 2               # log padding waste of the most-minor (to 128) and second-minor (to 8) dim
DIM_ROLES = 2              # per dim of a convolution's tensor: its feature dim, its batch dim (kernel: output feature)
ROLE_POSITIONS = 2         # the roles of the dims a layout puts most-minor and second-minor
ROLE_FEATURES_PER_BLOCK = ROLE_POSITIONS * DIM_ROLES


def ordered_sizes(configs: torch.Tensor, operand_dims: torch.Tensor) -> torch.Tensor:
    """[configs, configurable, 3, 6] raw sizes of the dimensions in the order each block puts them (minor first),
    0 where the block names no dim, from configs [configs, configurable, 18] (embedding indices: value + 1) and
    operand_dims [configurable, 3, 6] (the output / input / kernel operands' sizes)."""
    n_configs, n_nodes, _ = configs.shape
    order = (configs + LAYOUT_VALUE_MIN).reshape(n_configs, n_nodes, len(LAYOUT_BLOCKS), MAX_DIMS)
    # order: [configs, nodes, 3, 6] dimension indices, -1 = none
    dims = operand_dims.unsqueeze(0).expand(n_configs, -1, -1, -1)               # [configs, nodes, 3, 6]
    return torch.gather(dims, -1, order.clamp(min=0)) * (order >= 0)             # [configs, nodes, 3, 6]


def layout_dim_features(sizes: torch.Tensor) -> torch.Tensor:
    """Sizes of the dimensions in the order a layout puts them (minor first), and their remainders by the tile.

    Args:
        sizes: [configs, configurable, 3, 6] `ordered_sizes` of the configs' output / input / kernel blocks.
    Returns:
        [configs, configurable, 3, DIM_FEATURES_PER_BLOCK] float: log1p(size) of dims minor-to-major, then
        (size % 128) / 128 of the most minor and (size % 8) / 8 of the second-minor dim.
    """
    minor, second = sizes[..., 0], sizes[..., 1]                                 # [configs, nodes, 3]
    return torch.cat([torch.log1p(sizes), (minor % TPU_TILE_MINOR / TPU_TILE_MINOR).unsqueeze(-1),
                      (second % TPU_TILE_SECOND_MINOR / TPU_TILE_SECOND_MINOR).unsqueeze(-1)], dim=-1)


def padding_waste(sizes: torch.Tensor, tile: int) -> torch.Tensor:
    """float, the shape of `sizes`: log(ceil(size / tile) * tile / size), the log of the length a dim of `size`
    occupies when laid out on tiles of `tile` over its own length; 0 for size 0 (no dim)."""
    safe = sizes.float().clamp(min=1)
    return torch.log(padded_length(safe, tile) / safe) * (sizes > 0)


def layout_padding_features(sizes: torch.Tensor) -> torch.Tensor:
    """What a layout's TPU (8, 128) tiling wastes: [configs, configurable, 3, PADDING_FEATURES_PER_BLOCK] float from
    `ordered_sizes` [configs, configurable, 3, 6], `padding_waste` of the most-minor dim to 128 and of the
    second-minor to 8. Their sum is the log of the block's padded over its raw elements; each is a function of one
    slot's dim, so the chunked path can table them."""
    return torch.stack([padding_waste(sizes[..., 0], TPU_TILE_MINOR),
                        padding_waste(sizes[..., 1], TPU_TILE_SECOND_MINOR)], dim=-1)   # [configs, nodes, 3, 2]


def layout_role_features(configs: torch.Tensor, operand_roles: torch.Tensor) -> torch.Tensor:
    """The roles (`data.layout_operand_roles`) of the dimensions a layout puts most-minor and second-minor.

    Args:
        configs: [configs, configurable, 18] embedding indices (layout value + 1; 0 = -1 padding).
        operand_roles: [configurable, 3, 6, DIM_ROLES] float 0/1 roles of each dim of the output / input / kernel.
    Returns:
        [configs, configurable, 3, ROLE_FEATURES_PER_BLOCK] float: the most-minor dim's roles, then the
        second-minor's; 0 where the block names no dim there.
    """
    n_configs, n_nodes, _ = configs.shape
    order = (configs + LAYOUT_VALUE_MIN).reshape(n_configs, n_nodes, len(LAYOUT_BLOCKS), MAX_DIMS)
    order = order[..., :ROLE_POSITIONS]                                          # [configs, nodes, 3, 2] dims, -1 none
    roles = operand_roles.unsqueeze(0).expand(n_configs, -1, -1, -1, -1)         # [configs, nodes, 3, 6, roles]
    index = order.clamp(min=0).unsqueeze(-1).expand(-1, -1, -1, -1, DIM_ROLES)   # [configs, nodes, 3, 2, roles]
    picked = torch.gather(roles, 3, index) * (order >= 0).unsqueeze(-1)          # [configs, nodes, 3, 2, roles]
    return picked.reshape(n_configs, n_nodes, len(LAYOUT_BLOCKS), ROLE_FEATURES_PER_BLOCK)  # [configs, nodes, 3, 4]


class NodeEncoder(nn.Module):
    """Configuration-independent node embedding: [nodes] opcode + [nodes, features] -> [nodes, hidden]."""

    def __init__(self, node_feat_dim: int, hidden: int, opcode_dim: int):
        super().__init__()
        self.opcode = nn.Embedding(OPCODE_COUNT, opcode_dim)
        self.proj = nn.Sequential(nn.Linear(node_feat_dim + opcode_dim, hidden), nn.GELU(),
                                  nn.Linear(hidden, hidden))

    def forward(self, node_feat: torch.Tensor, node_opcode: torch.Tensor) -> torch.Tensor:
        x = torch.cat([node_feat, self.opcode(node_opcode)], dim=-1)  # [nodes, features + opcode_dim]
        return self.proj(x)                                            # [nodes, hidden]


class LayoutConfigEncoder(nn.Module):
    """Adds the per-config part to a node embedding.

    forward(node_h [nodes, hidden], graph GraphTensors, configs [configs, configurable, 18] in 0..6)
    -> [configs, nodes, hidden]. The config part of a configurable node sees its embedded layout values and the
    dimension sizes they put minor (`layout_dim_features`). With `effective`, default (-1) blocks are first replaced
    by the HLO layouts they stand for, plus a per-block "was default" flag; with `mismatch`, every node also gets
    its mismatched in/out edges under the config (`layout_inputs.mismatch_features`, the copies a config costs).
    With `padding`, each block's dimension features also carry the TPU tiling's padding waste of its two most-minor
    dims (`layout_padding_features`); with `roles`, the roles of those dims (`layout_role_features`: a convolution's
    feature and batch dims). A block's features: [dims | padding | roles], `roles_at` where the roles start.
    """

    def __init__(self, hidden: int, value_dim: int, effective: bool, mismatch: bool, roles: bool = False,
                 padding: bool = False):
        super().__init__()
        self.effective, self.mismatch, self.roles, self.padding = effective, mismatch, roles, padding
        self.roles_at = DIM_FEATURES_PER_BLOCK + (PADDING_FEATURES_PER_BLOCK if padding else 0)
        self.block_width = self.roles_at + (ROLE_FEATURES_PER_BLOCK if roles else 0)   # per layout block
        self.value = nn.Embedding(LAYOUT_VALUES, value_dim)
        # position of each of the 18 values (output/input/kernel x 6 dims) matters: a linear over the flattened slots
        width = NODE_CONFIG_FEAT_DIM * value_dim + len(LAYOUT_BLOCKS) * self.block_width
        width += len(LAYOUT_BLOCKS) if effective else 0
        self.proj = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, hidden))
        self.not_configurable = nn.Parameter(torch.zeros(hidden))
        self.copies = nn.Linear(MISMATCH_FEATURES, hidden) if mismatch else None

    def config_parts(self, graph, configs: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The per-config parts, computed on the configurable nodes and edges only: (delta [configs, configurable,
        hidden] = config embedding - marker, mismatch features [configs, nodes, 4] or None)."""
        n_configs, n_cfg_nodes, _ = configs.shape
        parts, mismatch = [], None
        if self.effective or self.mismatch:
            effective, is_default = effective_configs(configs, graph.default_blocks)  # [configs, configurable, 18]
        if self.effective:
            configs = effective
            parts.append(is_default.to(dtype))                         # [configs, configurable, 3]
        # the table indexed directly: the same rows as self.value(configs), and a CPU backward 2.3x faster
        emb = self.value.weight[configs]                              # [configs, configurable, 18, value_dim]
        emb = emb.reshape(n_configs, n_cfg_nodes, -1)                 # [configs, configurable, 18 * value_dim]
        sizes = ordered_sizes(configs, graph.operand_dims)            # [configs, configurable, 3, 6]
        dims = [layout_dim_features(sizes)]                           # [configs, configurable, 3, 8]
        if self.padding:
            dims.append(layout_padding_features(sizes))               # [configs, configurable, 3, 2]
        if self.roles:
            dims.append(layout_role_features(configs, graph.operand_roles))    # [configs, configurable, 3, 4]
        dims = torch.cat(dims, dim=-1)                                # [configs, configurable, 3, block_width]
        dims = dims.reshape(n_configs, n_cfg_nodes, -1)               # [configs, configurable, 3 * block_width]
        cfg_h = self.proj(torch.cat([emb, dims.to(emb.dtype), *parts], dim=-1))  # [configs, configurable, hidden]
        if self.copies is not None:
            mismatch = mismatch_features(effective, is_default, graph).to(dtype)  # [configs, nodes, 4]
        return cfg_h - self.not_configurable, mismatch                # delta replaces the marker

    def forward(self, node_h: torch.Tensor, graph, configs: torch.Tensor) -> torch.Tensor:
        delta, mismatch = self.config_parts(graph, configs, node_h.dtype)
        base = node_h + self.not_configurable                         # [nodes, hidden]
        x = base.unsqueeze(0).expand(configs.shape[0], -1, -1)        # [configs, nodes, hidden]
        if mismatch is not None:
            x = x + self.copies(mismatch)                             # [configs, nodes, hidden]
        # configurable nodes: replace the marker by their config embedding
        return x.index_add(1, graph.node_config_ids, delta.to(x.dtype))  # [configs, nodes, hidden]

    def node_major(self, node_h: torch.Tensor, graph, delta: torch.Tensor,
                   mismatch: torch.Tensor | None) -> torch.Tensor:
        """`forward` from `config_parts` of some configs, laid out node-major: [nodes, configs, hidden]."""
        base = (node_h + self.not_configurable).unsqueeze(1)          # [nodes, 1, hidden]
        if mismatch is None:
            x = base.expand(-1, delta.shape[0], -1).contiguous()      # [nodes, configs, hidden]
        else:
            x = self.copies(mismatch.transpose(0, 1)).add_(base)      # [nodes, configs, hidden]
        return x.index_add_(0, graph.node_config_ids, delta.transpose(0, 1).to(x.dtype))


class TileConfigEncoder(nn.Module):
    """Tile config inputs [configs, >= 24] (`data.tile_config_batch`) -> [configs, hidden].

    Reads the 24 log bounds, plus with `geometry` the TILE_INPUT_DIM columns relating the tile to the kernel's
    output (pipeline.tpugraphs.tiles.tile_inputs) that follow them.
    """

    def __init__(self, hidden: int, geometry: bool):
        super().__init__()
        self.width = CONFIG_FEAT_DIM + (TILE_INPUT_DIM if geometry else 0)
        self.proj = nn.Sequential(nn.Linear(self.width, hidden), nn.GELU(), nn.Linear(hidden, hidden))

    def forward(self, config_feat: torch.Tensor) -> torch.Tensor:
        return self.proj(config_feat[:, :self.width])  # [configs, hidden]
