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


@pytest.mark.parametrize("write, found", [
    (lambda p: p.write_bytes(b""), "No data left in file"),
    (lambda p: p.write_bytes(b"garbage"), "pickled"),
    (lambda p: np.savez(p, graph_id=np.array(["a"]), offsets=np.array([0, 1])), "no key 'scores'"),
    (lambda p: np.savez(p, graph_id=np.array(["a"]), offsets=np.array([0, 1]), scores=np.array([np.nan])),
     "predictions for graph 'a' contain NaN or inf"),
    (lambda p: np.savez(p, graph_id=np.array(["a", "b"]), offsets=np.array([0, 5, 1]), scores=np.ones(1)),
     "offsets [0, 5, 1] that do not cut 1 scores into 2 graphs"),
    (lambda p: np.savez(p, graph_id=np.array(["a", "a"]), offsets=np.array([0, 1, 2]), scores=np.ones(2)),
     "a graph_id twice"),
    (lambda p: np.savez(p, graph_id=np.array("a"), offsets=np.array([0, 1]), scores=np.ones(1)), "unsized object"),
    (lambda p: np.savez(p, graph_id=np.array(["a"]), offsets=np.array([0, 1]), scores=np.array(["x"])),
     "could not convert string to float"),
])
def test_load_refuses_what_save_never_writes_in_one_line_naming_the_file(tmp_path, write, found):
    """Each was a ValueError or TypeError traceback in ensemble and submit (a file of two rows of one graph loaded
    its last, one of a negative span an empty graph)."""
    from pipeline.errors import PipelineError

    path = tmp_path / "test.npz"
    write(path)
    with pytest.raises(PipelineError) as caught:
        load_predictions(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: expected a predictions file (npz of graph_id, offsets, scores") and \
        found in message and "\n" not in message, message
    with pytest.raises(FileNotFoundError):
        load_predictions(tmp_path / "absent.npz")
