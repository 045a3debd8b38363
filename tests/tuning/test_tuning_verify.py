"""Stage autotune's pieces that need no model: which programs it verifies, and the aggregate of its rows."""
from __future__ import annotations

import pytest

from pipeline.config import load_cfg
from pipeline.tuning.report import aggregate
from pipeline.tuning.verify import builtin_test_programs


def test_builtin_test_programs_are_the_presets_test_split_and_none_for_real_data():
    programs = builtin_test_programs(load_cfg(["data=programs_ci"]))
    assert [(p.source, p.split) for p in programs] == [("xla", "test"), ("xla", "test"), ("nlp", "test")]
    assert builtin_test_programs(load_cfg(["data=tpugraphs"])) == []


def row(program, share, kept=True, sample=0.0, random=0.0):
    return {"program": program, "share": share, "guard_kept_pick": kept, "share_featurizer_sample": sample,
            "share_random_search": random}


def test_aggregate_averages_defined_shares_and_lists_small_gains_apart():
    out = aggregate([row("a", 1.0, sample=0.5), row("b", 0.5, kept=False), row("c", None, kept=False, sample=None,
                                                                             random=None)])
    assert out["share"] == {"mean": 0.75, "std": 0.25, "n": 2}
    assert out["share_featurizer_sample"]["mean"] == 0.25 and out["min_share"] == 0.5
    assert out["small_gain_programs"] == ["c"] and out["guarded"] == 2 and "search_seconds" not in out
    empty = aggregate([])                                    # data=tpugraphs: no built-in program
    assert empty["share"] == {"mean": None, "std": None, "n": 0} and empty["min_share"] is None
