"""Values the schema let through that a library then refused with a traceback (or silently misread): LightGBM's
limits (num_leaves <= 131072, its integer parameters and seed are C ints), seeds numpy or torch cannot take (a
negative featurize.seed: SeedSequence's ValueError; seed=1e23: torch.manual_seed's 'Overflow when unpacking long
long'), and a submit.name that is a path (`../../x` wrote the submission outside paths.submissions_dir)."""
from __future__ import annotations

import pytest

from pipeline.config import compose
from pipeline.settings_types import SettingsError


@pytest.mark.parametrize("override, key", [
    ("lgbm.num_leaves=200000", "lgbm.num_leaves"),
    ("lgbm.max_bin=99999999999", "lgbm.max_bin"),
    ("lgbm.eval_at=[99999999999]", "lgbm.eval_at[0]"),
    ("lgbm.tile.lambdarank_truncation_level=99999999999", "lgbm.tile.lambdarank_truncation_level"),
    ("seed=99999999999999999999999", "seed"),
    ("gnn.seeds=[2147483648]", "gnn.seeds[0]"),
    ("autotune.seed=2147483648", "autotune.seed"),
    ("featurize.seed=-1", "featurize.seed"),
    ("submit.name=../../evil", "submit.name"),
    ("submit.name=a/b", "submit.name"),
    ("submit.name=..", "submit.name"),
    ("gnn.hidden=1" + "0" * 400, "gnn.hidden"),                 # an integer numpy and torch cannot hold
    ("gnn.margin=1" + "0" * 400, "gnn.margin"),                 # a float setting: math.isfinite's OverflowError
    ("synthesize.workers=9223372036854775808", "synthesize.workers"),
])
def test_a_value_past_a_library_limit_is_refused(override, key):
    with pytest.raises(SettingsError) as error:
        compose([override], with_selection=False)
    assert error.value.key == key


@pytest.mark.parametrize("override", ["lgbm.num_leaves=131072", "seed=2147483647", "submit.name=my.sub-1",
                                      "featurize.seed=7", "synthesize.workers=9223372036854775807"])
def test_the_largest_values_the_libraries_take_still_load(override):
    compose([override], with_selection=False)


@pytest.mark.parametrize("override, key", [
    ("lgbm.tile.configs_per_graph=1", "lgbm.tile.configs_per_graph"),          # one row per query: nothing to rank
    ("lgbm.layout.valid_configs_per_graph=1", "lgbm.layout.valid_configs_per_graph"),
    ("featurize.collections=[layout-xla-random,layout:xla:random]", "featurize.collections"),   # the same one twice
    ("autotune.collection=tile-xla", "autotune.collection"),                  # written to params.yaml, refused later
    ("autotune.tile_collection=layout-xla-random", "autotune.tile_collection"),
])
def test_a_value_a_stage_cannot_use_is_refused_when_the_config_loads(override, key):
    with pytest.raises(SettingsError) as error:
        compose([override], with_selection=False)
    assert error.value.key == key


@pytest.mark.parametrize("override", ["lgbm.tile.configs_per_graph=0", "lgbm.tile.configs_per_graph=2",
                                      "autotune.collection=layout:nlp:default", "autotune.tile_collection=tile:xla",
                                      "featurize.collections=[layout-xla-random,layout:xla:default]"])
def test_the_values_they_use_still_load(override):
    compose([override], with_selection=False)
