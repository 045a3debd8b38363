"""HLO graphs: nodes with opcode, shape, element type, operands and the attributes the 140 node-feature columns
describe (window, convolution dimension numbers, dimensions, slices, padding, layout), and a builder for them.

Nodes are in topological order (operands first); `HloGraph.edge_index()` gives the official `[consumer, producer]`
rows: one per distinct operand, in operand order, then one per called computation (to that computation's root).
Graphs come from the synthetic templates (`HloBuilder`) or from real HLO text (`pipeline.hlo.lower`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from pipeline.hlo import opcodes as op

ITEMSIZE = {"pred": 1, "s8": 1, "s16": 2, "s32": 4, "s64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8, "f16": 2,
            "bf16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16, "tuple": 0, "token": 0, "opaque": 0}


@dataclass(frozen=True)
class Window:
    """Per spatial dimension window attributes (XLA `Window`)."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    pad_low: tuple[int, ...]
    pad_high: tuple[int, ...]
    window_dilation: tuple[int, ...] = ()
    base_dilation: tuple[int, ...] = ()
    reversal: tuple[bool, ...] = ()

    def __post_init__(self):
        ones = (1,) * len(self.size)
        object.__setattr__(self, "window_dilation", self.window_dilation or ones)
        object.__setattr__(self, "base_dilation", self.base_dilation or ones)
        object.__setattr__(self, "reversal", self.reversal or (False,) * len(self.size))


