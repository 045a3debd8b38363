"""Stage autotune's pieces that need no model: which programs it verifies, the aggregate of its rows, and the
featurizer baseline's guarded pick."""
from __future__ import annotations

import numpy as np
import pytest
from tuning_hlo import DOT_RESHAPE, space_of

from pipeline.config import load_cfg
from pipeline.tuning.report import aggregate
from pipeline.tuning.search import Guard
from pipeline.tuning.verify import _best_guarded, builtin_test_programs


def test_builtin_test_programs_are_the_presets_test_split_and_none_for_real_data():
    programs = builtin_test_programs(load_cfg(["data=programs_ci"]))
    assert [(p.source, p.split) for p in programs] == [("xla", "test"), ("xla", "test"), ("nlp", "test")]
    assert builtin_test_programs(load_cfg(["data=tpugraphs"])) == []
    extra = builtin_test_programs(load_cfg(["data=programs_ci", "+data.generator.extra_programs={xla: {test: 1}}"]))
    assert extra[:3] == programs and [p.family for p in extra[3:]] in [["nchw_cnn"], ["vit"], ["temporal_cnn"]]


def row(program, share, kept=True, sample=0.0, random=0.0):
    return {"program": program, "share": share, "guard_kept_pick": kept, "share_featurizer_sample": sample,
            "share_random_search": random, "t_default_ns": 10.0, "t_oracle_ns": 5.0, "t_pick_ns": 10.0,
            "t_featurizer_sample_ns": 10.0, "t_random_search_ns": 5.0}


def test_aggregate_averages_defined_shares_and_lists_small_gains_apart():
    out = aggregate([row("a", 1.0, sample=0.5), row("b", 0.5, kept=False), row("c", None, kept=False, sample=None,
                                                                             random=None)])
    assert out["share"] == {"mean": 0.75, "std": 0.25, "n": 2}
    assert out["share_featurizer_sample"]["mean"] == 0.25 and out["min_share"] == 0.5
    assert out["small_gain_programs"] == ["c"] and out["guarded"] == 2 and "search_seconds" not in out
    assert out["log_share"] == {"pick": 0.0, "featurizer_sample": 0.0, "random_search": 1.0}   # every row counted
    assert out["geomean_ratio"] == pytest.approx({"pick": 1.0, "featurizer_sample": 1.0, "random_search": 0.5,
                                                  "oracle": 0.5})
    empty = aggregate([])                                    # data=tpugraphs: no built-in program
    assert empty["share"] == {"mean": None, "std": None, "n": 0} and empty["min_share"] is None


def test_the_featurizer_baseline_keeps_no_sample_that_changes_a_frozen_block():
    space = space_of(DOT_RESHAPE).only_kinds([space_of(DOT_RESHAPE).kinds[1][0]])   # only the reshape output searched
    dot_changed = np.array([[[1, 0, 0], [0, 0, 0]]], dtype=np.int16)                # [1, NC, 3]
    reshape_changed = np.array([[[0, 0, 0], [1, 0, 0]]], dtype=np.int16)
    rule = Guard(margin=0.1)
    assert _best_guarded(np.array([-1.0]), dot_changed, space, rule).tolist() == space.default()[0].tolist()
    both = np.concatenate([dot_changed, reshape_changed])
    assert _best_guarded(np.array([-1.0, -0.5]), both, space, rule).tolist() == reshape_changed[0].tolist()
    assert _best_guarded(np.array([-1.0, -0.05]), both, space, rule).tolist() == space.default()[0].tolist()


def test_no_builtin_program_starts_no_worker_pool(tmp_path, monkeypatch):
    import pipeline.tuning.verify as verify

    def no_pool(*args):
        raise AssertionError("a pool was started")

    monkeypatch.setattr(verify, "imap_pool", no_pool)
    real, preset = load_cfg(["data=tpugraphs"]), load_cfg(["data=programs_ci"])
    assert verify.verify_all(real, builtin_test_programs(real), {}, {}, tmp_path, 2, progress=False) == []
    with pytest.raises(AssertionError, match="a pool was started"):         # a preset with programs: the pool
        verify.verify_all(preset, builtin_test_programs(preset), {}, {}, tmp_path, 2, progress=False)


def test_the_pool_gets_the_largest_programs_first_and_the_rows_come_back_in_zoo_order(tmp_path, monkeypatch):
    """Stage autotune's pool took the programs in zoo order: the largest (the transformers) came last and ran alone
    while the other worker waited (19 of the stage's 61 s on the default preset)."""
    import pipeline.tuning.verify as verify

    submitted = []

    def fake_pool(task, jobs, workers):
        submitted.extend(jobs)
        for job in reversed(jobs):                                     # finished in any order
            yield job.zoo_program.name, [{"program": job.zoo_program.name}], [], 0.0

    monkeypatch.setattr(verify, "imap_pool", fake_pool)
    preset = load_cfg(["data=programs_ci"])
    zoo = builtin_test_programs(preset)
    done = verify.verify_all(preset, zoo, {}, {}, tmp_path, 2, progress=False)
    assert [name for name, *_ in done] == [p.name for p in zoo]
    sizes = [len(job.layout.config_node_ids) for job in submitted]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) > 1
    assert sorted(job.zoo_program.name for job in submitted) == sorted(p.name for p in zoo)
