"""Stage lgbm (pipeline/lgbm.py): the outputs of one collection, the progress totals from the pruned index."""
from __future__ import annotations

import pytest
from lgbm_graphs import SLUG, lgbm_cfg, write_pruned_collection

from pipeline import lgbm as lgbm_stage
from pipeline.config import compose
from pipeline.predictions import load_predictions
from pipeline.pruned import iter_split


@pytest.fixture(scope="module")
def pruned_dir(tmp_path_factory):
    return write_pruned_collection(tmp_path_factory.mktemp("pruned"))


@pytest.fixture(scope="module")
def cfg(pruned_dir):
    return lgbm_cfg(pruned_dir)


def test_run_writes_the_stage_outputs(cfg, tmp_path, monkeypatch):
    from pipeline.scoring import evaluate
    from pipeline.tpugraphs.dataset import Collection

    out = compose(["data=programs_ci", f"paths.pruned_dir={cfg.paths.pruned_dir}", "lgbm.num_threads=1",
                   "lgbm.num_boost_round=10", *[f"paths.{k}={tmp_path / k}" for k in
                                                ("models_dir", "plots_dir", "predictions_dir", "metrics_dir")]])
    monkeypatch.setattr(evaluate, "evaluate_and_write",
                        lambda cfg, stage, collection, preds, extra=None: {**extra, "per_graph": []})
    result = lgbm_stage.run(out, Collection.parse(SLUG))
    assert result["train_rows"] == 6 * 60
    assert 1 <= result["best_iteration"] <= result["last_iteration"] <= 10 and result["stopped"] in ("plateau", "budget")
    assert (tmp_path / "models_dir" / "lgbm" / SLUG / "model.txt").stat().st_size > 0
    assert (tmp_path / "plots_dir" / "lgbm" / SLUG / "importance.png").stat().st_size > 0
    assert "disagree_edges" in (tmp_path / "plots_dir" / "lgbm" / SLUG / "importance.csv").read_text()
    test = load_predictions(tmp_path / "predictions_dir" / "lgbm" / SLUG / "test.npz")
    assert sorted(test) == ["test0", "test1"] and len(test["test0"]) == 60


def test_split_size_counts_the_split_rows_of_the_index(cfg, pruned_dir):
    from pipeline.lgbm import split_size

    graphs = {split: sum(1 for _ in iter_split(pruned_dir, SLUG, split)) for split in ("train", "valid")}
    assert {split: split_size(pruned_dir, SLUG, split) for split in graphs} == graphs and graphs["train"] > 0
