"""pipeline.settings.prune: conf/prune read once per collection, `prune.hops` and `prune.normalize.min_std` by search,
a pruned run's saved params."""
from __future__ import annotations

from pipeline.config import compose, prune_hops
from pipeline.settings.prune import prune_settings
from pipeline.tpugraphs.dataset import Collection

LAYOUT = Collection.parse("layout-xla-default")


def test_hops_by_search_resolve_per_collection():
    cfg = compose(["data=programs_ci", "prune.hops={random: all, default: 2}"])
    assert prune_settings(cfg, Collection.parse("layout-xla-random")).hops is None
    assert prune_settings(cfg, Collection.parse("layout-nlp-default")).hops == 2
    assert prune_settings(cfg, Collection.parse("tile-xla")).hops is None       # tile graphs: always whole
    assert prune_settings(compose(["data=programs_ci", "prune.hops=3"]), LAYOUT).hops == 3
    assert prune_hops("all", LAYOUT) is None and prune_hops(0, LAYOUT) == 0


def test_every_key_is_read_and_saved_params_win():
    cfg = compose(["data=programs_ci", "prune.hops=3", "prune.pad_value=-2", "prune.dedup=mean", "prune.workers=2",
                   "prune.chunk_size=7", "prune.skip_invalid_train=false", "prune.normalize.drop_constant=false"])
    params = prune_settings(cfg, LAYOUT)
    assert (params.hops, params.pad_value, params.dedup, params.workers, params.chunk_size) == (3, -2.0, "mean", 2, 7)
    assert not params.skip_invalid_train and not params.drop_constant
    assert params.log_columns == tuple(cfg.prune.normalize.log_columns)
    saved = prune_settings(cfg, LAYOUT, {"hops": "all", "pad_value": 0.5, "dedup": "min"})    # report.json's params
    assert (saved.hops, saved.pad_value, saved.dedup, saved.workers) == (None, 0.5, "min", 2)


def test_min_std_by_search_resolves_per_collection():
    cfg = compose(["data=programs_ci", "prune.normalize.min_std={tile: 0.5, random: 2.0, default: 0}"])
    assert prune_settings(cfg, Collection.parse("tile-xla")).min_std == 0.5
    assert prune_settings(cfg, Collection.parse("layout-nlp-random")).min_std == 2.0
    assert prune_settings(cfg, Collection.parse("layout-xla-default")).min_std == 0.0
    assert prune_settings(compose(["data=programs_ci", "prune.normalize.min_std=3"]), LAYOUT).min_std == 3.0
