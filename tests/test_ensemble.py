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


def _stale_run(tmp_path, monkeypatch, valid_graphs: dict, test_graphs: dict):
    """ensemble.run with members lgbm and gnn on a tiny data.root (test graph 'c', 4 configs, no test truth, as on
    real data; valid truth: graph 'g', 4 configs); lgbm's predictions are `valid_graphs` / `test_graphs`."""
    from conftest import write_layout_splits
    from pipeline import ensemble
    from pipeline.config import compose
    from pipeline.predictions import predictions_path, save_predictions
    from pipeline.tpugraphs.dataset import Collection

    slug, root = "layout-xla-random", tmp_path / "data"
    write_layout_splits(root / "npz/layout/xla/random")
    cfg = compose(["data=programs_ci", f"data.root={root}", f"paths.predictions_dir={tmp_path / 'p'}",
                   f"paths.metrics_dir={tmp_path / 'm'}", "ensemble.members=[lgbm,gnn]", "ensemble.weighting=equal"])
    four = np.array([1.0, 2.0, 3.0, 4.0])
    for member, (valid, test) in {"lgbm": (valid_graphs, test_graphs), "gnn": ({"g": four}, {"c": four})}.items():
        save_predictions(preds_of(**valid), predictions_path(tmp_path / "p", member, slug, "valid"))
        save_predictions(preds_of(**test), predictions_path(tmp_path / "p", member, slug, "test"))
    monkeypatch.setattr(ensemble, "load_truth", lambda cfg, collection, split: {"g": four} if split == "valid" else None)
    monkeypatch.setattr(ensemble, "evaluate_and_write", lambda *a, **k: dict(k["extra"]))
    return lambda: ensemble.run(cfg, Collection.parse(slug)), tmp_path / "p/lgbm" / slug


@pytest.mark.parametrize("split, valid, test, found", [
    ("valid", {"old": np.ones(4)}, {"c": np.arange(4.0)}, r"missing graphs \['g'\]; unknown graphs \['old'\]"),
    ("valid", {"g": np.ones(3)}, {"c": np.arange(4.0)}, "g: 3 scores for 4 configs"),
    ("test", {"g": np.arange(4.0)}, {"old": np.ones(4)}, r"missing graphs \['c'\]; unknown graphs \['old'\]"),
    ("test", {"g": np.arange(4.0)}, {"c": np.ones(5)}, "c: 5 scores for 4 configs"),
])
def test_a_member_predicting_other_graphs_is_refused_naming_its_file(tmp_path, monkeypatch, split, valid, test, found):
    """A member whose stage last ran on other data (stage lgbm run by hand after a data.root change, heuristic not):
    a ValueError traceback on valid; on test, where real data has no truth, its graphs were blended unchecked."""
    from pipeline.errors import PipelineError

    run, folder = _stale_run(tmp_path, monkeypatch, valid, test)
    with pytest.raises(PipelineError, match=f"^{folder / split}.npz: expected the scores of the 1 {split} graph"
                                            f".*; found {found}; .*python -m pipeline.lgbm --collection "
                                            f"layout-xla-random"):
        run()
    assert not (tmp_path / "p/ensemble").exists()


def test_members_predicting_the_split_graphs_blend(tmp_path, monkeypatch):
    run, _ = _stale_run(tmp_path, monkeypatch, {"g": np.arange(4.0)}, {"c": np.arange(4.0)})
    assert run()["weights"] == {"lgbm": 0.5, "gnn": 0.5}


def test_an_unreadable_predictions_file_is_refused_naming_it(tmp_path, monkeypatch):
    from pipeline.errors import PipelineError

    run, folder = _stale_run(tmp_path, monkeypatch, {"g": np.arange(4.0)}, {"c": np.arange(4.0)})
    (folder / "valid.npz").write_bytes(b"not an npz")
    with pytest.raises(PipelineError, match=f"^{folder / 'valid.npz'}: expected a predictions file"):
        run()
