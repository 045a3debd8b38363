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


def test_a_report_json_edited_by_hand_is_refused_in_one_line(tmp_path):
    """Stage autotune's sibling evidence re-prunes with what prune ran with: a report.json without 'params' was a
    KeyError traceback, a pad_value 'x' a float() ValueError, and hops -3 pruned the siblings silently; each is now
    the one line predict and the tool give (trained.saved_prune_params)."""
    import json

    import pytest

    from pipeline.pruned import NORMALIZER_FILE, REPORT_FILE
    from pipeline.trained import PredictError
    from pipeline.tuning.evidence import sibling_valid_graphs

    folder = tmp_path / "layout-xla-random"
    folder.mkdir()
    (folder / NORMALIZER_FILE).write_text("{}")
    cfg = OmegaConf.create({"paths": {"pruned_dir": str(tmp_path)}, "data": {"collections": ["layout-xla-random"]},
                            "prune": {}})
    good = {"hops": 1, "pad_value": -1.0, "dedup": "min"}
    for params in (None, {**good, "pad_value": "x"}, {**good, "hops": -3}):
        (folder / REPORT_FILE).write_text(json.dumps({} if params is None else {"params": params}))
        with pytest.raises(PredictError, match=rf"^{folder / REPORT_FILE}: key 'params': expected what stage prune "
                                               r"ran with .*run stage prune for layout-xla-random again"):
            sibling_valid_graphs(cfg, Collection.parse("layout-xla-random"))
