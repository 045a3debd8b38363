import math

import numpy as np
import pytest

from pipeline.scoring import metrics
from pipeline.predictions import Predictions


def test_kendall_tau_perfect_and_reversed():
    assert metrics.kendall_tau([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert metrics.kendall_tau([3, 2, 1], [10, 20, 30]) == pytest.approx(-1.0)


def test_kendall_tau_b_with_ties_by_hand():
    # 6 pairs, runtimes tie on pair (0, 1): 5 concordant, 0 discordant -> 5 / sqrt(6 * 5)
    assert metrics.kendall_tau([1, 2, 3, 4], [1, 1, 2, 3]) == pytest.approx(5 / math.sqrt(30))
    # ties in the scores too: pair (2, 3) tied in x -> (5 - 0) / sqrt((6 - 1) * (6 - 1)) ... by hand:
    # x = [1,2,3,3], y = [1,1,2,3]: concordant (0,2)(0,3)(1,2)(1,3) = 4, tied-x (2,3), tied-y (0,1)
    assert metrics.kendall_tau([1, 2, 3, 3], [1, 1, 2, 3]) == pytest.approx(4 / math.sqrt(5 * 5))


def test_kendall_tau_all_tied_is_zero():
    assert metrics.kendall_tau([1, 1, 1], [3, 2, 1]) == 0.0


def test_kendall_tau_one_config_or_nan_is_zero():
    assert metrics.kendall_tau([1.0], [2.0]) == 0.0
    assert metrics.kendall_tau([1.0, np.nan, 3.0], [1.0, 2.0, 3.0]) == 0.0


def test_inversions_by_hand():
    assert metrics._inversions(np.array([0, 1, 2, 3])) == 0
    assert metrics._inversions(np.array([3, 2, 1, 0])) == 6
    # [2, 0, 1, 1, 0]: (0,1) (0,2) (0,3) (0,4) (2,4) (3,4) -> 6; equal ranks are no inversion
    assert metrics._inversions(np.array([2, 0, 1, 1, 0])) == 6


def test_kendall_tau_equals_scipy_bit_for_bit():
    """The numpy tau-b is the value scipy gives, to the last bit, with and without ties (every score in
    metrics/ and every model selection rests on it)."""
    from scipy.stats import kendalltau

    rng = np.random.default_rng(0)
    for case in range(400):
        n = int(rng.integers(2, 300))
        x = rng.integers(0, 6, n).astype(float) if case % 2 else rng.normal(size=n)
        y = rng.integers(0, 4, n).astype(float) if case % 3 == 0 else rng.normal(size=n)
        expected = kendalltau(x, y).statistic
        assert metrics.kendall_tau(x, y) == (0.0 if np.isnan(expected) else float(expected)), case


def test_average_ranks_by_hand_and_as_scipy():
    from scipy.stats import rankdata

    assert metrics.average_ranks([3.0, 1.0, 3.0, 2.0]).tolist() == [3.5, 1.0, 3.5, 2.0]
    assert np.isnan(metrics.average_ranks([1.0, np.nan])).all()
    values = np.random.default_rng(1).integers(0, 20, 500).astype(float)
    assert np.array_equal(metrics.average_ranks(values), rankdata(values, method="average"))


def test_slowdown_at_k_by_hand():
    scores, runtimes = [0.1, 0.5, 0.2, 0.9], [4.0, 2.0, 3.0, 1.0]
    assert metrics.slowdown_at_k(scores, runtimes, 1) == pytest.approx(3.0)   # picks runtime 4, best 1
    assert metrics.slowdown_at_k(scores, runtimes, 2) == pytest.approx(2.0)   # picks 4 and 3
    assert metrics.slowdown_at_k(scores, runtimes, 4) == pytest.approx(0.0)


def test_tile_score_is_two_minus_ratio():
    runtimes = np.array([6, 5, 4, 3, 2, 1], dtype=float)
    assert metrics.tile_score(np.arange(6), runtimes) == pytest.approx(2 - 2 / 1)
    assert metrics.tile_score(-np.arange(6), runtimes) == pytest.approx(1.0)


def test_top_k_ties_break_by_index():
    assert list(metrics.top_k_indices([1.0, 0.0, 0.0, 1.0], 3)) == [1, 2, 0]


def test_score_predictions_mean_and_coverage():
    preds = Predictions()
    preds["a"] = [1, 2, 3]
    preds["b"] = [3, 2, 1]
    truth = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([1.0, 2.0, 3.0])}
    result = metrics.score_predictions("layout", preds, truth)
    assert result["per_graph"] == {"a": pytest.approx(1.0), "b": pytest.approx(-1.0)}
    assert result["score"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="missing graphs"):
        metrics.score_predictions("layout", preds, {**truth, "c": np.ones(2)})
    with pytest.raises(ValueError, match="2 scores for 3"):
        short = Predictions()
        short["a"] = [1, 2]
        metrics.score_predictions("layout", short, {"a": np.ones(3)})


def test_graph_score_rejects_unknown_kind_and_bad_runtimes():
    with pytest.raises(ValueError, match="kind"):
        metrics.graph_score("tiles", [1], [1])
    with pytest.raises(ValueError, match="positive"):
        metrics.slowdown_at_k([1, 2], [0, 1], 1)


def test_scoring_does_not_import_scipy_stats():
    """Every scoring process (each model stage, each GNN member) would pay about a second importing scipy.stats."""
    import subprocess
    import sys

    code = ("import sys; from pipeline.scoring import metrics; from pipeline.graphnet import members; "
            "metrics.kendall_tau([1, 2, 3], [3, 1, 2]); members.rank_normalize([1.0, 2.0]); "
            "print('scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_kendall_tau_all_tied_runtimes_or_a_nan_runtime_is_zero():
    """Tied runtimes (not only tied scores) leave tau undefined: 0, not -1 or NaN; a NaN runtime (not only a NaN
    score) scores 0 too. Kills dropping `y_ties == pairs` and dropping the NaN check of the runtimes."""
    assert metrics.kendall_tau([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]) == 0.0
    # without the NaN check, np.unique ranks NaN last: [1, NaN, 3] would read as [0, 2, 1] -> tau 1/3
    assert metrics.kendall_tau([1.0, 2.0, 3.0], [1.0, np.nan, 3.0]) == 0.0


def test_scores_and_runtimes_of_different_or_zero_length_are_refused():
    """A short prediction must not score: slowdown_at_k would otherwise index the first runtimes only (scores
    [0.1, 0.2] pick runtime 3 of [3, 2, 1] -> slowdown 2.0), and an empty graph would score tau 0."""
    with pytest.raises(ValueError, match="same non-empty length"):
        metrics.slowdown_at_k([0.1, 0.2], [3.0, 2.0, 1.0], 1)
    with pytest.raises(ValueError, match="same non-empty length"):
        metrics.kendall_tau([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="same non-empty length"):
        metrics.kendall_tau([], [])


def test_top_k_ties_break_by_index_beyond_the_small_sort():
    """numpy's quicksort is an insertion sort below 16 elements (stable by luck): 40 tied scores need the stable
    sort to keep indices 0..4 first."""
    scores = np.zeros(40)
    scores[[7, 30]] = -1.0
    assert metrics.top_k_indices(scores, 5).tolist() == [7, 30, 0, 1, 2]


def test_graph_score_tile_is_the_top_5_score_and_layout_the_tau():
    # runtimes [6..1] ranked by arange: the top 5 predicted hold runtimes 6, 5, 4, 3, 2 -> 1 - (2 - 1) / 1 = 0.0
    # (top 1 would give 1 - (6 - 1) / 1 = -4.0, top 6 would give 1.0)
    runtimes = np.array([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    assert metrics.graph_score("tile", np.arange(6), runtimes) == pytest.approx(0.0)
    assert metrics.graph_score("layout", [1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)   # (2 - 1) / 3 pairs
    with pytest.raises(ValueError, match="kind"):
        metrics.graph_score("layouts", [1, 2], [1, 2])


def test_score_predictions_and_kaggle_score_are_means_not_medians():
    preds = Predictions()
    preds["a"], preds["b"], preds["c"] = [1, 2, 3], [3, 2, 1], [1, 2, 3]
    truth = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([1.0, 2.0, 3.0]), "c": np.array([1.0, 3.0, 2.0])}
    # taus 1, -1 and (2 concordant - 1 discordant) / 3 = 1/3: mean 1/9 (the median would be 1/3)
    assert metrics.score_predictions("layout", preds, truth)["score"] == pytest.approx(1 / 9)
    # (0.0 + 0.1 + 0.8) / 3 = 0.3 (the median would be 0.1)
    assert metrics.kaggle_score({"tile:xla": 0.0, "layout:xla:random": 0.1, "layout:nlp:default": 0.8}) \
        == pytest.approx(0.3)
