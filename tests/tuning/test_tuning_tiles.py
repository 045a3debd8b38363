"""Every valid tile size of a fused kernel: the compiler default first, each size once."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from pipeline.config import load_cfg
from pipeline.costmodel.tile import OUTPUT_BOUNDS, TileKernel
from pipeline.featurizer.tile_configs import TileSearch, default_config
from pipeline.settings.sections import tile_search
from pipeline.tuning.tiles import tile_candidates


def search() -> TileSearch:
    cfg = load_cfg([])
    return tile_search(cfg.featurize.tile_search.min_tile, cfg.featurize.tile_search.cost)


def test_every_valid_tile_size_once_default_first():
    kernel = TileKernel("dot", (256, 512), 2, contract=256)
    rows = tile_candidates(SimpleNamespace(kernel=kernel), search(), 4096, np.random.default_rng(0))
    assert np.array_equal(rows[0], default_config(kernel, search().cost))
    tiles = {tuple(r[OUTPUT_BOUNDS:OUTPUT_BOUNDS + 2]) for r in rows}
    second, minor = search().min_tile
    expected = {(float(a), float(b)) for a in 2 ** np.arange(10) for b in 2 ** np.arange(10)
                if second <= a <= 256 and minor <= b <= 512}          # powers of two from the minimum tile
    assert len(rows) == len(tiles) and tiles == expected


def test_a_cap_draws_that_many_sizes_and_keeps_the_default():
    kernel = TileKernel("conv", (8, 64, 64, 256), 2, contract=256, window=(3, 3, 1))
    rows = tile_candidates(SimpleNamespace(kernel=kernel), search(), 50, np.random.default_rng(0))
    assert len(rows) <= 50 and len(np.unique(rows, axis=0)) == len(rows)
    assert np.array_equal(rows[0], default_config(kernel, search().cost))
