"""The guard's sibling evidence: which collections' valid graphs also measure a collection's margin."""
from __future__ import annotations

from omegaconf import OmegaConf

from pipeline.tpugraphs.dataset import Collection
from pipeline.tuning.evidence import siblings


def test_siblings_are_the_other_layout_collections_of_the_same_source():
    cfg = OmegaConf.create({"data": {"collections": ["tile-xla", "layout-xla-random", "layout-xla-default",
                                                     "layout-nlp-random"]}})
    names = lambda c: [s.name for s in siblings(cfg, Collection.parse(c))]
    assert names("layout-xla-random") == ["layout:xla:default"]
    assert names("layout:xla:default") == ["layout:xla:random"]
    assert names("layout-nlp-random") == []                # its sibling was not trained (not in data.collections)
    assert names("tile-xla") == []                         # tile has no distance: no sibling evidence
