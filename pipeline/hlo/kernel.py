"""A `TileKernel` (what the tile cost model knows about a fused kernel) derived from a real fusion's graph.

The graph is one fused computation with the computations it calls (`pipeline.hlo.lower.build_graph` from the
fusion's `calls=` computation); the fused computation comes last, so its root is the last root node.
- kind: "conv" if the kernel has a convolution, else "dot" with a dot, else "reduce" with a reduce or
  reduce-window, else "elementwise".
- out_shape: conv: the convolution output as (batch, spatial..., feature), 1-d convolutions as (b, 1, w, f) and
  3-d ones with depth folded into height; dot: the dot output ([n] -> (1, n)); reduce: the (first) reduce's
  output; elementwise: the kernel output (the largest element of a multi-output tuple). Scalars become (1,); more than 6 dims fold the leading ones.
- contract: conv input features; dot: product of the lhs contracting dims; reduce: product of the reduced dims
  (window size for reduce-window); itemsize and f32 from the conv/dot (else output) element type.
- n_inputs: the fused computation's parameters; n_ops: its nodes that compute (not parameter, constant, tuple,
  get-tuple-element, broadcast, bitcast, reshape, iota).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import ITEMSIZE, HloGraph, HloNode
from pipeline.tpugraphs.schema import MAX_DIMS

MAX_TILE_DIMS = MAX_DIMS                          # output_bounds holds 6 dims
NON_COMPUTE = frozenset({op.PARAMETER, op.CONSTANT, op.TUPLE, op.GET_TUPLE_ELEMENT, op.BROADCAST, op.BITCAST,
                         op.RESHAPE, op.IOTA})
DEFAULT_ITEMSIZE = 1                              # sub-byte and 8-bit float types
KERNEL_KINDS = ("conv", "dot", "elementwise", "reduce")


@dataclass(frozen=True)
class TileKernel:
    """What the cost model needs to know about a fused kernel.

    Attributes:
        kind: "conv" (output [B, H, W, Co]), "dot" (output [..., M, N]), "elementwise" or "reduce".
        out_shape: logical output dimensions; output_bounds tile these.
        itemsize: bytes per element.
        contract: dot K; conv input features; reduce: elements reduced per output element.
        window: conv (kh, kw, stride); others ().
        n_inputs: elementwise/reduce: arrays streamed in.
        n_ops: vector ops per output element (fused elementwise chain).
        f32: matrix-unit work runs in f32.
    """

    kind: str
    out_shape: tuple[int, ...]
    itemsize: int
    contract: int = 1
    window: tuple[int, ...] = ()
    n_inputs: int = 1
    n_ops: int = 1
    f32: bool = False


def kernel_output(graph: HloGraph) -> HloNode:
    """The kernel's output array: the fused root, or its largest tuple element."""
    root = max(i for i, n in enumerate(graph.nodes) if n.is_root)
    node = graph.nodes[root]
    if node.dtype == "tuple" and node.opcode == op.TUPLE and node.operands:
        node = max((graph.nodes[o] for o in node.operands), key=lambda n: prod(n.shape))
    return node


def fold_shape(shape) -> tuple[int, ...]:
    """At least 1 and at most MAX_TILE_DIMS dims: scalars -> (1,), extra leading dims multiplied together."""
    shape = tuple(int(d) for d in shape) or (1,)
    if len(shape) > MAX_TILE_DIMS:
        cut = len(shape) - MAX_TILE_DIMS + 1
        shape = (prod(shape[:cut]),) + shape[cut:]
    return shape


def _itemsize(node: HloNode) -> int:
    return ITEMSIZE.get(node.dtype, DEFAULT_ITEMSIZE) or DEFAULT_ITEMSIZE


def _two_spatial(values: list[int], fill: int, fold: bool) -> list[int]:
    """Exactly two spatial entries: left-padded with `fill`, or the leading ones multiplied (fold) / dropped."""
    if len(values) < 2:
        return [fill] * (2 - len(values)) + values
    return [prod(values[:-1]), values[-1]] if fold else values[-2:]


def _conv_kernel(graph: HloGraph, node: HloNode, common: dict) -> TileKernel:
    c, w = node.conv, node.window
    spatial = _two_spatial([node.shape[d] for d in c.output_spatial], 1, fold=True)
    size = _two_spatial(list(w.size) if w else [], 1, fold=False)
    stride = _two_spatial(list(w.stride) if w else [], 1, fold=False)
    out = (node.shape[c.output_batch], *spatial, node.shape[c.output_feature])
    contract = graph.nodes[node.operands[1]].shape[c.kernel_input_feature]
    return TileKernel("conv", tuple(int(d) for d in out), _itemsize(node), int(contract),
                      (int(size[0]), int(size[1]), int(stride[1])), f32=node.dtype == "f32", **common)


def _dot_kernel(graph: HloGraph, node: HloNode, common: dict) -> TileKernel:
    lhs = graph.nodes[node.operands[0]]
    contract = prod(lhs.shape[d] for d in node.dot.lhs_contracting_dims) if node.dot.lhs_contracting_dims else \
        lhs.shape[node.dot.lhs_contracting] if lhs.shape else 1
    out = tuple(node.shape)
    out = (1, 1) if not out else (1,) + out if len(out) == 1 else out
    return TileKernel("dot", fold_shape(out), _itemsize(node), max(1, int(contract)), f32=node.dtype == "f32",
                      **common)


def tile_kernel(graph: HloGraph) -> TileKernel:
    """The TileKernel of a fused-kernel graph (see the module docstring)."""
    nodes = graph.nodes
    output = kernel_output(graph)                 # once: it scans every node (per node it made this quadratic)
    fused = [n for n in nodes if n.computation == output.computation]
    common = {"n_inputs": max(1, sum(n.opcode == op.PARAMETER for n in fused)),
              "n_ops": max(1, sum(n.opcode not in NON_COMPUTE for n in nodes))}
    by_opcode = {}
    for n in nodes:
        by_opcode.setdefault(n.opcode, n)
    if op.CONVOLUTION in by_opcode and by_opcode[op.CONVOLUTION].conv is not None:
        return _conv_kernel(graph, by_opcode[op.CONVOLUTION], common)
    if op.DOT in by_opcode:
        return _dot_kernel(graph, by_opcode[op.DOT], common)
    if op.REDUCE in by_opcode or op.REDUCE_WINDOW in by_opcode:
        red = by_opcode.get(op.REDUCE) or by_opcode[op.REDUCE_WINDOW]
        source = nodes[red.operands[0]] if red.operands else red
        if red.opcode == op.REDUCE:
            contract = prod(source.shape[d] for d in red.dimensions if d < len(source.shape))
        else:
            contract = prod(red.window.size) if red.window else 1
        shaped = red if red.dtype != "tuple" else output
        return TileKernel("reduce", fold_shape(shaped.shape), _itemsize(shaped), max(1, int(contract)), **common)
    return TileKernel("elementwise", fold_shape(output.shape), _itemsize(output), **common)
