"""From pruned graphs to model inputs: static graph tensors, config sampling and config batches.

A `GraphTensors` holds what does not depend on the configuration (node features, opcodes, edges, degree
normalisers). Configurations are read per batch from the memory-mapped `node_config_feat` / `config_feat`, so
memory grows with the batch, never with the number of configurations of a graph.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from pipeline.graphnet import layout_inputs
from pipeline.pruned import PrunedGraph
from pipeline.tpugraphs import layouts, tiles
from pipeline.tpugraphs.schema import (CONFIG_FEAT_DIM, CONVOLUTION_OPCODE, LAYOUT_BLOCKS, LAYOUT_VALUE_MAX,
                                       LAYOUT_VALUE_MIN, MAX_DIMS, MAX_OPCODE, NODE_CONFIG_FEAT_DIM, NODE_FEAT_COLUMN,
                                       NODE_FEAT_DIM, SHAPE_COLUMNS)

# per layout block (output, input = operand 0, kernel = operand 1) of a convolution: the node_feat columns naming the
# dims of the two roles `layout_operand_roles` marks (the feature dim; the batch dim, for the kernel its output feature)
CONV_ROLE_COLUMNS = tuple(tuple(NODE_FEAT_COLUMN[f"convolution_dim_numbers_{name}"] for name in names)
                          for names in (("output_feature_dim", "output_batch_dim"),
                                        ("input_feature_dim", "input_batch_dim"),
                                        ("kernel_input_feature_dim", "kernel_output_feature_dim")))


@dataclass
class GraphTensors:
    """The configuration-independent tensors of one graph.

    consumer/producer are the two columns of `edge_index` (row = (consumer, producer)); inv_deg_* are
    1 / max(1, number of producers of a node) and 1 / max(1, number of consumers of a node).
    """

    graph_id: str
    node_feat: torch.Tensor            # [nodes, features] float32
    node_opcode: torch.Tensor          # [nodes] int64
    consumer: torch.Tensor             # [edges] int64
    producer: torch.Tensor             # [edges] int64
    inv_deg_consumer: torch.Tensor     # [nodes] float32, 1 / producers per node
    inv_deg_producer: torch.Tensor     # [nodes] float32, 1 / consumers per node
    node_config_ids: torch.Tensor | None = None   # [configurable nodes] int64 (layout)
    operand_dims: torch.Tensor | None = None      # [configurable nodes, 3, 6] float32 raw dim sizes (layout)
    operand_roles: torch.Tensor | None = None     # [configurable nodes, 3, 6, 2] float32 0/1 dim roles (layout)
    hlo_code: torch.Tensor | None = None          # [nodes] int64 base-7 code of each node's HLO layout (layout)
    default_blocks: torch.Tensor | None = None    # [configurable nodes, 3, 6] int64 HLO layouts (+1) a default
                                                  # output / input / kernel block stands for (layout)
    edge_slot: torch.Tensor | None = None         # [edges] int64 config block (1 input, 2 kernel) the edge feeds, -1
    edge_consumer_k: torch.Tensor | None = None   # [edges] int64 position of the consumer in node_config_ids, -1
    log_elements: torch.Tensor | None = None      # [nodes] float32 log1p(elements of the node's output)

    @property
    def n_nodes(self) -> int:
        return int(self.node_opcode.shape[0])

    def to(self, device: torch.device | str) -> "GraphTensors":
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in moved.items():
            if isinstance(value, torch.Tensor):
                moved[name] = value.to(device, non_blocking=True)
        return GraphTensors(**moved)


def _where(graph: PrunedGraph) -> str:
    return f"pruned graph {graph.split}/{graph.graph_id}"


def graph_tensors(graph: PrunedGraph) -> GraphTensors:
    """Validate a pruned graph's static arrays and convert them to tensors (CPU)."""
    n = graph.n_nodes
    node_feat = np.asarray(graph.node_feat, dtype=np.float32)
    if node_feat.ndim != 2 or node_feat.shape[0] != n:
        raise ValueError(f"{_where(graph)}: node_feat expected [{n}, features], found {node_feat.shape}")
    if not np.all(np.isfinite(node_feat)):
        raise ValueError(f"{_where(graph)}: node_feat contains NaN or inf (re-run prune)")
    opcode = np.asarray(graph.node_opcode, dtype=np.int64)
    if n and (opcode.min() < 0 or opcode.max() > MAX_OPCODE):
        raise ValueError(f"{_where(graph)}: node_opcode expected 0..{MAX_OPCODE}, "
                         f"found {opcode.min()}..{opcode.max()}")
    edges = np.asarray(graph.edge_index, dtype=np.int64).reshape(-1, 2)  # [edges, (consumer, producer)]
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise ValueError(f"{_where(graph)}: edge_index expected node ids 0..{n - 1}, "
                         f"found {edges.min()}..{edges.max()}")
    consumer = torch.from_numpy(edges[:, 0].copy())
    producer = torch.from_numpy(edges[:, 1].copy())
    deg_consumer = torch.bincount(consumer, minlength=n).clamp(min=1).float()  # [nodes] producers per node
    deg_producer = torch.bincount(producer, minlength=n).clamp(min=1).float()  # [nodes] consumers per node
    layout = {}
    if graph.node_config_ids is not None:
        ids = np.asarray(graph.node_config_ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            raise ValueError(f"{_where(graph)}: node_config_ids expected 0..{n - 1}, found {ids.min()}..{ids.max()}")
        layout = layout_static(graph, ids, edges)
    return GraphTensors(graph_id=graph.graph_id, node_feat=torch.from_numpy(node_feat.copy()),
                        node_opcode=torch.from_numpy(opcode.copy()), consumer=consumer, producer=producer,
                        inv_deg_consumer=1.0 / deg_consumer, inv_deg_producer=1.0 / deg_producer, **layout)


def layout_static(graph: PrunedGraph, ids: np.ndarray, edges: np.ndarray) -> dict[str, torch.Tensor]:
    """The config-independent layout tensors of a layout graph (GraphTensors fields, see layout_inputs)."""
    raw = np.asarray(graph.node_feat_raw, dtype=np.float32)
    if raw.ndim != 2 or raw.shape[0] != graph.n_nodes or raw.shape[1] < NODE_FEAT_DIM:
        raise ValueError(f"{_where(graph)}: node_feat_raw expected [{graph.n_nodes}, {NODE_FEAT_DIM}], "
                         f"found {raw.shape}")
    hlo = layout_inputs.hlo_layout_indices(raw)                                   # [nodes, 6] values + 1
    slots = layouts.operand_slots(edges, ids, graph.n_nodes)               # [edges]
    position = layouts.config_positions(ids, graph.n_nodes)
    defaults = np.zeros((len(ids), len(LAYOUT_BLOCKS), MAX_DIMS), np.int64)   # [configurable, 3, 6]
    defaults[:, 0] = hlo[ids]
    fed = slots != layouts.NOT_FED
    defaults[position[edges[fed, 0]], slots[fed]] = hlo[edges[fed, 1]]
    hlo_code = layouts.block_codes(hlo + LAYOUT_VALUE_MIN).astype(np.int64)   # [nodes]
    return {"node_config_ids": torch.from_numpy(ids.copy()),
            "operand_dims": torch.from_numpy(layout_operand_dims(graph, ids, edges, slots)),
            "operand_roles": torch.from_numpy(layout_operand_roles(raw, np.asarray(graph.node_opcode)[ids], ids)),
            "hlo_code": torch.from_numpy(hlo_code), "default_blocks": torch.from_numpy(defaults),
            "edge_slot": torch.from_numpy(slots), "edge_consumer_k": torch.from_numpy(position[edges[:, 0]]),
            "log_elements": torch.from_numpy(layout_inputs.log_elements(raw))}


def layout_operand_dims(graph: PrunedGraph, ids: np.ndarray, edges: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """Raw dimension sizes the three layout blocks of each configurable node permute: float32 [configurable, 3, 6].

    Block 0 (output layout) uses the node's own shape_dimensions; block 1 (input) the shape of its first operand
    and block 2 (kernel) that of its second (`slots` = `layouts.operand_slots`); missing operands and padding give 0.
    """
    raw = np.asarray(graph.node_feat_raw, dtype=np.float32)
    dims = np.maximum(raw[:, SHAPE_COLUMNS], 0.0)                          # [nodes, 6], -1 padding -> 0
    out = np.zeros((len(ids), len(LAYOUT_BLOCKS), MAX_DIMS), np.float32)   # [configurable, 3, 6]
    out[:, 0] = dims[ids]
    fed = slots != layouts.NOT_FED
    out[layouts.config_positions(ids, graph.n_nodes)[edges[fed, 0]], slots[fed]] = dims[edges[fed, 1]]
    return out


def layout_operand_roles(raw: np.ndarray, opcode: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Which dims of each configurable node's output / input / kernel play a convolution's two roles: float32
    [configurable, 3, 6, 2], 1 where dim d of block b's tensor is the dim `CONV_ROLE_COLUMNS[b][r]` names (role 0:
    the feature dim the matrix unit reads or writes; role 1: the batch dim, for the kernel its output feature dim).
    Only convolutions carry dimension numbers in node_feat (columns 93-106); every other node gets zeros, as does a
    column outside 0..5 (a malformed or re-padded entry)."""
    out = np.zeros((len(ids), len(LAYOUT_BLOCKS), MAX_DIMS, 2), np.float32)   # [configurable, 3, 6, roles]
    conv = np.flatnonzero(np.asarray(opcode) == CONVOLUTION_OPCODE)               # positions among configurable
    for block, columns in enumerate(CONV_ROLE_COLUMNS):
        for role, column in enumerate(columns):
            dim = raw[ids[conv], column].astype(np.int64)                         # [conv nodes]
            ok = (dim >= 0) & (dim < MAX_DIMS)
            out[conv[ok], block, dim[ok], role] = 1.0
    return out


def _read_rows(array: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Rows of a (memory-mapped) array in the order of `rows`, reading the file in ascending order."""
    rows = np.asarray(rows, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    block = np.asarray(array[rows[order]])  # sorted fancy index: sequential reads from the mmap
    out = np.empty_like(block)
    out[order] = block
    return out


def layout_config_batch(graph: PrunedGraph, rows: np.ndarray) -> torch.Tensor:
    """Embedding indices of the layout configs `rows`: int64 [configs, configurable nodes, 18], value + 1 (0..6)."""
    if graph.node_config_feat is None:
        raise ValueError(f"{_where(graph)}: node_config_feat missing; a layout graph needs it")
    feat = _read_rows(graph.node_config_feat, rows)  # [configs, configurable nodes, 18] int8
    if feat.ndim != 3 or feat.shape[2] != NODE_CONFIG_FEAT_DIM:
        raise ValueError(f"{_where(graph)}: node_config_feat expected [configs, nodes, {NODE_CONFIG_FEAT_DIM}], "
                         f"found {feat.shape}")
    if feat.size and (feat.min() < LAYOUT_VALUE_MIN or feat.max() > LAYOUT_VALUE_MAX):
        raise ValueError(f"{_where(graph)}: node_config_feat expected values {LAYOUT_VALUE_MIN}..{LAYOUT_VALUE_MAX}, "
                         f"found {feat.min()}..{feat.max()}")
    return torch.from_numpy(feat.astype(np.int64) - LAYOUT_VALUE_MIN)


def tile_config_batch(graph: PrunedGraph, rows: np.ndarray) -> torch.Tensor:
    """Tile config inputs: float32 [configs, 24 + tiles.TILE_INPUT_DIM]: sign(x) * log1p(|x|) of the raw bounds,
    then the tile relative to the kernel's output (`tiles.tile_inputs`; the model reads them with gnn.tile_geometry).
    """
    if graph.config_feat is None:
        raise ValueError(f"{_where(graph)}: config_feat missing; a tile graph needs it")
    feat = _read_rows(graph.config_feat, rows).astype(np.float32)  # [configs, 24]
    if feat.ndim != 2 or feat.shape[1] != CONFIG_FEAT_DIM:
        raise ValueError(f"{_where(graph)}: config_feat expected [configs, {CONFIG_FEAT_DIM}], found {feat.shape}")
    shape = tiles.output_shape(graph.node_feat_raw)                # [6]
    geometry = tiles.tile_inputs(shape, feat)                      # [configs, TILE_INPUT_DIM]
    return torch.from_numpy(np.concatenate([np.sign(feat) * np.log1p(np.abs(feat)), geometry], axis=1))


def config_batch(kind: str, graph: PrunedGraph, rows: np.ndarray) -> torch.Tensor:
    """The model's config input for rows of the kept configs of one graph (layout or tile)."""
    if kind == "layout":
        return layout_config_batch(graph, rows)
    if kind == "tile":
        return tile_config_batch(graph, rows)
    raise ValueError(f"unknown collection kind {kind!r}; expected 'tile' or 'layout'")


def sample_configs(graph: PrunedGraph, k: int, rng: np.random.Generator) -> np.ndarray:
    """k distinct kept-config rows drawn uniformly (all of them, shuffled, when the graph has at most k)."""
    n = graph.n_kept
    if n == 0:
        raise ValueError(f"{_where(graph)}: no configurations to sample")
    if n <= k:
        return rng.permutation(n)
    return rng.choice(n, size=k, replace=False)


def runtimes(graph: PrunedGraph, rows: np.ndarray) -> torch.Tensor:
    """Training targets of the kept configs `rows` (layout: runtime; tile: normalised runtime), float32."""
    return torch.from_numpy(np.asarray(graph.config_runtime[np.asarray(rows)], dtype=np.float32))


def shard(items: list, rank: int, world: int, rng: np.random.Generator | None = None) -> list:
    """This rank's equal share of `items` for one epoch (shuffled with a rng shared by all ranks).

    The list is padded by wrapping around so every rank gets the same number of items (DDP needs equal steps).
    """
    order = rng.permutation(len(items)) if rng is not None else np.arange(len(items))
    per_rank = -(-len(items) // world)
    padded = np.resize(order, per_rank * world)  # [per_rank * world], wraps around
    return [items[i] for i in padded[rank::world]]
