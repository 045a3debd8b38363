"""Stage summary: per-model Kaggle score from hand-written per-collection metrics files."""
import json

import pytest

from pipeline.summary import model_summary, read_collection_metrics, summarize, summary_file
from pipeline.tpugraphs.dataset import Collection

TILE, XLA_RANDOM = Collection.parse("tile-xla"), Collection.parse("layout-xla-random")


def write_metrics(root, model, slug, payload):
    path = root / model / f"{slug}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def test_summarize_means_the_collection_scores_per_split(tmp_path):
    write_metrics(tmp_path, "lgbm", "tile-xla", {"valid": {"score": 0.9, "graphs": 3}, "test": {"score": 0.5}})
    write_metrics(tmp_path, "lgbm", "layout-xla-random", {"valid": {"score": 0.3}, "test": {"score": 0.1}})
    summary = summarize(tmp_path, ["lgbm"], [TILE, XLA_RANDOM], ["valid", "test"])
    assert summary["lgbm"]["valid"] == {"kaggle": pytest.approx(0.6), "collections": 2, "tile-xla": 0.9,
                                        "layout-xla-random": 0.3}
    assert summary["lgbm"]["test"]["kaggle"] == pytest.approx(0.3)
    assert summary_file(tmp_path) == tmp_path / "summary.json"


def test_a_split_without_truth_is_left_out_not_zero():
    summary = model_summary({"tile-xla": {"valid": {"score": 0.8}}}, ["valid", "test"], "m")
    assert list(summary) == ["valid"] and summary["valid"]["kaggle"] == pytest.approx(0.8)


def test_a_split_scored_in_only_some_collections_is_refused():
    with pytest.raises(ValueError, match="'test' is scored in \\['a'\\] but not in \\['b'\\]"):
        model_summary({"a": {"valid": {"score": 1.0}, "test": {"score": 1.0}}, "b": {"valid": {"score": 0.0}}},
                      ["valid", "test"], "m")


def test_missing_or_broken_metrics_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="gnn/tile-xla.json: no metrics file"):
        summarize(tmp_path, ["gnn"], [TILE], ["valid"])
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        read_collection_metrics(tmp_path / "bad.json")
