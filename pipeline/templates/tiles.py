"""The `tile:xla` collection: small fused-kernel graphs (tens of nodes) and their tile-size configurations.

Each tile graph is one fused computation from a benchmark (convolution + bias + activation, dot + bias + gelu,
elementwise chains, reductions). Configs are tile sizes sampled per output dimension (powers of two and the full
size), plus the compiler's default tile (the largest tile whose working set fits half the on-chip memory).
"""
from __future__ import annotations

import numpy as np

from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import ITEMSIZE, NHWC, HloBuilder, HloGraph, Window
from pipeline.hlo.kernel import TileKernel

CONV_FAMILIES = ("resnet", "inception", "mobilenet", "unet", "efficientnet", "retinanet", "mask_rcnn")
NLP_FAMILIES = ("bert", "transformer", "t5", "albert", "gpt")
UNARY = (op.EXPONENTIAL, op.TANH, op.RSQRT, op.LOGISTIC, op.NEGATE, op.ABS, op.LOG, op.SQRT)
BINARY = (op.ADD, op.MULTIPLY, op.SUBTRACT, op.MAXIMUM, op.DIVIDE, op.MINIMUM)


def benchmark_name(rng: np.random.Generator, index: int) -> tuple[str, bool]:
    """(benchmark name, is conv family) for the index-th benchmark of a split."""
    conv = bool(rng.random() < 0.55)
    family = str(rng.choice(CONV_FAMILIES if conv else NLP_FAMILIES))
    mode = str(rng.choice(["train", "inference"]))
    return f"{family}_{mode}_batch_{int(rng.choice([8, 16, 32, 64, 128]))}_v{index}", conv


def _chain(b: HloBuilder, x: int, n_ops: int, rng: np.random.Generator) -> int:
    for _ in range(n_ops):
        if rng.random() < 0.5:
            x = b.unary(int(rng.choice(UNARY)), x)
        else:
            x = b.binary(int(rng.choice(BINARY)), x, b.scalar_like(x) if rng.random() < 0.5 else
                         b.parameter(b.shape(x)))
    return x


def tile_graph(rng: np.random.Generator, conv_family: bool) -> tuple[HloGraph, TileKernel]:
    """One fused kernel graph and its cost-model description."""
    kinds = ["conv", "elementwise", "reduce"] if conv_family else ["dot", "elementwise", "reduce"]
    kind = str(rng.choice(kinds, p=[0.5, 0.3, 0.2]))
    dtype = str(rng.choice(["bf16", "f32"], p=[0.7, 0.3]))
    b = HloBuilder(dtype)
    n_ops = int(rng.integers(2, 12))
    if kind == "conv":
        n, hw = int(rng.choice([8, 16, 32, 64])), int(rng.choice([7, 14, 28, 56, 112]))
        cin, cout = (int(rng.choice([3, 16, 32, 64, 128, 256, 512])) for _ in range(2))
        k, stride = int(rng.choice([1, 3, 5, 7], p=[0.35, 0.45, 0.1, 0.1])), int(rng.choice([1, 2], p=[0.8, 0.2]))
        x, w = b.parameter((n, hw * stride, hw * stride, cin)), b.parameter((k, k, cin, cout))
        pad = (k - 1) // 2
        y = b.conv(x, w, (n, hw, hw, cout), Window((k, k), (stride, stride), (pad, pad), (k - 1 - pad,) * 2), NHWC)
        y = b.binary(op.ADD, y, b.broadcast(b.parameter((cout,)), b.shape(y), (3,)))
        y = _chain(b, y, n_ops // 2, rng)
        kernel = TileKernel("conv", b.shape(y), ITEMSIZE[dtype], cin, (k, k, stride), f32=dtype == "f32")
    elif kind == "dot":
        m, kk, nn = (int(rng.choice([64, 128, 256, 512, 768, 1024, 2048, 4096])) for _ in range(3))
        batch = int(rng.choice([1, 1, 4, 12, 16]))
        lhs = b.parameter((batch, m, kk) if batch > 1 else (m, kk))
        rhs = b.parameter((batch, kk, nn) if batch > 1 else (kk, nn))
        y = b.dot(lhs, rhs, 2 if batch > 1 else 1, 1 if batch > 1 else 0, n_batch=1 if batch > 1 else 0)
        y = _chain(b, y, n_ops, rng)
        kernel = TileKernel("dot", b.shape(y), ITEMSIZE[dtype], kk, f32=dtype == "f32")
    else:
        rank = int(rng.integers(2, 5))
        shape = tuple(int(rng.choice([2, 8, 16, 32, 64, 128, 197, 256, 512, 768, 1024])) for _ in range(rank))
        x = b.parameter(shape)
        y = _chain(b, x, n_ops, rng)
        n_inputs = 1 + sum(1 for node in b.nodes[1:] if node.opcode == op.PARAMETER)
        if kind == "reduce":
            y = b.reduce(y, [rank - 1])
            y = b.binary(op.MULTIPLY, y, b.scalar_like(y))
        kernel = TileKernel(kind, b.shape(y), ITEMSIZE[dtype], shape[-1] if kind == "reduce" else 1,
                            n_inputs=n_inputs, n_ops=n_ops)
    return b.finish([y]), kernel
