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


def test_equal_weighting_fits_nothing_and_grid_follows_valid():
    from pipeline.ensemble import pick_weights

    truth = {"g": np.array([1.0, 2.0, 3.0, 4.0])}
    right, wrong = preds_of(g=[1.0, 2.0, 3.0, 4.0]), preds_of(g=[4.0, 3.0, 2.0, 1.0])
    np.testing.assert_allclose(pick_weights("layout", [right, wrong, wrong], truth, "equal", 0.5, "rank"),
                               [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(pick_weights("layout", [wrong, right], truth, "grid", 0.5, "rank"), [0.0, 1.0])
    with pytest.raises(ValueError, match="weighting"):
        pick_weights("layout", [right], truth, "stacking", 0.5, "rank")


def test_gain_over_best_member_is_measured_against_the_valid_winner():
    from pipeline.ensemble import gain_over_best_member

    members = {"valid": {"lgbm": 0.5, "gnn": 0.6}, "test": {"lgbm": 0.7, "gnn": 0.4}}
    gain = gain_over_best_member(members, {"valid": 0.65, "test": 0.5})
    assert gain["best_member"] == "gnn"                                  # best on valid, not on test
    assert gain["gain"] == pytest.approx({"valid": 0.05, "test": 0.1})
    assert gain_over_best_member({"valid": members["valid"]}, {"valid": 0.55})["gain"] == pytest.approx(
        {"valid": -0.05})


def test_schema_weightings_are_the_modules():
    from pipeline.ensemble import WEIGHTINGS
    from pipeline.settings_schema import ENSEMBLE_WEIGHTINGS

    assert ENSEMBLE_WEIGHTINGS == WEIGHTINGS


def test_run_reports_the_gain_over_the_member_best_on_valid(tmp_path, monkeypatch):
    """Two members on one graph per split; equal rank weights. Hand-checked Kendall tau of 4 configs:
    valid: a = truth order (1), b reversed (-1), a+b ranks tie everywhere (0)  -> best member a, gain 0 - 1 = -1;
    test:  a = [1,2,4,3] vs truth (tau 2/3), b = [1,2,3,4] (1), mean ranks [1,2,3.5,3.5] (tau 5/sqrt(30))."""
    from pipeline import ensemble
    from pipeline.config import compose
    from pipeline.predictions import predictions_path, save_predictions
    from pipeline.tpugraphs.dataset import Collection

    slug = "layout-xla-random"
    cfg = compose(["data=programs_ci", f"paths.predictions_dir={tmp_path}", f"paths.metrics_dir={tmp_path}",
                   "ensemble.members=[a,b]",
                   "ensemble.weighting=equal", "ensemble.normalize=rank"])
    member_preds = {"a": {"valid": [1.0, 2.0, 3.0, 4.0], "test": [1.0, 2.0, 4.0, 3.0]},
                    "b": {"valid": [4.0, 3.0, 2.0, 1.0], "test": [1.0, 2.0, 3.0, 4.0]}}
    for member, splits in member_preds.items():
        for split, scores in splits.items():
            save_predictions(preds_of(g=np.array(scores)), predictions_path(tmp_path, member, slug, split))
    truth = {"g": np.array([1.0, 2.0, 3.0, 4.0])}
    monkeypatch.setattr(ensemble, "load_truth", lambda cfg, collection, split: truth)
    monkeypatch.setattr(ensemble, "evaluate_and_write", lambda cfg, stage, collection, preds, extra=None, truth_by_split=None: dict(extra))
    result = ensemble.run(cfg, Collection.parse(slug))
    assert result["weights"] == {"a": 0.5, "b": 0.5}
    assert result["member_valid_scores"] == pytest.approx({"a": 1.0, "b": -1.0})
    assert result["member_test_scores"] == pytest.approx({"a": 2 / 3, "b": 1.0})
    assert result["best_member"] == "a"
    assert result["gain_over_best_member"] == pytest.approx({"valid": -1.0, "test": 5 / np.sqrt(30) - 2 / 3})


def test_choose_weights_breaks_ties_towards_even_weights():
    truth = {"g": np.array([1.0, 2.0, 3.0])}
    right = preds_of(g=[1.0, 2.0, 3.0])
    wrong = preds_of(g=[3.0, 1.0, 2.0])      # tau -1/3: [right, right] ties everywhere, [right, wrong] does not
    weights, score = choose_weights("layout", [right, right], truth, 0.25, "minmax")
    np.testing.assert_allclose(weights, [0.5, 0.5])                      # not the first vertex [0, 1]
    assert score == pytest.approx(1.0)
    weights, _ = choose_weights("layout", [right, wrong], truth, 0.25, "minmax")
    assert weights[0] > weights[1]                                        # a strict winner still wins
