import numpy as np
import pytest

from pipeline.predictions import Predictions, load_predictions, predictions_path, save_predictions


def test_round_trip_keeps_graphs_and_order(tmp_path):
    preds = Predictions()
    preds["b"] = [0.5, -1.0]
    preds["a"] = [3.0, 2.0, 1.0]
    path = predictions_path(tmp_path, "gnn", "layout-xla-random", "test")
    save_predictions(preds, path)
    loaded = load_predictions(path)
    assert list(loaded) == ["a", "b"]
    np.testing.assert_array_equal(loaded["a"], [3.0, 2.0, 1.0])
    np.testing.assert_array_equal(loaded["b"], [0.5, -1.0])
    assert not list(path.parent.glob("*.tmp*"))


def test_rejects_nan_and_checks_coverage():
    preds = Predictions()
    with pytest.raises(ValueError, match="NaN"):
        preds["a"] = [1.0, np.nan]
    preds["a"] = [1.0, 2.0]
    preds.check_covers({"a": 2})
    with pytest.raises(ValueError, match="unknown graphs"):
        preds.check_covers({})


def test_load_rejects_inconsistent_file(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, graph_id=np.array(["a"]), offsets=np.array([0, 5]), scores=np.zeros(3))
    with pytest.raises(ValueError, match="offsets"):
        load_predictions(path)