@dataclass(frozen=True)
class ConvDims:
    """XLA `ConvolutionDimensionNumbers` (dimension indices of the input, kernel and output tensors)."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]


NHWC = ConvDims(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))   # kernel HWIO
NCHW = ConvDims(0, 1, (2, 3), 1, 0, (2, 3), 0, 1, (2, 3))   # kernel OIHW


@dataclass(frozen=True)
class DotDims:
    """Dot dimension numbers: one contracting dimension per side, leading batch dimensions on both.

    From real HLO text the full lists are kept too (`*_dims`); then `lhs_contracting` / `rhs_contracting` are the
    first contracting dimension of each side (the last dimension when there is none) and `n_batch` the batch count.
    """

    lhs_contracting: int
    rhs_contracting: int
    n_batch: int = 0
    lhs_contracting_dims: tuple[int, ...] = ()
    rhs_contracting_dims: tuple[int, ...] = ()
    lhs_batch_dims: tuple[int, ...] = ()
    rhs_batch_dims: tuple[int, ...] = ()


@dataclass
class HloNode:
    opcode: int
    shape: tuple[int, ...]
    dtype: str
    operands: tuple[int, ...] = ()
    dimensions: tuple[int, ...] = ()
    window: Window | None = None
    conv: ConvDims | None = None
    dot: DotDims | None = None
    parameter_number: int = 0
    tuple_size: int = 0
    feature_group_count: int = 0
    slice: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None   # start, stride, limit
    padding: tuple[tuple[int, ...], tuple[int, ...]] | None = None                  # edge low, edge high
    is_root: bool = False
    batch_group_count: int = 0
    dynamic_slice_sizes: tuple[int, ...] = ()
    is_stable: bool = False
    layout: tuple[int, ...] | None = None       # minor-to-major as written in the HLO; None: row-major default
    called_roots: tuple[int, ...] = ()          # root node of each computation this node calls (fusion, while, ...)
    name: str = ""                              # the HLO instruction name (real HLO text only)
    computation: str = ""                       # the HLO computation holding it (real HLO text only)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def empty(self) -> bool:
        """An array of zero elements (a dim of size 0, `f32[0,4]`): no layout or tile changes what it costs."""
        return self.dtype != "tuple" and 0 in self.shape


@dataclass
class HloGraph:
    """A built graph: nodes in topological order and the node ids starting each HLO computation."""

    nodes: list[HloNode]
    splits: list[int] = field(default_factory=lambda: [0])
    unknown_opcodes: dict[str, int] = field(default_factory=dict)   # opcode name -> instructions given id 0

    def __len__(self) -> int:
        return len(self.nodes)

    def opcodes(self) -> np.ndarray:
        return np.array([n.opcode for n in self.nodes], dtype=np.uint8)

    def edge_index(self) -> np.ndarray:
        """int64 [E, 2] rows (consumer, producer): distinct operands in operand order, then called roots."""
        rows = [(i, p) for i, n in enumerate(self.nodes) for p in dict.fromkeys(n.operands + n.called_roots)]
        return np.array(rows, dtype=np.int64).reshape(-1, 2)   # [edges, 2]

    def node_splits(self) -> np.ndarray:
        """int64 [1, S]: computation starts, then the node count (as the official extractor writes it)."""
        bounds = sorted(set(self.splits) | {len(self.nodes)})
        return np.array(bounds, dtype=np.int64).reshape(1, -1)   # [1, splits]


class HloBuilder:
    """Appends nodes in topological order; every method returns the new node's id."""

    def __init__(self, dtype: str = "bf16"):
        self.dtype = dtype
        self.nodes: list[HloNode] = []
        self.splits = [0]
        self.n_params = 0

    def shape(self, x: int) -> tuple[int, ...]:
        return self.nodes[x].shape

    def add(self, opcode: int, shape, operands=(), dtype: str | None = None, **attrs) -> int:
        for o in operands:
            if not 0 <= o < len(self.nodes):
                raise ValueError(f"operand {o} does not exist yet (nodes so far: {len(self.nodes)})")
        self.nodes.append(HloNode(opcode, tuple(int(d) for d in shape), dtype or self.dtype, tuple(operands), **attrs))
        return len(self.nodes) - 1

    def begin_computation(self) -> None:
        """Mark the next node as the start of a new HLO computation (a node_splits entry)."""
        self.nodes[-1].is_root = True
        self.splits.append(len(self.nodes))

    # -- leaves
    def parameter(self, shape, dtype: str | None = None) -> int:
        self.n_params += 1
        return self.add(op.PARAMETER, shape, dtype=dtype, parameter_number=self.n_params - 1)

    def constant(self, shape=(), dtype: str | None = None) -> int:
        return self.add(op.CONSTANT, shape, dtype=dtype)

    def broadcast(self, x: int, shape, dims) -> int:
        return self.add(op.BROADCAST, shape, (x,), dtype=self.nodes[x].dtype, dimensions=tuple(dims))

    def scalar_like(self, x: int) -> int:
        """A broadcast constant with x's shape (bias-free scalars: epsilon, 0 for relu, scales)."""
        return self.broadcast(self.constant(dtype=self.nodes[x].dtype), self.shape(x), ())

    # -- elementwise
    def unary(self, opcode: int, x: int, dtype: str | None = None) -> int:
        return self.add(opcode, self.shape(x), (x,), dtype=dtype or self.nodes[x].dtype)

    def binary(self, opcode: int, a: int, b: int) -> int:
        if self.shape(a) != self.shape(b):
            raise ValueError(f"elementwise {opcode} needs equal shapes, got {self.shape(a)} and {self.shape(b)}")
        return self.add(opcode, self.shape(a), (a, b), dtype=self.nodes[a].dtype)

    # -- data movement
    def reshape(self, x: int, shape) -> int:
        if prod(shape) != prod(self.shape(x)):
            raise ValueError(f"reshape {self.shape(x)} -> {tuple(shape)} changes the element count")
        return self.add(op.RESHAPE, shape, (x,), dtype=self.nodes[x].dtype)

    def transpose(self, x: int, perm) -> int:
        shape = [self.shape(x)[p] for p in perm]
        return self.add(op.TRANSPOSE, shape, (x,), dtype=self.nodes[x].dtype, dimensions=tuple(perm))

    def reduce(self, x: int, dims) -> int:
        init = self.constant(dtype=self.nodes[x].dtype)
        shape = [d for i, d in enumerate(self.shape(x)) if i not in dims]
        return self.add(op.REDUCE, shape, (x, init), dtype=self.nodes[x].dtype, dimensions=tuple(sorted(dims)))

    def concatenate(self, xs, dim: int) -> int:
        shape = list(self.shape(xs[0]))
        shape[dim] = sum(self.shape(x)[dim] for x in xs)
        return self.add(op.CONCATENATE, shape, tuple(xs), dtype=self.nodes[xs[0]].dtype, dimensions=(dim,))

    def slice(self, x: int, start, limit) -> int:
        stride = (1,) * len(start)
        shape = [hi - lo for lo, hi in zip(start, limit)]
        return self.add(op.SLICE, shape, (x,), dtype=self.nodes[x].dtype,
                        slice=(tuple(start), stride, tuple(limit)))

    def pad(self, x: int, low, high) -> int:
        shape = [d + lo + hi for d, lo, hi in zip(self.shape(x), low, high)]
        return self.add(op.PAD, shape, (x, self.constant(dtype=self.nodes[x].dtype)), dtype=self.nodes[x].dtype,
                        padding=(tuple(low), tuple(high)))

    # -- compute
    def conv(self, x: int, kernel: int, out_shape, window: Window, dims: ConvDims) -> int:
        return self.add(op.CONVOLUTION, out_shape, (x, kernel), dtype=self.nodes[x].dtype, window=window,
                        conv=dims, feature_group_count=1, batch_group_count=1)

    def dot(self, a: int, b: int, lhs_contracting: int, rhs_contracting: int, n_batch: int = 0) -> int:
        sa, sb = self.shape(a), self.shape(b)
        if sa[lhs_contracting] != sb[rhs_contracting] or sa[:n_batch] != sb[:n_batch]:
            raise ValueError(f"dot {sa} x {sb}: contracting/batch dimensions differ")
        free_a = [d for i, d in enumerate(sa) if i >= n_batch and i != lhs_contracting]
        free_b = [d for i, d in enumerate(sb) if i >= n_batch and i != rhs_contracting]
        return self.add(op.DOT, list(sa[:n_batch]) + free_a + free_b, (a, b), dtype=self.nodes[a].dtype,
                        dot=DotDims(lhs_contracting, rhs_contracting, n_batch))

    def reduce_window(self, x: int, out_shape, window: Window) -> int:
        init = self.constant(dtype=self.nodes[x].dtype)
        return self.add(op.REDUCE_WINDOW, out_shape, (x, init), dtype=self.nodes[x].dtype, window=window)

    def gather(self, table: int, indices: int, shape) -> int:
        return self.add(op.GATHER, shape, (table, indices), dtype=self.nodes[table].dtype)

    def finish(self, outputs) -> HloGraph:
        """Close the entry computation with a tuple of `outputs` as its root."""
        shapes = [self.shape(o) for o in outputs]
        root = self.add(op.TUPLE, (), tuple(outputs), dtype="tuple", tuple_size=len(shapes))
        self.nodes[root].is_root = True
        return HloGraph(self.nodes, self.splits)
