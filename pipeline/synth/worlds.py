"""Cost constants drawn per program: train and valid graphs timed by a spread of layout cost models.

The held-out judge times configurations with a cost model the project never saw. Models trained on one set of
constants learn that world's prices (how much a transpose copy, padded traffic or an off-minor feature dimension
costs); drawn per program, the constants make the train and valid graphs disagree wherever worlds disagree, so the
models rank by what holds across worlds and the autotune guard, whose margins come from the valid split, widens
where the worlds' prices differ (`synthesize.world`, docs/decisions.md).

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
from pipeline.settings_types import SettingsError
from pipeline.tpugraphs.dataset import SPLITS

SCALED = tuple(f.name for f in dataclasses.fields(LayoutCostParams) if f.type in ("float", float))


@dataclass(frozen=True)
class WorldSpread:
    """`synthesize.world`: which splits draw their own constants, and how far from the base."""

    splits: tuple[str, ...] = ()
    spread: Mapping[str, float] = field(default_factory=dict)   # constant -> largest factor (>= 1)
    placement_power: tuple[float, float] = (1.0, 1.0)


def world_spread(section: Mapping | None) -> WorldSpread:
    """The `synthesize.world` section, checked: a SettingsError (one line) names the key and what was expected."""
    if not section:
        return WorldSpread()
    unknown = sorted(set(section) - {"splits", "spread", "placement_power"})
    if unknown:
        raise SettingsError(f"synthesize.world.{unknown[0]}", section[unknown[0]],
                            "no such key (splits, spread, placement_power)")
    splits = tuple(section.get("splits") or ())
    for split in splits:
        if split not in SPLITS:
            raise SettingsError("synthesize.world.splits", list(splits), f"a list of {', '.join(SPLITS)}")
    spread = {}
    for key, factor in dict(section.get("spread") or {}).items():
        if key not in SCALED:
            raise SettingsError(f"synthesize.world.spread.{key}", factor,
                                f"a scalar constant of synthesize.layout_cost ({', '.join(SCALED)})")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor >= 1.0:
            raise SettingsError(f"synthesize.world.spread.{key}", factor, "a factor >= 1")
        spread[str(key)] = float(factor)
    power = list(section.get("placement_power") or (1.0, 1.0))
    if (len(power) != 2 or not all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in power)
            or not 0.0 < power[0] <= power[1]):
        raise SettingsError("synthesize.world.placement_power", power, "[low, high] with 0 < low <= high")
    return WorldSpread(tuple(str(s) for s in splits), spread, (float(power[0]), float(power[1])))


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
