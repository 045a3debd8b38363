"""Stage autotune's tile verification: every built-in test kernel's tile pick timed by the tile cost model.

The kernels are exactly the dataset's tile test kernels (`pipeline.synth.programs.kept_kernels` of the test
programs of `tiled_programs`: the same draws, and the same kernels skipped for too few tilings).
Per kernel, every valid tile size (`pipeline.tuning.tiles`, at most `autotune.tile.max_configs`) is scored by the
stage's model of the tile collection and guarded by its margin; the noise-free tile cost model
(`pipeline.costmodel.tile`) times the compiler default, the pick and the oracle (the best of the same tile sizes by
the cost model). Rows: fusion, t_default_ns, t_pick_ns, t_oracle_ns, share of the oracle's gain, predicted and
verified ratio, whether the guard kept the pick, and t_candidates_ns: the best of the model's listed candidates
and the default (`autotune.tile.candidates`), what timing them on the hardware would keep.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.costmodel.tile import TileCostParams, tile_runtime_ns
from pipeline.featurizer.tile_configs import TileSearch
from pipeline.hlo.kernel import TileKernel
from pipeline.seeds import graph_rng
from pipeline.settings.sections import tile_search
from pipeline.tpugraphs.dataset import Collection
from pipeline.tuning.report import aggregate_tiles, share_of_gain
from pipeline.tuning.scorers import Guide, guide_of
from pipeline.tuning.tiles import TilePick, pick_tile


def test_kernels(cfg: DictConfig, tiled: list | None = None) -> list:
    """The dataset's tile test kernels (TilePrograms) of the test programs `tiled` (default: every built-in test
    program compiled for tile kernels, `tiled_programs`), in generation order."""
    from pipeline.settings.programs import program_settings
    from pipeline.synth.programs import kept_kernels, tiled_programs

    s = program_settings(cfg.data.generator, cfg.synthesize)
    if tiled is None:
        tiled = [p for p in tiled_programs(s) if p.split == "test"]
    return [kernel for program in tiled for kernel, _, _ in kept_kernels(s, program)]


def tile_row(name: str, kernel: TileKernel, found: TilePick, cost: TileCostParams) -> dict:
    """The cost model's verdict on one kernel's scored tile sizes: default, pick, oracle (the best of the rows)."""
    truth = tile_runtime_ns(kernel, found.rows, cost)                                     # [C]
    t_default, t_pick, t_oracle = float(truth[0]), float(truth[found.pick]), float(truth.min())
    timed = [0, *(row for row, _ in found.ranked)]                                        # the default and the list
    return {"fusion": name, "tile_sizes": int(len(found.rows)), "t_default_ns": t_default, "t_pick_ns": t_pick,
            "t_oracle_ns": t_oracle, "candidates": len(found.ranked), "t_candidates_ns": float(truth[timed].min()),
            "share": share_of_gain(t_default, t_pick, t_oracle),
            "oracle_gain": 1.0 - t_oracle / t_default, "guard_kept_pick": found.kept,
            "predicted_ratio": float(np.exp(found.score)) if found.kept else 1.0,
            "verified_ratio": t_pick / t_default,
            "unguarded": {"predicted_ratio": float(np.exp(found.score)),
                          "verified_ratio": float(truth[found.best]) / t_default}}


def verify_kernel(cfg: DictConfig, kernel, guide: Guide, s, search: TileSearch, work_dir: Path) -> dict:
    """One tile row (see the module docstring); `search`: the dataset's tile sizes and tile cost model."""
    found = pick_tile(cfg, kernel, guide, search, int(cfg.autotune.tile.max_configs), s.search.batch, work_dir,
                      graph_rng(s.seed, "autotune-tile", kernel.name), int(cfg.autotune.tile.candidates))
    return {**tile_row(kernel.name, kernel.kernel, found, search.cost), "collection": guide.collection.name,
            "model": guide.model, "margin": guide.rule.margin}


def verify_tiles(cfg: DictConfig, s, measured: dict, work_dir: Path, progress: bool = True) -> dict:
    """{collection name: {"all": aggregate, "kernels": rows}} of every tile collection, over the built-in test
    kernels (empty for a dataset without built-in programs)."""
    from pipeline.tuning.verify import builtin_test_programs

    tile_collections = [c for c in (Collection.parse(x) for x in cfg.data.collections) if c.kind == "tile"]
    zoo = builtin_test_programs(cfg)
    if not tile_collections or not zoo:
        return {}
    kernels = test_kernels(cfg)
    search = tile_search(cfg.synthesize.tile_search.min_tile, cfg.synthesize.tile_cost)
    out = {}
    for c in tile_collections:
        guide = guide_of(measured[c.slug][0], s.model, c, measured[c.slug][1])
        rows = [verify_kernel(cfg, k, guide, s, search, work_dir)
                for k in tqdm(kernels, desc=f"autotune {c.slug}", unit="kernel", disable=not progress)]
        out[c.name] = {"all": aggregate_tiles(rows), "kernels": rows}
    return out
