"""The guard's margin and region from a tiny hand-made valid set, the rule, and the file the tool reads."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.trained import PredictError
from pipeline.tuning.guard import (ValidSample, changed_kinds, distance_evidence, distance_margins, distance_shrinkage,
                                   error_margin, guard_file, model_guard, move_errors, move_gains, moves_apart,
                                   pair_errors, read_guard, trust_region)
from pipeline.tuning.search import Guard, SearchResult, guard


def layout_rows() -> np.ndarray:
    """3 configs of 1 node: the compiler default, output set, output and input set."""
    feat = np.full((3, 1, 18), -1, dtype=np.int8)
    feat[1, 0, 0:2] = [0, 1]
    feat[2, 0, 0:2] = [1, 0]
    feat[2, 0, 6:8] = [0, 1]
    return feat


def test_layout_errors_are_against_the_config_nearest_the_default():
    # truth d = y - y[0] = [0.1, -0.2]; predicted dhat = p - p[0] = [-0.1, -0.5]; error e = d - dhat = [0.2, 0.3]
    errors, distances = pair_errors(layout_rows(), np.array([0.0, 0.1, -0.2]), np.array([0.0, -0.1, -0.5]))
    np.testing.assert_allclose(errors, [0.2, 0.3])
    assert distances.tolist() == [1, 2]
    assert error_margin(errors, 0.5) == pytest.approx(0.25) and error_margin(errors, 1.0) == pytest.approx(0.3)
    assert error_margin(-errors, 0.9) == 0.0 and error_margin(np.zeros(0), 0.9) == 0.0   # never below 0


def test_tile_errors_are_every_ordered_pair():
    # pair (0, 1): d = -0.6, dhat = -0.2 -> e = -0.4; pair (1, 0): e = +0.4
    errors, distances = pair_errors(np.zeros((2, 24), np.float32), np.array([-0.1, 0.5]), np.array([0.0, 0.2]))
    assert sorted(np.round(errors, 9).tolist()) == [-0.4, 0.4] and distances.tolist() == [-1, -1]


def test_model_guard_and_region_of_a_hand_made_valid_split():
    samples = [ValidSample(layout_rows(), np.array([0.0, 0.1, -0.2]), {"fake": np.array([0.0, -0.05, -0.25])})]
    entry = model_guard(samples, {"fake": 1.0}, {"fake": 2.0}, 1.0, 1)    # slope 2: predictions [0, -0.1, -0.5]
    assert entry["margin"] == pytest.approx(0.3) and entry["pairs"] == 2 and entry["weights"] == {"fake": 1.0}
    # moves (see below): distance 1: errors [-0.2, 0.2]; distance 2: [-0.3, -0.1, 0.3, 0.1]; quantile 1.0
    assert entry["margin_by_distance"] == {"upto": [1, 2], "margin": [pytest.approx(0.2), pytest.approx(0.3)]}
    smaller = ValidSample(layout_rows(), np.array([0.0, 0.1, -0.2]), {}, nodes=7)
    larger = ValidSample(layout_rows(), np.array([0.0, 0.1, -0.2]), {}, nodes=30)
    assert trust_region([larger, smaller]) == {"max_changed": 2, "max_gain": pytest.approx(0.2), "min_nodes": 7}
    tile = [ValidSample(np.zeros((2, 24), np.float32), np.array([-0.1, 0.5]), {"fake": np.zeros(2)}, nodes=3)]
    assert trust_region(tile) == {"max_changed": None, "max_gain": pytest.approx(0.1),   # over the default
                                  "min_nodes": None}


def test_the_kinds_of_blocks_a_valid_sample_changed():
    feat = np.full((3, 2, 18), -1, dtype=np.int8)                  # 3 configs, 2 nodes
    feat[:, 0, 6:9] = [2, 0, 1]                                    # node 0 input: set, but the same in every row
    feat[1, 0, 0:3] = [0, 1, 2]                                    # node 0 output: varies (rank 3)
    feat[2, 1, 12:16] = [3, 2, 1, 0]                               # node 1 kernel: varies (rank 4)
    assert changed_kinds(np.array([26, 24]), feat) == {(26, 0, 3), (24, 2, 4)}
    assert changed_kinds(np.array([26, 24]), feat[:1]) == frozenset()          # one row changes nothing
    samples = [ValidSample(feat, np.zeros(3), {}, changed_kinds(np.array([26, 24]), feat)),
               ValidSample(layout_rows(), np.array([0.0, 0.1, -0.2]), {}, changed_kinds(np.array([5]), layout_rows()))]
    region = trust_region(samples, measured_blocks=True)
    assert region["measured_blocks"] == [[5, 0, 2], [5, 1, 2], [24, 2, 4], [26, 0, 3]]
    assert "measured_blocks" not in trust_region(samples)


def test_the_rule_keeps_only_picks_inside_the_measured_region():
    rule = Guard(margin=0.1, max_gain=0.5, max_changed=3)
    assert rule.keeps(-0.2, 2)
    assert not rule.keeps(-0.05, 2)                 # within the margin
    assert not rule.keeps(-0.6, 2)                  # a larger gain than the valid split ever showed
    assert not rule.keeps(-0.2, 4)                  # further from the default than the valid split went
    assert Guard(0.1).keeps(-5.0, 10 ** 6)


def test_every_move_between_two_valid_configs_is_a_pair():
    # y = [0, 0.1, -0.2], yhat = [0, -0.1, -0.5]; move j -> i: e = (y_i - y_j) - (yhat_i - yhat_j)
    errors, distances = move_errors(layout_rows(), np.array([0.0, 0.1, -0.2]), np.array([0.0, -0.1, -0.5]))
    np.testing.assert_allclose(errors, [-0.2, -0.3, 0.2, -0.1, 0.3, 0.1])     # (0,1) (0,2) (1,0) (1,2) (2,0) (2,1)
    assert distances.tolist() == [1, 2, 1, 2, 2, 2]                          # rows 1 and 2 differ in both blocks


def test_moves_apart_counts_blocks_that_differ_in_any_dimension_number():
    feat = np.full((3, 2, 18), -1, dtype=np.int8)          # 2 nodes x (output, input, kernel) x 6 dimension numbers
    feat[1, 1, 12:18] = [0, 1, 2, 3, 4, 5]                  # row 1: node 1's kernel block set
    feat[2, 1, 12:18] = [0, 1, 2, 3, 5, 4]                  # row 2: the same block, its last two numbers swapped
    feat[2, 0, 0:2] = [1, 0]                                # ... and node 0's output block
    assert moves_apart(feat).tolist() == [[0, 1, 2], [1, 0, 2], [2, 2, 0]]


def test_the_margin_by_distance_is_binned_nearest_first_and_never_falls():
    per_graph = [(np.array([0.1, 0.2, 0.3]), np.array([1, 1, 2])), (np.array([0.05, 0.4, 0.5]), np.array([3, 3, 9]))]
    # sorted by distance: 1: [0.1, 0.2] | 2: [0.3] + 3: [0.05, 0.4] | 9: [0.5] (a short remainder joins the last bin)
    assert distance_margins(per_graph, 1.0, 2) == {"upto": [1, 9], "margin": [pytest.approx(0.2), pytest.approx(0.5)]}
    # bins of 1 pair: a distance's pairs stay together, and a nearer bin's larger margin carries on (0.3 > 0.05)
    assert distance_margins(per_graph, 0.0, 1) == {"upto": [1, 2, 3, 9], "margin": [
        pytest.approx(0.1), pytest.approx(0.3), pytest.approx(0.3), pytest.approx(0.5)]}
    negative = [(-e, d) for e, d in per_graph]
    assert distance_margins(negative, 0.5, 1)["margin"] == [0.0, 0.0, 0.0, 0.0]              # never below 0
    assert distance_margins([], 0.9, 1) is None


def test_the_margin_of_a_bin_is_its_worst_graphs():
    per_graph = [(np.array([0.1, 0.2]), np.array([1, 1])), (np.array([0.3, 0.5]), np.array([1, 1]))]
    assert distance_margins(per_graph, 0.0, 2)["margin"] == [pytest.approx(0.3)]   # pooled: 0.1
    assert distance_margins(per_graph, 0.0, 3)["margin"] == [pytest.approx(0.1)]   # no graph has 3 pairs: pooled


def test_the_rule_by_distance_asks_each_pick_the_margin_of_its_distance():
    rule = Guard(margin=0.3, max_gain=0.5, max_changed=9, by_distance=((1, 4), (0.01, 0.2)))
    assert rule.margin_at(1) == 0.01 and rule.margin_at(2) == 0.2 and rule.margin_at(4) == 0.2
    assert rule.margin_at(5) == np.inf                          # farther than any measured pair: never kept
    assert rule.keeps(-0.02, 1) and not rule.keeps(-0.02, 2) and rule.keeps(-0.25, 3)
    assert not rule.keeps(-0.25, 5) and not rule.keeps(-0.6, 1)
    # what a search ranks: prediction + the margin at its distance; the default 0; outside the region +inf
    assert rule.ranked(-0.02, 1) == pytest.approx(-0.01) and rule.ranked(-0.25, 3) == pytest.approx(-0.05)
    assert rule.ranked(0.0, 0) == 0.0 and rule.ranked(-0.6, 1) == np.inf and rule.ranked(-0.1, 10) == np.inf
    assert Guard(0.3).ranked(-0.2, 50) == -0.2                  # one margin for all: the prediction itself


def test_shrinkage_is_the_slope_of_true_on_predicted_gains_per_bin_within_0_and_1():
    # bin 1 (d <= 1): sum(t p) = 0.02 + 0.02, sum(p^2) = 0.08 -> 0.5; bin 2: 0.16 / 0.16 -> 1
    per_graph = [(np.array([0.1, -0.1, 0.4]), np.array([0.2, -0.2, 0.4]), np.array([1, 1, 2]))]
    assert distance_shrinkage(per_graph, [1, 2]) == [pytest.approx(0.5), pytest.approx(1.0)]
    overrated, contrary = (np.array([0.5]), np.array([0.1]), np.array([1])), (np.array([-0.1]), np.array([0.1]),
                                                                             np.array([2]))
    assert distance_shrinkage([overrated, contrary], [1, 2]) == [1.0, 0.0]          # clipped: 5 -> 1, -1 -> 0
    assert distance_shrinkage([overrated], [1, 2]) == [1.0, 0.0]                    # an empty bin: 0
    # moves j -> i in the order of move_errors: (i, j) = (0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)
    np.testing.assert_allclose(move_gains(np.array([0.0, -0.1, -0.5])), [-0.1, -0.5, 0.1, -0.4, 0.5, 0.4])


def test_model_guard_with_shrinkage_measures_the_margin_of_the_scaled_predictions():
    samples = [ValidSample(layout_rows(), np.array([0.0, 0.1, -0.2]), {"fake": np.array([0.0, -0.05, -0.25])})]
    entry = model_guard(samples, {"fake": 1.0}, {"fake": 2.0}, 1.0, 1, shrink=True)   # predictions [0, -0.1, -0.5]
    # moves j -> i, true gain T = y_j - y_i, predicted G = yhat_j - yhat_i. One block (rows 0, 1): (T, G) = (0.1,
    # -0.1), (-0.1, 0.1): slope -1 -> 0, errors -(T - 0 G) = -0.1, 0.1. Two blocks: (-0.2, -0.5), (-0.3, -0.4),
    # (0.2, 0.5), (0.3, 0.4): slope 0.44 / 0.82 = 22 / 41, errors -(T - 22 / 41 G): largest 0.3 - 0.4 * 22 / 41
    steps = entry["margin_by_distance"]
    assert steps["upto"] == [1, 2] and steps["shrink"] == [0.0, pytest.approx(22 / 41)]
    assert steps["margin"] == [pytest.approx(0.1), pytest.approx(0.1)]     # 0.0854 (0.3 unscaled) < the nearer 0.1
    assert "shrink" not in model_guard(samples, {"fake": 1.0}, {"fake": 2.0}, 1.0, 1)["margin_by_distance"]


def test_the_rule_with_shrinkage_judges_and_reports_the_scaled_prediction():
    rule = Guard(margin=0.3, by_distance=((1, 4), (0.05, 0.2)), shrink=(0.5, 1.0))
    assert rule.calibrated(-0.12, 1) == pytest.approx(-0.06) and rule.calibrated(-0.12, 3) == -0.12
    assert rule.calibrated(-0.12, 9) == -0.12 and rule.calibrated(0.0, 0) == 0.0
    assert not rule.keeps(-0.08, 1) and rule.keeps(-0.12, 1)      # -0.04 within the margin 0.05; -0.06 beyond it
    assert rule.ranked(-0.12, 1) == pytest.approx(-0.01)          # -0.06 + the margin 0.05
    pick = np.array([[1, 0, 0]], dtype=np.int16)
    _, score, kept = guard(SearchResult(pick, -0.12, 10, 0.0), np.zeros_like(pick), rule)
    assert kept and score == pytest.approx(-0.06)                 # the reported prediction is the scaled one


def guard_table() -> dict:
    """A guard file as stage autotune writes it (one layout collection, model gnn), fingerprint programs_ci:def."""
    return {"data_fingerprint": "programs_ci:def", "calibrations": {"gnn": {"configs": 40, "correlation": 0.8,
                                                                             "slope": 0.5}},
            "max_changed": 4, "max_gain": 0.3, "min_nodes": 12, "measured_blocks": [[26, 0, 4], [75, 1, 2]],
            "models": {"gnn": {"margin": 0.1, "weights": {"gnn": 1.0}, "pairs": 60,
                               "margin_by_distance": {"upto": [1, 4], "margin": [0.05, 0.1], "shrink": [0.5, 1.0]}}}}


def mutated(path, change) -> None:
    table = guard_table()
    change(table)
    path.write_text(json.dumps(table))


@pytest.mark.parametrize("change, words", [
    (lambda t: t["models"]["gnn"].pop("weights"), "key 'models.gnn.weights': expected an object of the members' "
                                                  "weights (finite numbers >= 0); found none (a guard file of an "
                                                  "older format)"),
    (lambda t: t.pop("min_nodes"), "key 'min_nodes': expected null or a count; found none (a guard file of an older "
                                   "format)"),
    (lambda t: t["models"]["gnn"].pop("margin_by_distance"), "key 'models.gnn.margin_by_distance': expected null or "
                                                             "an object whose 'upto' lists the bins' block counts"),
    (lambda t: t["models"]["gnn"].update(margin=None), "key 'models.gnn.margin': expected a finite number >= 0; "
                                                       "found None"),
    (lambda t: t["models"]["gnn"].update(margin=float("nan")), "key 'models.gnn.margin': expected a finite number "
                                                               ">= 0; found nan"),
    (lambda t: t["models"]["gnn"].update(margin=-0.2), "found -0.2"),
    (lambda t: t["models"]["gnn"]["margin_by_distance"].update(margin=[0.1]), "key 'models.gnn.margin_by_distance"
                                                                               ".margin': expected 2 finite margins"),
    (lambda t: t["models"]["gnn"]["margin_by_distance"].update(shrink=[2.0, 1.0]), "shrink': expected 2 slopes "
                                                                                    "within 0..1"),
    (lambda t: t["calibrations"].pop("gnn"), "key 'calibrations.gnn': expected an object of a finite slope and "
                                             "correlation and a count of configs; found none"),
    (lambda t: t["calibrations"]["gnn"].update(extra=1), "key 'calibrations.gnn': expected"),
    (lambda t: t["calibrations"]["gnn"].update(slope="x"), "key 'calibrations.gnn': expected"),
    (lambda t: t.update(measured_blocks=5), "key 'measured_blocks': expected null or a list of [opcode, block, "
                                            "rank] counts; found 5"),
    (lambda t: t.update(max_gain="x"), "key 'max_gain': expected null or a finite number >= 0; found 'x'"),
    (lambda t: t.update(models=[]), "key 'models': expected an object of each model's guard; found []"),
    # each below was read as valid before its check: a bool or negative count, no bin at all, a negative margin of
    # a bin (it keeps picks predicted slower), bins of other lengths, no weights or a negative one, a text
    # correlation, a negative max_gain, a block kind of 2 numbers, a negative count of configs
    (lambda t: t.update(max_changed=True), "key 'max_changed': expected null or a count; found True"),
    (lambda t: t.update(min_nodes=-1), "key 'min_nodes': expected null or a count; found -1"),
    (lambda t: t["models"]["gnn"].update(margin_by_distance={"upto": [], "margin": []}),
     "key 'models.gnn.margin_by_distance': expected null or an object whose 'upto' lists the bins' block counts"),
    (lambda t: t["models"]["gnn"]["margin_by_distance"].update(margin=[0.05, -0.1]),
     "key 'models.gnn.margin_by_distance.margin': expected 2 finite margins >= 0 (one per bin); found [0.05, -0.1]"),
    (lambda t: t["models"]["gnn"]["margin_by_distance"].update(margin=[0.05, 0.1, 0.2]),
     "key 'models.gnn.margin_by_distance.margin': expected 2 finite margins"),
    (lambda t: t["models"]["gnn"]["margin_by_distance"].update(shrink=[0.5]), "shrink': expected 2 slopes within "
                                                                               "0..1 (one per bin); found [0.5]"),
    (lambda t: t["models"]["gnn"].update(weights={}), "key 'models.gnn.weights': expected an object of the members' "
                                                      "weights (finite numbers >= 0); found {}"),
    (lambda t: t["models"]["gnn"].update(weights={"gnn": -1.0}), "key 'models.gnn.weights': expected"),
    (lambda t: t["calibrations"]["gnn"].update(correlation="x"), "key 'calibrations.gnn': expected"),
    (lambda t: t["calibrations"]["gnn"].update(configs=-1), "key 'calibrations.gnn': expected"),
    (lambda t: t.update(max_gain=-0.1), "key 'max_gain': expected null or a finite number >= 0; found -0.1"),
    (lambda t: t.update(measured_blocks=[[26, 0]]), "key 'measured_blocks': expected null or a list of [opcode, "
                                                    "block, rank] counts; found [[26, 0]]"),
])
def test_a_guard_file_of_an_older_format_or_edited_by_hand_is_named(tmp_path, change, words):
    """Each was a KeyError, TypeError or AttributeError traceback in the tool, or used silently (a NaN or negative
    margin kept every pick; a file without min_nodes, from before that key, dropped the small-program scale)."""
    path = guard_file(tmp_path, "layout-xla-random")
    path.parent.mkdir(parents=True)
    mutated(path, change)
    with pytest.raises(PredictError) as refusal:
        read_guard(tmp_path, "layout-xla-random", "gnn", "programs_ci:def")
    assert str(refusal.value).startswith(f"{path}: ") and words in str(refusal.value)
    assert str(refusal.value).endswith("; run stage autotune again (dvc repro)")


def test_a_guard_file_as_the_stage_writes_it_for_tile_and_without_optional_keys_is_read(tmp_path):
    path = guard_file(tmp_path, "layout-xla-random")
    path.parent.mkdir(parents=True)
    for change in (lambda t: None, lambda t: t.pop("measured_blocks"),                 # guard.measured_blocks off
                   lambda t: t["models"]["gnn"]["margin_by_distance"].pop("shrink"),  # guard.shrink off
                   lambda t: t.update(max_changed=None, min_nodes=None, measured_blocks=None) or
                   t["models"]["gnn"].update(margin_by_distance=None)):                 # tile
        mutated(path, change)
        assert read_guard(tmp_path, "layout-xla-random", "gnn", "programs_ci:def")["margin"] == 0.1


def test_the_tool_refuses_a_missing_or_stale_guard_file_in_one_line(tmp_path):
    path = guard_file(tmp_path, "layout-xla-random")
    with pytest.raises(PredictError) as missing:
        read_guard(tmp_path, "layout-xla-random", "gnn", "programs:abc")
    assert str(missing.value) == (f"{path}: missing; run stage autotune first (dvc repro): it measures the guard's "
                                  f"margin")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(guard_table()))
    with pytest.raises(PredictError, match="made on data 'programs_ci:def', not on this run's 'programs:abc'; "
                                           "run stage autotune") as stale:
        read_guard(tmp_path, "layout-xla-random", "gnn", "programs:abc")
    assert "\n" not in str(stale.value)
    assert read_guard(tmp_path, "layout-xla-random", "gnn", "programs_ci:def")["margin"] == 0.1
    with pytest.raises(PredictError, match="no guard for model 'lgbm'"):
        read_guard(tmp_path, "layout-xla-random", "lgbm", "programs_ci:def")
    mutated(path, lambda t: t["models"]["gnn"].pop("margin"))         # an entry without a margin: no guard either
    with pytest.raises(PredictError, match="no guard for model 'gnn'"):                   # (was a KeyError)
        read_guard(tmp_path, "layout-xla-random", "gnn", "programs_ci:def")


def test_distance_evidence_of_tied_errors_has_no_spearman_and_no_nan(recwarn):
    evidence = distance_evidence(np.zeros(10), np.arange(10) % 3)     # every |error| the same: runtimes all tied
    assert evidence["spearman_abs_error_distance"] is None
    json.dumps(evidence, allow_nan=False)                               # the guard file stays valid JSON
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_distance_evidence_by_hand_and_its_spearman_as_scipy():
    from scipy.stats import spearmanr

    errors, distances = np.array([0.01, -0.02, 0.05, 0.2, -0.3, 0.1]), np.array([1, 1, 2, 3, 4, -1])
    evidence = distance_evidence(errors, distances)           # the -1 distance (no measured pair) is dropped
    # ranks of |error| 1..5 against distance ranks 1.5, 1.5, 3, 4, 5: 9.5 / sqrt(10 * 9.5)
    assert evidence["spearman_abs_error_distance"] == pytest.approx(9.5 / np.sqrt(10 * 9.5))
    assert evidence["median_distance"] == 2.0 and evidence["max_distance"] == 4
    rng = np.random.default_rng(0)
    for _ in range(50):
        errors, distances = rng.normal(size=200), rng.integers(0, 30, 200)
        expected = float(spearmanr(np.abs(errors), distances)[0])
        assert distance_evidence(errors, distances)["spearman_abs_error_distance"] == expected


def test_distance_evidence_splits_near_and_far_at_the_median_and_needs_4_pairs():
    # distances [1, 2, 2, 3]: median 2; near = distances <= 2 -> errors [0.1, 0.2, 0.3], far = [0.4]
    # q95 of [0.1, 0.2, 0.3] (linear): 0.2 + 0.9 * 0.1 = 0.29
    evidence = distance_evidence(np.array([0.1, 0.2, 0.3, 0.4]), np.array([1, 2, 2, 3]))
    assert evidence["median_distance"] == 2.0
    assert evidence["error_q95_near"] == pytest.approx(0.29) and evidence["error_q95_far"] == pytest.approx(0.4)
    assert distance_evidence(np.array([0.1, 0.2, 0.3]), np.array([1, 2, 3])) is None      # 3 pairs: too few


def test_the_rule_keeps_a_gain_of_exactly_max_gain_and_asks_it_of_the_calibrated_prediction():
    assert Guard(margin=0.0, max_gain=0.5).keeps(-0.5) and not Guard(margin=0.0, max_gain=0.5).keeps(-0.5625)
    # shrink 0.5 at distance 1: -0.15 is calibrated to -0.075, within max_gain 0.1: kept, ranked -0.075 (not +inf)
    rule = Guard(margin=0.0, max_gain=0.1, by_distance=((1,), (0.0,)), shrink=(0.5,))
    assert rule.keeps(-0.15, 1) and rule.ranked(-0.15, 1) == pytest.approx(-0.075)
    assert rule.calibrated(-0.12, 0) == -0.12                    # the default itself (0 blocks) is never scaled
