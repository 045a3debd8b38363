"""Cost constants drawn per program: train and valid graphs timed by a spread of layout cost models.

The held-out judge times configurations with a cost model the project never saw. Models trained on one set of
constants learn that world's prices (how much a transpose copy, padded traffic or an off-minor feature dimension
costs); drawn per program, the constants make the train and valid graphs disagree wherever worlds disagree, so the
models rank by what holds across worlds and the autotune guard, whose margins come from the valid split, widens
where the worlds' prices differ (`synthesize.world`). Measured, it does neither: off by default (docs/decisions.md,
"Cost constants drawn per program").

A program of a spread split draws, from its own generator (`graph_rng`, keyed apart from the configurations, so
the graphs and configurations are those of the unspread dataset):
- each constant named in `spread`, times a factor log-uniform in [1 / spread, spread];
- the matrix-unit placement factors raised to a power uniform in `placement_power` (1 is the base).
Programs of other splits keep the base constants (the test split is timed as stage autotune verifies it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from pipeline.costmodel.layout import LayoutCostParams


@dataclass(frozen=True)
class WorldSpread:
    """`synthesize.world`: which splits draw their own constants, and how far from the base."""

    splits: tuple[str, ...] = ()
    spread: Mapping[str, float] = field(default_factory=dict)   # constant -> largest factor (>= 1)
    placement_power: tuple[float, float] = (1.0, 1.0)


def world_spread(section: Mapping) -> WorldSpread:
    """The `synthesize.world` section (checked by pipeline/settings_schema.py) as a WorldSpread."""
    return WorldSpread(tuple(str(split) for split in section["splits"]),
                       {str(key): float(factor) for key, factor in section["spread"].items()},
                       (float(section["placement_power"][0]), float(section["placement_power"][1])))


def graph_world(base: LayoutCostParams, world: WorldSpread, split: str, rng: np.random.Generator) -> LayoutCostParams:
    """The constants that time one program of `split`: `base` itself outside `world.splits`, else a draw from
    `rng` (constants in sorted order, then the placement power; nothing is drawn outside the spread splits)."""
    if split not in world.splits:
        return base
    changes: dict = {}
    for key in sorted(world.spread):
        bound = float(np.log(world.spread[key]))
        changes[key] = float(getattr(base, key) * np.exp(rng.uniform(-bound, bound)))
    power = float(rng.uniform(*world.placement_power))
    changes["placement"] = tuple(float(p) ** power for p in base.placement)
    return dataclasses.replace(base, **changes)
