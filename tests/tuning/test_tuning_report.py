"""The tool's report: the changes worth most on the pick's own scale, and the blocks kept for want of evidence."""
from __future__ import annotations

import numpy as np
import pytest
from tuning_hlo import DOT_RESHAPE, space_of

from pipeline.tuning.report import changes, frozen_beside, log_gains, summary_lines, unmeasured


def test_worth_is_measured_on_the_scale_of_the_reported_prediction():
    space = space_of(DOT_RESHAPE)                                  # dot.3, reshape.5; rank 2 blocks, choice 1 = (0, 1)
    pick = np.array([[1, 0, 0], [1, 1, 0]], dtype=np.int16)        # 3 blocks changed
    saves = {(0, 0): 0.3, (1, 0): 0.2, (1, 1): 0.1}                # raw prediction: -sum of what each block saves

    def scorer(feat):
        cand = space.decode(feat)
        return -np.array([sum(v for (k, b), v in saves.items() if c[k, b]) for c in cand])

    half = lambda score, changed: 0.5 * score                    # noqa: E731  a shrinkage of 0.5 at every distance
    reported = half(-0.6, 3)                                       # the pick as the tool reports it: -0.3
    rows = changes(space, pick, scorer, reported, 2, 8, half)
    assert [(r["instruction"], r["block"]) for r in rows] == [("dot.3", "output"), ("reshape.5", "output")]
    assert [r["worth"] for r in rows] == [pytest.approx(0.15), pytest.approx(0.1)]   # halved savings, top 2
    assert rows[0]["default"] == [1, 0] and rows[0]["chosen"] == [0, 1]
    raw = changes(space, pick, scorer, -0.6, 3, 8)                 # without a calibration: the scorer's own scale
    assert [r["worth"] for r in raw] == [pytest.approx(0.3), pytest.approx(0.2), pytest.approx(0.1)]
    assert changes(space, space.default()[0], scorer, 0.0, 3, 8) == []


def test_unmeasured_lists_the_frozen_blocks_by_kind():
    space = space_of(DOT_RESHAPE)
    assert unmeasured(space) == []
    narrow = space.only_kinds([space.kinds[1][0], space.kinds[1][1]])       # the reshape's kinds: the dot frozen
    assert unmeasured(narrow) == [{"opcode": "dot", "block": "output", "rank": 2, "blocks": 1},
                                  {"opcode": "dot", "block": "input", "rank": 2, "blocks": 1}]
    assert frozen_beside(narrow) == 0
    wide = narrow.freeze_beside(2)                                          # the reshape, 2 edges away via tanh.4
    assert unmeasured(wide) == unmeasured(narrow) and frozen_beside(wide) == 2
    lines = summary_lines({"predicted_runtime_ratio": 1.0, "program": "p", "model": "gnn", "collection": "c",
                           "evaluations": 1, "seconds": 0.0, "guarded": True, "unmeasured_blocks": unmeasured(wide),
                           "frozen_beside_unmeasured": frozen_beside(wide), "changes": [], "tiles": []})
    assert lines[-1] == "  kept at the default beside those: 2 blocks of measured kinds"
    assert not [line for line in lines if "extrapolates" in line]
    noted = summary_lines({"predicted_runtime_ratio": 0.25, "program": "p", "model": "gnn", "collection": "c",
                           "evaluations": 9, "seconds": 0.0, "guarded": False, "beyond_max_gain": 7, "changes": [],
                           "tiles": []})
    assert noted[1].startswith("  note: 7 candidates were predicted faster than any valid configuration truly was")
    assert not [line for line in noted if "prunes to" in line]
    small = summary_lines({"predicted_runtime_ratio": 1.0, "program": "p", "model": "gnn", "collection": "c",
                           "evaluations": 9, "seconds": 0.0, "guarded": True, "changes": [], "tiles": [],
                           "pruned_nodes": 4, "margin_scale": 4.0, "guard": {"min_nodes": 86}})
    assert small[1] == ("  note: the program prunes to 4 nodes, fewer than any valid graph the guard measured (86): "
                        "its margins are 4 times theirs (autotune.guard.small_program_scale)")


def test_log_gains_sum_the_log_gains_so_a_tiny_oracle_gain_does_not_dominate():
    rows = [{"t_default_ns": 100.0, "t_pick_ns": 50.0, "t_oracle_ns": 25.0, "t_other_ns": 100.0},
            {"t_default_ns": 10.0, "t_pick_ns": 10.5, "t_oracle_ns": 9.8, "t_other_ns": 9.8}]   # share -2.5 there
    out = log_gains(rows, {"pick": "t_pick_ns", "other": "t_other_ns"})
    oracle_gain = np.log(4.0) + np.log(10.0 / 9.8)
    assert out["log_share"]["pick"] == pytest.approx((np.log(2.0) - np.log(1.05)) / oracle_gain)   # 0.4581
    assert out["log_share"]["other"] == pytest.approx(np.log(10.0 / 9.8) / oracle_gain)
    assert out["geomean_ratio"] == {"pick": pytest.approx(np.sqrt(0.5 * 1.05)), "other": pytest.approx(np.sqrt(0.98)),
                                    "oracle": pytest.approx(np.sqrt(0.25 * 0.98))}
    nothing = [{"t_default_ns": 10.0, "t_pick_ns": 10.0, "t_oracle_ns": 10.0}]      # the oracle gains nothing
    assert log_gains(nothing)["log_share"] == {"pick": None}
    assert log_gains([]) == {"log_share": {"pick": None}, "geomean_ratio": {"pick": None, "oracle": None}}


def test_tile_aggregate_sets_the_default_the_pick_and_the_timed_candidates_against_the_oracle():
    from pipeline.tuning.report import aggregate_tiles

    rows = [{"t_default_ns": 10.0, "t_pick_ns": 10.0, "t_oracle_ns": 8.0, "t_candidates_ns": 8.0, "share": 0.0,
             "guard_kept_pick": False},
            {"t_default_ns": 4.0, "t_pick_ns": 4.0, "t_oracle_ns": 4.0, "t_candidates_ns": 4.0, "share": None,
             "guard_kept_pick": False}]
    out = aggregate_tiles(rows)
    assert out["vs_oracle"]["default"] == {"geomean": pytest.approx(1.25 ** 0.5), "worst": 1.25}
    assert out["vs_oracle"]["pick"] == out["vs_oracle"]["default"]
    assert out["vs_oracle"]["timed_candidates"] == {"geomean": 1.0, "worst": 1.0}
    assert out["guarded"] == 2 and out["small_gain_kernels"] == 1
    assert aggregate_tiles([])["vs_oracle"]["default"] == {"geomean": None, "worst": None}


def test_the_printout_points_at_the_tile_candidates_to_time():
    tile = {"fusion": "f", "tile": [8, 128], "predicted_ratio": 1.0, "default_tile": [8, 128]}
    base = {"predicted_runtime_ratio": 1.0, "program": "p", "model": "gnn", "collection": "c", "evaluations": 0,
            "seconds": 0.0, "guarded": True, "changes": []}
    listed = summary_lines({**base, "tiles": [{**tile, "candidates": [{"tile": [8, 128]}, {"tile": [16, 128]}]}]})
    assert listed[-1] == ("  tile f: [8, 128] (predicted ratio 1.0000 vs default [8, 128]); 2 candidates to time in "
                          "the JSON")
    assert summary_lines({**base, "tiles": [{**tile, "candidates": []}]})[-1].endswith("vs default [8, 128])")
