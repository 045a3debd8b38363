"""The `tile:xla` collection: small fused-kernel graphs (tens of nodes) and their tile-size configurations.

Each tile graph is one fused computation from a benchmark (convolution + bias + activation, dot + bias + gelu,
elementwise chains, reductions). Configs are tile sizes sampled per output dimension (powers of two and the full
size), plus the compiler's default tile (the largest tile whose working set fits half the on-chip memory).
"""
from __future__ import annotations

from math import prod

import numpy as np

from pipeline.hlo import opcodes as op
from pipeline.hlo.graph import ITEMSIZE, NHWC, HloBuilder, HloGraph, Window
from pipeline.costmodel.tile import TileCostParams, TileKernel, tile_terms
from pipeline.tpugraphs.schema import CONFIG_FEAT_DIM

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


def _bounds(values) -> list[float]:
    """6 entries zero padded, sum, product (0 for an empty list, as the extractor writes tile bounds)."""
    values = [float(v) for v in values]
    return values + [0.0] * (6 - len(values)) + [float(sum(values)), float(prod(values)) if values else 0.0]


def encode_config(kernel: TileKernel, output_tile, input_channel_tile: int | None = None) -> np.ndarray:
    """float32 [24]: kernel_bounds, output_bounds, input_bounds (left 0: inferred by the compiler)."""
    kernel_bounds = []
    if kernel.kind == "conv":
        kh, kw, _ = kernel.window
        kernel_bounds = [kh, kw, input_channel_tile or kernel.contract, output_tile[-1]]
    row = _bounds(kernel_bounds) + _bounds(output_tile) + _bounds([])
    return np.array(row, dtype=np.float32)


def default_config(kernel: TileKernel, params: TileCostParams) -> np.ndarray:
    """float32 [24]: the compiler default: halve the most-major tile dims until the working set fits vmem / 2."""
    tile = list(kernel.out_shape)
    cin = min(kernel.contract, 256) if kernel.kind == "conv" else None
    order = list(range(len(tile) - 2)) + [len(tile) - 2, len(tile) - 1] if len(tile) > 1 else [0]
    for _ in range(64):
        row = encode_config(kernel, tile, cin)
        config = row.reshape(1, CONFIG_FEAT_DIM)   # [1, 24]
        if tile_terms(kernel, config, params)["working"][0] <= params.vmem_bytes / 2:
            return row
        dim = next((d for d in order if tile[d] > 1), None)
        if dim is None:
            return row
        tile[dim] = -(-tile[dim] // 2)
    return encode_config(kernel, tile, cin)


def tile_choices(size: int, smallest: int) -> list[int]:
    """Powers of two in [min(size, smallest), size], plus the full size."""
    lo = min(size, smallest)
    return sorted({size} | {2 ** i for i in range(int(np.log2(max(size, 1))) + 1) if 2 ** i >= lo})


def sample_tile_configs(kernel: TileKernel, n_configs: int, default_row: np.ndarray, default_share: float,
                        rng: np.random.Generator, min_tile: tuple[int, int]) -> np.ndarray:
    """float32 [C, 24]: per output dim a power of two or the full size (the two minor dims at least
    `min_tile`); convolutions also an input-feature tile. The default row replaces one row with `default_share`."""
    rank = len(kernel.out_shape)
    smallest = [1] * max(0, rank - 2) + list(min_tile)[-min(rank, 2):]
    choices = [tile_choices(int(d), s) for d, s in zip(kernel.out_shape, smallest)]
    cin_choices = tile_choices(kernel.contract, min_tile[0])
    rows = []
    for _ in range(n_configs):
        tile = [int(rng.choice(c)) for c in choices]
        cin = int(rng.choice(cin_choices)) if kernel.kind == "conv" else None
        rows.append(encode_config(kernel, tile, cin))
    feat = np.stack(rows).reshape(n_configs, CONFIG_FEAT_DIM)   # [C, 24]
    if rng.random() < default_share:
        feat[int(rng.integers(n_configs))] = default_row
    return feat
