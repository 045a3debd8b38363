"""The synthetic data's settings (pipeline/settings_synth.py): the `synthesize` constants and `data.generator` are
refused in one line when the config loads. They were checked for being mappings only, so `python -m pipeline.config`
wrote params.yaml with them and stage synthesize died with a TypeError traceback (`synthesize.layout_cost.
flops_per_ns=abc`, `synthesize.tile_search.min_tile=abc`), a ValueError one (`data.generator.seed=abc`), or built an
odd dataset without a word (`synthesize.search.swap_prob=2`, `data.generator.programs.xla.train=-1`)."""
from __future__ import annotations

import pytest

from pipeline.config import compose
from pipeline.settings_types import SettingsError


@pytest.mark.parametrize("overrides, key", [
    (["synthesize.layout_cost.flops_per_ns=abc"], "synthesize.layout_cost.flops_per_ns"),
    (["synthesize.layout_cost.flops_per_ns=0"], "synthesize.layout_cost.flops_per_ns"),
    (["synthesize.layout_cost.placement=[1,2]"], "synthesize.layout_cost.placement"),
    (["synthesize.tile_cost.vmem_bytes=-1"], "synthesize.tile_cost.vmem_bytes"),
    (["synthesize.search.swap_prob=2"], "synthesize.search.swap_prob"),
    (["synthesize.search.default_block_prob=[0.7,0.2]"], "synthesize.search.default_block_prob"),
    (["synthesize.tile_search.min_tile=abc"], "synthesize.tile_search.min_tile"),
    (["+synthesize.layout_cost.foo=1"], "synthesize.layout_cost.foo"),
    (["data.generator.seed=abc"], "data.generator.seed"),
    (["data.generator.programs.xla.train=-1"], "data.generator.programs.xla.train"),
    (["+data.generator.programs.xla.bogus=1"], "data.generator.programs.xla.bogus"),
    (["data.generator.max_config_nodes=0"], "data.generator.max_config_nodes"),
    (["data.generator.layout_configs=[1000,300]"], "data.generator.layout_configs"),
    (["data.generator.sizes.train.dtype=[f64]"], "data.generator.sizes.train.dtype[0]"),
    (["+data.generator.sizes.valid={batch:[1],width:[1],depth:[1],extent:[1],dtype:[f32]}"],
     "data.generator.sizes.valid"),
    (["+data.generator.foo=1"], "data.generator.foo"),
    (["data=synthetic_full", "data.generator.graphs.tile.train=-1"], "data.generator.graphs.tile.train"),
    (["data=synthetic_full", "data.generator.layout_nodes=[5,1]"], "data.generator.layout_nodes"),
    (["featurize.tile_search.min_tile=[8,0]"], "featurize.tile_search.min_tile[1]"),
])
def test_a_bad_synthetic_setting_is_refused_naming_its_key(overrides, key):
    with pytest.raises(SettingsError) as error:
        compose(overrides, with_selection=False)
    assert error.value.key == key


@pytest.mark.parametrize("overrides", [
    ["data=programs"], ["data=programs_ci"], ["data=programs_heldout"], ["data=programs_large"],
    ["data=synthetic_full"], ["data=tpugraphs"], ["data.generator.tile_sizes=null"], ["~data.generator.tile_sizes"],
    ["synthesize.layout_cost.tile=[8,8]"], ["data.generator.programs.xla.test=0"], ["synthesize.noise=0"],
])
def test_the_presets_and_unusual_valid_values_still_load(overrides):
    compose(overrides, with_selection=False)


def test_the_zoo_dtypes_are_the_schemas():
    from pipeline.choices import ZOO_DTYPES
    from pipeline.zoo.common import DTYPES
    assert tuple(DTYPES) == ZOO_DTYPES
