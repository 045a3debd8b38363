"""Tile configurations (config_feat rows) of a fused kernel: the encoding of a tile, the compiler's default tile
(the largest whose working set, by the tile cost model, fits half the on-chip memory) and sampled candidates.

Shared by command featurize (`tile_configs` of a real program's kernels) and both dataset generators.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from pipeline.costmodel.tile import TileCostParams, tile_terms
from pipeline.hlo.featurize import TileProgram
from pipeline.hlo.kernel import TileKernel
from pipeline.tpugraphs.schema import CONFIG_FEAT_DIM, MAX_DIMS

TILE_OVERSAMPLE = 4            # tile rows drawn per wanted row before duplicates are dropped


@dataclass(frozen=True)
class TileSearch:
    """Tile-size sampling: smallest (second-minor, minor) tile, and the cost constants of the compiler default."""

    min_tile: tuple[int, int]
    cost: TileCostParams


def _bounds(values) -> list[float]:
    """6 entries zero padded, sum, product (0 for an empty list, as the extractor writes tile bounds)."""
    values = [float(v) for v in values]
    return values + [0.0] * (MAX_DIMS - len(values)) + [float(sum(values)), float(prod(values)) if values else 0.0]


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


def tile_configs(program: TileProgram, n_configs: int, search: TileSearch, rng: np.random.Generator) -> np.ndarray:
    """float32 [C, 24], C <= n_configs distinct rows: the compiler default plus sampled tile sizes, shuffled.

    C is smaller than n_configs only when the kernel has fewer distinct tilings.
    """
    default_row = default_config(program.kernel, search.cost)
    drawn = sample_tile_configs(program.kernel, n_configs * TILE_OVERSAMPLE, default_row, 0.0, rng, search.min_tile)
    rows = np.concatenate([default_row.reshape(1, CONFIG_FEAT_DIM), drawn])   # [1 + drawn, 24]
    _, first = np.unique(rows, axis=0, return_index=True)
    keep = np.sort(first)[:n_configs]
    return rows[keep][rng.permutation(len(keep))]
