import json

import numpy as np
import pandas as pd
import pytest
from conftest import make_layout_arrays, make_tile_arrays, write_npz

from pipeline.config import compose
from pipeline.scoring.evaluate import evaluate_and_write, load_truth, rank_scatter
from pipeline.predictions import Predictions
from pipeline.tpugraphs.dataset import Collection

TILE, LAYOUT = Collection.parse("tile-xla"), Collection.parse("layout-xla-random")


@pytest.fixture
def cfg(tmp_path):
    npz = tmp_path / "syn" / "npz"
    write_npz(npz / "tile/xla/valid/t1.npz", make_tile_arrays())
    write_npz(npz / "layout/xla/random/valid/g1.npz", make_layout_arrays())
    test_arrays = make_layout_arrays()
    test_arrays["config_runtime"][:] = 0
    write_npz(npz / "layout/xla/random/test/" / ("ab" * 16 + ".npz"), test_arrays)
    truth = tmp_path / "syn/truth/layout-xla-random"
    truth.mkdir(parents=True)
    np.savez(truth / ("ab" * 16 + ".npz"), config_runtime=np.array([5, 6, 7, 8]))
    return compose(["data=programs_ci", f"paths.synthetic_dir={tmp_path / 'syn'}", f"paths.metrics_dir={tmp_path / 'm'}",
                    f"paths.plots_dir={tmp_path / 'p'}"])


def test_valid_truth_is_normalised_for_tile_and_raw_for_layout(cfg):
    np.testing.assert_allclose(load_truth(cfg, TILE, "valid")["t1"], [1200 / 1000, 900 / 1010, 1500 / 990])
    np.testing.assert_array_equal(load_truth(cfg, LAYOUT, "valid")["g1"], [300, 100, 200, 400])
    assert list(load_truth(cfg, LAYOUT, "test")["ab" * 16]) == [5, 6, 7, 8]


def test_real_test_split_has_no_truth(cfg):
    cfg.data.kind = "tpugraphs"
    assert load_truth(cfg, LAYOUT, "test") is None


def test_evaluate_and_write_scores_and_writes_files(cfg, tmp_path):
    valid, test = Predictions(), Predictions()
    valid["g1"] = [3.0, 1.0, 2.0, 4.0]          # same order as the runtimes: tau 1
    test["ab" * 16] = [4.0, 3.0, 2.0, 1.0]      # reversed: tau -1
    result = evaluate_and_write(cfg, "train_x", LAYOUT, {"valid": valid, "test": test}, extra={"seconds": 1.5})
    assert result["valid"] == {"score": pytest.approx(1.0), "graphs": 1}
    assert result["test"]["score"] == pytest.approx(-1.0)
    on_disk = json.loads((tmp_path / "m/train_x/layout-xla-random.json").read_text())
    assert on_disk["seconds"] == 1.5 and on_disk["valid"]["score"] == pytest.approx(1.0)
    per_graph = pd.read_csv(tmp_path / "p/train_x/layout-xla-random_per_graph.csv")
    assert per_graph["split"].tolist() == ["valid", "test"]
    scatter = pd.read_csv(tmp_path / "p/train_x/layout-xla-random_scatter.csv")
    np.testing.assert_allclose(scatter["true_rank"], scatter["predicted_rank"])


def test_evaluate_and_write_uses_the_truth_it_is_given(cfg):
    valid = Predictions()
    valid["g1"] = [3.0, 1.0, 2.0, 4.0]          # tau 1 against the files' runtimes [300, 100, 200, 400]
    given = {"valid": {"g1": np.array([200.0, 400.0, 300.0, 100.0])}}    # the reverse order: tau -1
    assert evaluate_and_write(cfg, "train_x", LAYOUT, {"valid": valid}, truth_by_split=given)["valid"]["score"] \
        == pytest.approx(-1.0)
    assert "valid" not in evaluate_and_write(cfg, "train_x", LAYOUT, {"valid": valid}, truth_by_split={"valid": None})


def test_metrics_carry_the_dataset_ceiling(cfg, tmp_path):
    stats = {"synthesized": True, "ceiling": {"layout-xla-random": {"train": 0.9, "valid": 0.75, "test": 0.5}}}
    (tmp_path / "syn" / "stats.json").write_text(json.dumps(stats))
    valid = Predictions()
    valid["g1"] = [3.0, 1.0, 2.0, 4.0]
    result = evaluate_and_write(cfg, "train_x", LAYOUT, {"valid": valid})
    assert result["ceiling"] == {"valid": 0.75}
    on_disk = json.loads((tmp_path / "m/train_x/layout-xla-random.json").read_text())
    assert on_disk["ceiling"] == {"valid": 0.75}
    tile = Predictions()
    tile["t1"] = [1.0, 2.0, 3.0]
    assert "ceiling" not in evaluate_and_write(cfg, "train_x", TILE, {"valid": tile})   # no ceiling for tile-xla
    cfg.data.kind = "tpugraphs"
    cfg.data.root = str(tmp_path / "syn")
    assert "ceiling" not in evaluate_and_write(cfg, "train_x", LAYOUT, {"valid": valid})



