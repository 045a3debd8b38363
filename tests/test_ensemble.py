"""Stage ensemble: its metrics report the member weights and the gain over the member best on valid."""
import numpy as np
import pytest

from pipeline.predictions import Predictions


def preds_of(**graphs):
    p = Predictions()
    for g, s in graphs.items():
        p[g] = s
    return p


def test_run_reports_the_gain_over_the_member_best_on_valid(tmp_path, monkeypatch):
    """Two members on one graph per split; equal rank weights. Hand-checked Kendall tau of 4 configs:
    valid: lgbm = truth order (1), gnn reversed (-1), the two tie everywhere (0) -> best member lgbm, gain 0 - 1 = -1;
    test:  lgbm = [1,2,4,3] vs truth (tau 2/3), gnn = [1,2,3,4] (1), mean ranks [1,2,3.5,3.5] (tau 5/sqrt(30))."""
    from pipeline import ensemble
    from pipeline.config import compose, data_fingerprint
    from pipeline.predictions import predictions_path, save_predictions
    from pipeline.tpugraphs.dataset import Collection

    slug = "layout-xla-random"
    cfg = compose(["data=programs_ci", f"paths.predictions_dir={tmp_path}", f"paths.metrics_dir={tmp_path}",
                   "ensemble.members=[lgbm,gnn]",
                   "ensemble.weighting=equal", "ensemble.normalize=rank"])
    member_preds = {"lgbm": {"valid": [1.0, 2.0, 3.0, 4.0], "test": [1.0, 2.0, 4.0, 3.0]},
                    "gnn": {"valid": [4.0, 3.0, 2.0, 1.0], "test": [1.0, 2.0, 3.0, 4.0]}}
    for member, splits in member_preds.items():
        for split, scores in splits.items():
            save_predictions(preds_of(g=np.array(scores)), predictions_path(tmp_path, member, slug, split))
    truth = {"g": np.array([1.0, 2.0, 3.0, 4.0])}
    monkeypatch.setattr(ensemble, "load_truth", lambda cfg, collection, split: truth)
    monkeypatch.setattr(ensemble, "evaluate_and_write", lambda cfg, stage, collection, preds, extra=None, truth_by_split=None: dict(extra))
    result = ensemble.run(cfg, Collection.parse(slug))
    assert result["weights"] == {"lgbm": 0.5, "gnn": 0.5}
    assert result["data_fingerprint"] == data_fingerprint(cfg.data) and result["data_fingerprint"].startswith(
        "programs_ci:")                                  # what `predict --model ensemble` checks
    assert result["member_valid_scores"] == pytest.approx({"lgbm": 1.0, "gnn": -1.0})
    assert result["member_test_scores"] == pytest.approx({"lgbm": 2 / 3, "gnn": 1.0})
    assert result["best_member"] == "lgbm"
    assert result["gain_over_best_member"] == pytest.approx({"valid": -1.0, "test": 5 / np.sqrt(30) - 2 / 3})
