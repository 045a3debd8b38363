"""Runtime of one fused TPU kernel under tile-size configurations (the `tile:xla` collection).

A config (24 features) sets `output_bounds` (the tile of the kernel's output, one size per output dimension),
`kernel_bounds` (convolutions: kh, kw, input-feature tile, output-feature tile) and `input_bounds` (0: inferred).
Model (constants in conf/synthesize/default.yaml, `tile_cost`):
- The output is cut into prod(ceil(d / t)) tiles; each tile's two most-minor dims are padded to (8, 128), so
  partial edge tiles and small minor tiles waste compute and bandwidth.
- Memory traffic: the output once, plus the inputs each tile needs: a dot re-reads its lhs once per column of
  tiles and its rhs once per row of tiles; a convolution re-reads its input (with a (k-1) halo per tile) once per
  output-feature tile and its weights once per spatial tile; elementwise and reduce kernels stream their inputs.
- Working set = 2 x (output tile + input tiles) bytes (double buffering); beyond `vmem_bytes` it spills, which
  multiplies memory time by 1 + spill_penalty * (excess fraction).
- Runtime = max(compute, memory) + per_tile_overhead * tiles * contraction passes + launch overhead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.hlo.kernel import TileKernel
from pipeline.tpugraphs.schema import CONFIG_FEAT_BLOCKS, CONFIG_FEAT_COLUMN, CONFIG_FEAT_DIM

KERNEL_BOUNDS, OUTPUT_BOUNDS, INPUT_BOUNDS = (CONFIG_FEAT_COLUMN[f"{block}_0"] for block in CONFIG_FEAT_BLOCKS)


@dataclass(frozen=True)
class TileCostParams:
    tile: tuple[int, int]
    flops_per_ns: float
    f32_slowdown: float
    bytes_per_ns: float
    per_tile_overhead_ns: float
    launch_overhead_ns: float
    vmem_bytes: float
    spill_penalty: float
    elementwise_flops: float
    vector_flops_per_ns: float


def _pad(x, multiple: int):
    return np.ceil(x / multiple) * multiple


def tile_terms(kernel: TileKernel, config_feat: np.ndarray, p: TileCostParams) -> dict[str, np.ndarray]:
    """Per config row of config_feat [C, 24]: compute_ns, traffic (bytes), working (bytes), tiles, passes."""
    feat = np.asarray(config_feat, dtype=np.float64)
    if feat.ndim != 2 or feat.shape[1] != CONFIG_FEAT_DIM:
        raise ValueError(f"config_feat: expected [C, {CONFIG_FEAT_DIM}], got {feat.shape}")
    dims = np.array(kernel.out_shape, dtype=np.float64)
    rank = len(dims)
    t = np.clip(feat[:, OUTPUT_BOUNDS:OUTPUT_BOUNDS + rank], 1, dims)          # [C, rank]
    counts = np.ceil(dims / t)                                                  # [C, rank] tiles per dim
    n_tiles = counts.prod(axis=1)
    second, minor = p.tile
    t_pad = t.copy()
    t_pad[:, -1] = _pad(t[:, -1], minor)
    if rank > 1:
        t_pad[:, -2] = _pad(t[:, -2], second)
    tile_elems = t_pad.prod(axis=1)
    computed = n_tiles * tile_elems                                             # output elements incl. waste
    isz = kernel.itemsize
    out_bytes = computed * isz
    passes = np.ones(len(feat))
    if kernel.kind == "dot":
        k = _pad(kernel.contract, minor)
        m, n = dims[-2], dims[-1]
        outer = dims[:-2].prod()
        flops = 2.0 * computed * k
        traffic = out_bytes + outer * m * k * isz * counts[:, -1] + outer * k * n * isz * counts[:, -2]
        working = (tile_elems + t_pad[:, -2] * k + k * t_pad[:, -1]) * isz * 2
    elif kernel.kind == "conv":
        kh, kw, stride = kernel.window
        cin = kernel.contract
        tci = np.clip(feat[:, KERNEL_BOUNDS + 2], 1, cin)
        passes = np.ceil(cin / tci)
        flops = 2.0 * computed * kh * kw * passes * _pad(tci, second)
        halo = ((t[:, 1] * stride + kh - 1) / (t[:, 1] * stride)) * ((t[:, 2] * stride + kw - 1) / (t[:, 2] * stride))
        in_bytes = dims[0] * dims[1] * dims[2] * stride * stride * cin * isz
        w_bytes = kh * kw * cin * dims[3] * isz
        traffic = out_bytes + in_bytes * halo * counts[:, 3] + w_bytes * counts[:, :3].prod(axis=1)
        in_tile = t[:, 0] * (t[:, 1] * stride + kh - 1) * (t[:, 2] * stride + kw - 1) * _pad(tci, minor)
        working = (tile_elems + in_tile + kh * kw * _pad(tci, second) * t_pad[:, 3]) * isz * 2
    else:
        reduce = kernel.contract if kernel.kind == "reduce" else 1
        flops = computed * reduce * kernel.n_ops * p.elementwise_flops
        traffic = out_bytes + computed * reduce * isz * kernel.n_inputs
        working = tile_elems * isz * (1 + kernel.n_inputs * min(reduce, minor)) * 2
    if kernel.kind in ("dot", "conv"):
        compute = flops / (p.flops_per_ns / (p.f32_slowdown if kernel.f32 else 1.0))
    else:
        compute = flops / p.vector_flops_per_ns
    return {"compute_ns": compute, "traffic": traffic, "working": working, "tiles": n_tiles, "passes": passes}


def tile_runtime_ns(kernel: TileKernel, config_feat: np.ndarray, p: TileCostParams) -> np.ndarray:
    """float64 [C]: noise-free runtime of each config row of config_feat [C, 24]."""
    terms = tile_terms(kernel, config_feat, p)
    spill = 1.0 + p.spill_penalty * np.maximum(0.0, terms["working"] / p.vmem_bytes - 1.0)
    memory = terms["traffic"] / p.bytes_per_ns * spill
    overhead = p.per_tile_overhead_ns * terms["tiles"] * terms["passes"]
    return np.maximum(terms["compute_ns"], memory) + overhead + p.launch_overhead_ns
