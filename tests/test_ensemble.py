import numpy as np
import pytest

from pipeline.scoring import metrics
from pipeline.ensemble import blend, choose_weights, normalize_scores, weight_grid
from pipeline.predictions import Predictions


def preds_of(**graphs):
    p = Predictions()
    for g, s in graphs.items():
        p[g] = s
    return p


def test_normalize_minmax_and_rank_by_hand():
    np.testing.assert_allclose(normalize_scores([2.0, 4.0, 3.0], "minmax"), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(normalize_scores([10.0, 10.0, 30.0, 20.0], "rank"), [0.0, 0.0, 1.0, 0.6])  # ranks 1.5, 1.5, 4, 3
    np.testing.assert_allclose(normalize_scores([5.0, 5.0], "minmax"), [0.0, 0.0])
    with pytest.raises(ValueError, match="normalize"):
        normalize_scores([1.0], "zscore")


def test_weight_grid_covers_simplex_and_vertices():
    grid = weight_grid(3, 0.5)
    assert grid.shape == (6, 3)
    np.testing.assert_allclose(grid.sum(axis=1), 1.0)
    assert {tuple(r) for r in grid} >= {(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)}


def test_blend_is_weighted_sum_of_normalised_scores():
    a, b = preds_of(g=[0.0, 10.0, 5.0]), preds_of(g=[1.0, 0.0, 2.0])
    np.testing.assert_allclose(blend([a, b], np.array([0.5, 0.5]), "minmax")["g"], [0.25, 0.5, 0.75])


def test_choose_weights_is_never_worse_than_best_member():
    rng = np.random.default_rng(0)
    truth = {f"g{i}": rng.random(30) for i in range(4)}
    good = preds_of(**{g: r + rng.normal(0, 0.2, 30) for g, r in truth.items()})
    noisy = preds_of(**{g: r + rng.normal(0, 1.0, 30) for g, r in truth.items()})
    weights, score = choose_weights("layout", [good, noisy], truth, 0.1, "minmax")
    best_member = max(metrics.score_predictions("layout", p, truth)["score"] for p in (good, noisy))
    assert score >= best_member - 1e-12
    assert weights[0] > weights[1]
