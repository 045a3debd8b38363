"""Runtime of an HLO graph under per-node layout configurations: a small, physically motivated TPU model.

Model (all constants in conf/synthesize/default.yaml, `layout_cost`):
- Tiling: the two most-minor dimensions of every tensor are padded to (8, 128) (`tile`), so a tensor's memory
  traffic is its padded size: a layout that puts a small dimension minor wastes bandwidth.
- Every op is a roofline: max(flops / (peak * efficiency), padded bytes / bandwidth) + a fixed per-op overhead.
  Only convolutions and dots have flops. Their matrix-unit efficiency is the product over input, kernel (rhs) and
  output of a placement factor of the dimension that feeds the 128-wide unit (input/contracting feature,
  output feature): `placement[0]` when it is the most-minor dimension (times its lane utilisation d/ceil128(d)),
  `placement[1]` when second-minor (times d/ceil8(d)), `placement[2]` otherwise; the kernel's (rhs's) other
  feature dimension costs `offpair_penalty` when it is not among the two most-minor. f32 runs `f32_slowdown`x
  slower on the matrix unit.
- Layouts: a configurable node (convolution, dot, reshape) takes its output/input/kernel layouts from its
  config row; an all -1 block means the compiler default (feature-minor for convolutions, the HLO's row-major
  layout otherwise). Elementwise ops take the layout of their first operand (layouts propagate through them);
  every other op reads and writes the row-major layout. Whenever a consumer expects a layout different from its
  producer's, a transpose copy is paid (read + write of the padded tensor, plus `copy_overhead_ns`), except for
  broadcasts, constants and iotas, which are materialised in any layout for free.
- Real programs (every opcode, `pipeline.costmodel.opclasses`): free ops cost nothing; an op of no known class
  costs its memory traffic (padded row-major bytes of its output and operands / bandwidth + `op_overhead_ns`);
  control ops (call, while, fusion ...) hand their operands and the results of the computations they call over
  in the row-major layout (copies where those differ) and cost nothing else, since the called instructions are
  nodes themselves (a while body counts once: trip counts are unknown); instructions of per-element computations
  applied by reduce-like ops cost nothing. A dot's flops multiply all its contracting dimensions.
- A reshape is a free bitcast only when input and output are row-major with an identical tiled minor dimension;
  otherwise it is a copy.
Noise (multiplicative, ~0.5%) is added by the caller, so the model itself is deterministic and testable.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from pipeline.costmodel import opclasses
from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import ITEMSIZE, HloGraph, HloNode
from pipeline.hlo.layout_ids import decode_block, default_layouts, permutations, row_major_id
from pipeline.tpugraphs.schema import LAYOUT_BLOCKS, NODE_CONFIG_FEAT_DIM, layout_block

DEFAULT_ITEMSIZE = 1          # element types ITEMSIZE does not list (8-bit floats)


@dataclass(frozen=True)
class LayoutCostParams:
    tile: tuple[int, int]
    flops_per_ns: float
    f32_slowdown: float
    bytes_per_ns: float
    op_overhead_ns: float
    copy_overhead_ns: float
    launch_overhead_ns: float
    placement: tuple[float, float, float]
    offpair_penalty: float


def itemsize(dtype: str) -> int:
    """Bytes per element (0 for tuples and tokens)."""
    return ITEMSIZE.get(dtype, DEFAULT_ITEMSIZE)


class LayoutCostModel:
    """Noise-free runtime (ns) of `graph` for a batch of layout configurations of `node_config_ids`."""

    def __init__(self, graph: HloGraph, node_config_ids, params: LayoutCostParams):
        self.graph, self.params = graph, params
        self.nodes = graph.nodes
        self.config_ids = [int(n) for n in node_config_ids]
        for n in self.config_ids:
            if self.nodes[n].opcode not in op.CONFIGURABLE:
                raise ValueError(f"node {n} (opcode {self.nodes[n].opcode}) is not configurable")
        self._pad: dict[int, np.ndarray] = {}
        self.applied = applied_nodes(graph)
        self._place: dict[tuple[int, int, bool], np.ndarray] = {}

    # -- per-node tables over layout ids
    def padded_bytes(self, n: int) -> np.ndarray:
        """float64 [rank!]: bytes of node n's output under each layout, minor dims tiled to (8, 128)."""
        if n not in self._pad:
            node = self.nodes[n]
            shape = np.array(node.shape, dtype=np.float64)
            perms = permutations(node.rank)
            second_tile, minor_tile = self.params.tile
            if node.rank == 0:
                elems = np.ones(1)
            elif node.rank == 1:
                elems = np.ceil(shape[perms[:, 0]] / minor_tile) * minor_tile
            else:
                minor, second = shape[perms[:, 0]], shape[perms[:, 1]]
                elems = (prod(node.shape) / (minor * second) * np.ceil(minor / minor_tile) * minor_tile
                         * np.ceil(second / second_tile) * second_tile)
            self._pad[n] = elems * itemsize(node.dtype)
        return self._pad[n]

    def placement(self, n: int, dim: int) -> np.ndarray:
        """float64 [rank!]: matrix-unit efficiency factor of dimension `dim` of node n under each layout."""
        if (n, dim, False) not in self._place:
            self._place[n, dim, False] = self._placement(n, dim)
        return self._place[n, dim, False]

    def _placement(self, n: int, dim: int) -> np.ndarray:
        node, (p0, p1, p2) = self.nodes[n], self.params.placement
        pos = np.argmax(permutations(node.rank) == dim, axis=1)
        size = node.shape[dim]
        second_tile, minor_tile = self.params.tile
        lane = size / (np.ceil(size / minor_tile) * minor_tile)
        sublane = size / (np.ceil(size / second_tile) * second_tile)
        return np.where(pos == 0, p0 * lane, np.where(pos == 1, p1 * sublane, p2))

    def in_pair(self, n: int, dim: int) -> np.ndarray:
        """float64 [rank!]: 1 where `dim` is among the two most-minor dimensions, else offpair_penalty."""
        if (n, dim, True) not in self._place:
            pos = np.argmax(permutations(self.nodes[n].rank) == dim, axis=1)
            self._place[n, dim, True] = np.where(pos <= 1, 1.0, self.params.offpair_penalty)
        return self._place[n, dim, True]

    # -- costs
    def copy_cost(self, n: int, have, want):
        """Transpose copy of node n's output from layout `have` to `want` (0 where equal)."""
        pb = self.padded_bytes(n)
        cost = (pb[have] + pb[want]) / self.params.bytes_per_ns + self.params.copy_overhead_ns
        return np.where(np.asarray(have) != np.asarray(want), cost, 0.0)

    def _matmul(self, n: int, flops: float, factors, mem) -> np.ndarray:
        p = self.params
        peak = p.flops_per_ns / (p.f32_slowdown if self.nodes[n].dtype == "f32" else 1.0)
        eff = np.maximum(prod(factors), 1e-3)
        return np.maximum(flops / (peak * eff), mem / p.bytes_per_ns) + p.op_overhead_ns

    def _configurable(self, n: int, node: HloNode, lay: list, chosen) -> tuple[object, object]:
        x = node.operands[0]
        out_l, in_l, k_l = chosen
        cost = self._into(x, lay, in_l)
        pb_out, pb_x = self.padded_bytes(n), self.padded_bytes(x)
        if node.opcode == op.CONVOLUTION:
            c, k = node.conv, node.operands[1]
            cost = cost + self._into(k, lay, k_l)
            kernel = self.nodes[k]
            window = prod(kernel.shape[d] for d in c.kernel_spatial)
            flops = 2.0 * prod(node.shape) * window * kernel.shape[c.kernel_input_feature]
            factors = (self.placement(x, c.input_feature)[in_l], self.placement(n, c.output_feature)[out_l],
                       self.placement(k, c.kernel_output_feature)[k_l]
                       * self.in_pair(k, c.kernel_input_feature)[k_l])
            cost = cost + self._matmul(n, flops, factors, pb_x[in_l] + self.padded_bytes(k)[k_l] + pb_out[out_l])
        elif node.opcode == op.DOT:
            d, r = node.dot, node.operands[1]
            rhs = self.nodes[r]
            rhs_l = row_major_id(rhs.rank)
            cost = cost + self._into(r, lay, rhs_l)
            n_dim = rhs.rank - 1 if d.rhs_contracting != rhs.rank - 1 else rhs.rank - 2
            flops = 2.0 * prod(node.shape) * prod(rhs.shape[k] for k in (d.rhs_contracting_dims or
                                                                          (d.rhs_contracting,)))
            factors = (self.placement(x, d.lhs_contracting)[in_l], self.placement(n, node.rank - 1)[out_l],
                       self.placement(r, n_dim)[rhs_l] * self.in_pair(r, d.rhs_contracting)[rhs_l])
            cost = cost + self._matmul(n, flops, factors, pb_x[in_l] + self.padded_bytes(r)[rhs_l] + pb_out[out_l])
        else:   # reshape
            src = self.nodes[x]
            bitcast = (src.shape[-1:] == node.shape[-1:] and pb_x[row_major_id(src.rank)] ==
                       pb_out[row_major_id(node.rank)])
            free = (np.asarray(in_l) == row_major_id(src.rank)) & (np.asarray(out_l) == row_major_id(node.rank))
            move = (pb_x[in_l] + pb_out[out_l]) / self.params.bytes_per_ns + self.params.copy_overhead_ns
            cost = cost + np.where(free & bitcast, 0.0, move)
        return cost, out_l

    def _into(self, producer: int, lay: list, want):
        """Cost of handing producer's output to a consumer that expects layout `want`."""
        if self.nodes[producer].opcode in op.LAYOUT_FLEXIBLE:
            return 0.0
        return self.copy_cost(producer, lay[producer], want)

    def _plain(self, n: int, node: HloNode, lay: list):
        """Non-configurable, non-elementwise op: reads and writes row-major."""
        cost = sum(self._into(o, lay, row_major_id(self.nodes[o].rank)) for o in dict.fromkeys(node.operands))
        moved = self.padded_bytes(n)[row_major_id(node.rank)] + sum(
            self.padded_bytes(o)[row_major_id(self.nodes[o].rank)] for o in dict.fromkeys(node.operands)
            if self.nodes[o].opcode != op.CONSTANT)   # constants are folded into the op
        overhead = self.params.copy_overhead_ns if node.opcode == op.TRANSPOSE else self.params.op_overhead_ns
        return cost + moved / self.params.bytes_per_ns + overhead

    def _elementwise(self, n: int, node: HloNode, lay: list):
        same = [o for o in dict.fromkeys(node.operands) if self.nodes[o].shape == node.shape]   # not scalar bounds
        lead = next((o for o in same if self.nodes[o].opcode not in op.LAYOUT_FLEXIBLE), None)
        out_l = lay[lead] if lead is not None else row_major_id(node.rank)
        elems = self.padded_bytes(n) / max(itemsize(node.dtype), 1)
        sizes = itemsize(node.dtype) + sum(itemsize(self.nodes[o].dtype) for o in same)
        cost = elems[out_l] * sizes / self.params.bytes_per_ns + self.params.op_overhead_ns
        for o in same:
            if o != lead:
                cost = cost + self._into(o, lay, out_l)
        return cost, out_l

    def _control(self, node: HloNode, lay: list):
        """tuple, call, while, fusion ...: operands in and called results out in the row-major layout."""
        handed = dict.fromkeys((*node.operands, *node.called_roots))
        return sum((self._into(o, lay, row_major_id(self.nodes[o].rank)) for o in handed), 0.0)

    def node_cost(self, n: int, node: HloNode, lay: list, chosen: dict):
        """(cost [C] or scalar, output layout ids) of node n, given its operands' layouts `lay`."""
        if n in self.applied:
            return 0.0, row_major_id(node.rank)
        if node.opcode == op.TUPLE or node.opcode in opclasses.CONTROL:   # results leave in the row-major layout
            return self._control(node, lay), row_major_id(node.rank)
        if node.opcode in opclasses.FREE:
            return 0.0, row_major_id(node.rank)
        if node.opcode in op.CONFIGURABLE:
            picks = chosen.get(n) or default_layouts(node, [self.nodes[o] for o in node.operands])
            return self._configurable(n, node, lay, picks)
        if node.opcode in opclasses.ELEMENTWISE:
            return self._elementwise(n, node, lay)
        return self._plain(n, node, lay), row_major_id(node.rank)

    def choices(self, node_config_feat: np.ndarray) -> dict[int, tuple]:
        """Per configurable node: (output, input, kernel) layout ids, each an int64 [C] array."""
        feat = np.asarray(node_config_feat)
        if feat.ndim != 3 or feat.shape[1:] != (len(self.config_ids), NODE_CONFIG_FEAT_DIM):
            raise ValueError(f"node_config_feat: expected [C, {len(self.config_ids)}, 18], got {feat.shape}")
        out = {}
        for k, n in enumerate(self.config_ids):
            node = self.nodes[n]
            ops_ = [self.nodes[o] for o in node.operands]
            d_out, d_in, d_k = default_layouts(node, ops_)
            where = f"node_config_feat[:, {k}] (node {n})"
            output, inp, kernel = (feat[:, k, layout_block(block)] for block in LAYOUT_BLOCKS)   # [C, 6] each
            out[n] = (decode_block(output, node.rank, d_out, where),
                      decode_block(inp, ops_[0].rank, d_in, where),
                      decode_block(kernel, ops_[1].rank, d_k, where) if d_k is not None else None)
        return out

    def _run(self, node_config_feat: np.ndarray) -> tuple[np.ndarray, list]:
        """(float64 [C] runtimes, each node's output layout id: an int or an int64 [C] array)."""
        chosen = self.choices(node_config_feat)
        lay: list = [0] * len(self.nodes)
        total = np.full(len(node_config_feat), self.params.launch_overhead_ns)
        for n, node in enumerate(self.nodes):
            cost, lay[n] = self.node_cost(n, node, lay, chosen)
            total = total + cost
        return total, lay

    def runtime_ns(self, node_config_feat: np.ndarray) -> np.ndarray:
        """float64 [C]: noise-free runtime of each configuration row of node_config_feat [C, NC, 18]."""
        return self._run(node_config_feat)[0]

    def default_minor_to_major(self) -> list[tuple[int, ...]]:
        """Each node's output layout (minor-to-major) when every block is left at the compiler default (all -1).

        This is the layout the module compiled with the default configuration holds, which the generator records in
        node_feat's layout columns (docs/cost-model.md, "What the layout columns record"): a convolution's
        output feature-minor, an elementwise op's the layout of its leading operand, row-major otherwise.
        """
        default = np.full((1, len(self.config_ids), NODE_CONFIG_FEAT_DIM), -1, dtype=np.int64)  # [1, NC, 18]
        _, lay = self._run(default)
        return [tuple(int(d) for d in permutations(node.rank)[int(np.asarray(l).reshape(-1)[0])])
                for node, l in zip(self.nodes, lay)]


def applied_nodes(graph: HloGraph) -> frozenset[int]:
    """Ids of the nodes in computations applied per element by reduce-like ops (priced with their caller)."""
    computations = {graph.nodes[r].computation for node in graph.nodes if node.opcode in opclasses.APPLIERS
                    for r in node.called_roots}
    computations.discard("")
    return frozenset(i for i, node in enumerate(graph.nodes) if node.computation in computations)
