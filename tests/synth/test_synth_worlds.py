"""`synthesize.world`: cost constants drawn per program of the spread splits, checked settings, the same graphs."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pipeline.choices import WORLD_SPREAD_CONSTANTS
from pipeline.config import compose
from pipeline.costmodel.layout import LayoutCostParams
from pipeline.settings.programs import program_settings
from pipeline.settings.sections import layout_cost
from pipeline.settings_types import SettingsError
from pipeline.synth.programs import build
from pipeline.synth.worlds import WorldSpread, graph_world, world_spread
from pipeline.tpugraphs.schema import NPZ_SUBDIR


@pytest.fixture(scope="module")
def base():
    return layout_cost(compose([], with_selection=False).synthesize.layout_cost)


def test_the_default_conf_spreads_nothing(base):
    world = world_spread(compose([], with_selection=False).synthesize.world)
    assert world.splits == () and set(world.spread.values()) == {1.0} and world.placement_power == (1.0, 1.0)
    assert graph_world(base, dataclasses.replace(world, splits=("train",)), "train", np.random.default_rng(0)) == base
    assert graph_world(base, world, "train", np.random.default_rng(0)) is base


def test_a_spread_split_draws_within_its_bounds_and_others_keep_the_base(base):
    world = WorldSpread(("train",), {"bytes_per_ns": 2.0, "copy_overhead_ns": 1.0}, (2.0, 2.0))
    drawn = [graph_world(base, world, "train", np.random.default_rng(seed)) for seed in range(50)]
    bandwidths = np.array([w.bytes_per_ns for w in drawn])
    assert np.all((bandwidths >= base.bytes_per_ns / 2) & (bandwidths <= base.bytes_per_ns * 2))
    assert bandwidths.min() < base.bytes_per_ns * 0.8 and bandwidths.max() > base.bytes_per_ns * 1.25
    first = drawn[0]
    assert first.copy_overhead_ns == base.copy_overhead_ns          # a factor of 1 is no spread
    # power 2 squares each placement factor: [1.0, 0.55, 0.3] -> [1.0, 0.3025, 0.09]
    assert first.placement == pytest.approx(tuple(p * p for p in base.placement))
    assert dataclasses.replace(first, bytes_per_ns=base.bytes_per_ns, placement=base.placement) == base
    assert graph_world(base, world, "test", np.random.default_rng(0)) is base
    assert graph_world(base, world, "train", np.random.default_rng(7)) == graph_world(
        base, world, "train", np.random.default_rng(7))


@pytest.mark.parametrize("override, key", [
    ("synthesize.world.spread.bytes_per_ns=0.5", "synthesize.world.spread.bytes_per_ns"),
    ("synthesize.world.spread.bytes_per_ns=two", "synthesize.world.spread.bytes_per_ns"),
    ("synthesize.world.placement_power=[1.5,0.5]", "synthesize.world.placement_power"),
    ("synthesize.world.placement_power=[0.0,1.0]", "synthesize.world.placement_power[0]"),
    ("synthesize.world.placement_power=[1.0]", "synthesize.world.placement_power"),
    ("synthesize.world.splits=[training]", "synthesize.world.splits[0]"),
])
def test_a_bad_world_names_its_key_in_one_line(override, key):
    with pytest.raises(SettingsError) as error:
        compose([override], with_selection=False)
    assert str(error.value).startswith(f"setting {key}=") and "\n" not in str(error.value)


@pytest.mark.parametrize("override", ["synthesize.world.spread.bandwidth=2.0", "synthesize.world.spread.tile=2.0",
                                      "synthesize.world.splitz=[train]"])
def test_a_key_the_world_does_not_have_is_refused(override):
    with pytest.raises(SettingsError, match=r"^setting synthesize\.world\."):
        compose([override], with_selection=False)


def test_the_spread_names_every_scalar_constant_of_the_layout_cost_model():
    scalars = {f.name for f in dataclasses.fields(LayoutCostParams) if f.type == "float"}
    assert set(WORLD_SPREAD_CONSTANTS) == scalars and "tile" not in scalars and "placement" not in scalars


@pytest.mark.slow
def test_spread_train_graphs_keep_their_configs_and_change_their_runtimes(tmp_path):
    cfg = compose(["data=programs_ci"], with_selection=False)
    s = program_settings(cfg.data.generator, cfg.synthesize)
    s = dataclasses.replace(s, programs={"xla": {"train": 1, "test": 1}}, tile_programs={})
    spread = dataclasses.replace(s, world=WorldSpread(("train",), {"bytes_per_ns": 3.0, "flops_per_ns": 3.0},
                                                      (0.5, 2.0)))
    collections = ["layout:xla:random"]
    build(s, collections, tmp_path / "base", progress=False)
    build(spread, collections, tmp_path / "spread", progress=False)
    files = sorted((tmp_path / "base" / NPZ_SUBDIR).rglob("*.npz"))
    assert {f.parent.name for f in files} == {"train", "test"}
    for path in files:
        a, b = np.load(path), np.load(tmp_path / "spread" / path.relative_to(tmp_path / "base"))
        for key in ("node_feat", "node_config_feat", "edge_index", "node_config_ids"):
            np.testing.assert_array_equal(a[key], b[key])
        same = np.array_equal(a["config_runtime"], b["config_runtime"])
        assert same == (path.parent.name == "test"), path