@pytest.mark.parametrize("ceiling, found", [
    ({"layout-xla-random": {"valid": float("nan")}}, r"key 'ceiling.layout-xla-random': .*'valid': nan"),
    ({"layout-xla-random": {"valid": "x"}}, r"key 'ceiling.layout-xla-random': .*'valid': 'x'"),
    ({"layout-xla-random": {"valid": int("9" * 400)}}, r"key 'ceiling.layout-xla-random': .*'valid': 9999"),
    ({"layout-xla-random": [0.5]}, r"key 'ceiling.layout-xla-random': .*found \[0.5\]"),
    ([0.5], r"key 'ceiling': expected \{collection: .*found \[0.5\]"),
    (None, r"not valid JSON"),
])
def test_a_stats_json_edited_by_hand_is_refused_before_the_metrics_are_written(cfg, tmp_path, ceiling, found):
    """Every model stage reads the dataset's ceiling from stats.json: a cut-short file was a JSONDecodeError
    traceback, a text ceiling a float() ValueError, 400 digits an OverflowError, a list an AttributeError, and a NaN
    ceiling went into the metrics file (no JSON then) and the stage's line ('ceiling nan'). A null one is no ceiling."""
    from pipeline.errors import PipelineError

    stats = tmp_path / "syn" / "stats.json"
    stats.write_text('{"synthesized": true, "ceil' if ceiling is None else json.dumps({"ceiling": ceiling}))
    valid = Predictions()
    valid["g1"] = [3.0, 1.0, 2.0, 4.0]
    with pytest.raises(PipelineError, match=rf"^{stats}: {found}"):
        evaluate_and_write(cfg, "train_x", LAYOUT, {"valid": valid})
    assert not (tmp_path / "m/train_x/layout-xla-random.json").exists()
    stats.write_text(json.dumps({"ceiling": {"layout-xla-random": {"valid": None, "test": 0.5}}}))
    assert "ceiling" not in evaluate_and_write(cfg, "train_x", LAYOUT, {"valid": valid})

def test_rank_scatter_by_hand():
    preds = Predictions()
    preds["g"] = [0.0, 2.0, 1.0]
    table = rank_scatter(preds, {"g": np.array([10.0, 30.0, 20.0])}, points_per_graph=2)
    assert table["true_rank"].tolist() == [0.0, 0.5] and table["predicted_rank"].tolist() == [0.0, 0.5]
    assert len(rank_scatter(preds, {"g": np.array([10.0, 30.0, 20.0])}, points_per_graph=5)) == 3


def test_a_zero_normalizer_is_refused():
    """Dividing by a zero normalizer would rank the config as infinitely slow, silently."""
    from pipeline.scoring.evaluate import target_runtimes

    with pytest.raises(ValueError, match="positive config_runtime_normalizers"):
        target_runtimes(np.array([1.0, 2.0]), np.array([1.0, 0.0]), "tile", "t1")
    np.testing.assert_array_equal(target_runtimes(np.array([1.0, 2.0]), None, "layout", "g1"), [1.0, 2.0])


def test_missing_hidden_test_truth_is_an_error_not_an_empty_split(cfg):
    """The fixture has hidden truth for layout-xla-random only: tile-xla's test split would score nan."""
    with pytest.raises(FileNotFoundError, match="no hidden test truth"):
        load_truth(cfg, TILE, "test")


def test_a_zero_ceiling_is_kept(cfg, tmp_path):
    (tmp_path / "syn" / "stats.json").write_text(json.dumps({"ceiling": {"layout-xla-random": {"valid": 0.0}}}))
    valid = Predictions()
    valid["g1"] = [3.0, 1.0, 2.0, 4.0]
    assert evaluate_and_write(cfg, "train_x", LAYOUT, {"valid": valid})["ceiling"] == {"valid": 0.0}


def test_only_the_valid_split_is_scattered(cfg, tmp_path):
    train = Predictions()
    train["g1"] = [1.0, 2.0]
    given = {"train": {"g1": np.array([10.0, 20.0])}}                  # same order as the scores: tau 1
    result = evaluate_and_write(cfg, "train_x", LAYOUT, {"train": train}, truth_by_split=given)
    assert result["train"]["score"] == pytest.approx(1.0)
    assert not (tmp_path / "p/train_x/layout-xla-random_scatter.csv").exists()
