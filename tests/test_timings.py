"""Stage timings kept apart from the tracked outputs, the stages' score lines and the GNN's ETA."""
from __future__ import annotations

import json

import pytest

from pipeline.ensemble import weights_text
from pipeline.graphnet.progress import epochs_left
from pipeline.scoring.evaluate import score_line
from pipeline.timings import Stopwatch, timings_file, write_timings


def test_timings_go_to_their_own_file_beside_the_metrics(tmp_path):
    path = write_timings(tmp_path / "metrics", "lgbm", "tile-xla", {"seconds": 1.25, "fit_seconds": 1.0})
    assert path == tmp_path / "metrics" / "timings" / "lgbm" / "tile-xla.json" == timings_file(
        tmp_path / "metrics", "lgbm", "tile-xla")
    assert json.loads(path.read_text()) == {"fit_seconds": 1.0, "seconds": 1.25}
    assert Stopwatch().elapsed() >= 0.0


def test_score_line_is_rounded_named_and_shows_the_ceiling():
    result = {"collection": "tile:xla", "valid": {"score": 0.812345, "graphs": 3},
              "test": {"score": 0.7, "graphs": 2}, "ceiling": {"valid": 0.95}, "per_graph": []}
    assert score_line("heuristic", "tile-xla", result, 0.0312) == (
        "heuristic tile-xla: valid 0.8123 (ceiling 0.9500), test 0.7000 in 0.03 s")
    assert score_line("gnn", "tile-xla", {"collection": "tile:xla"}, 2) == "gnn tile-xla: no split with truth in 2.00 s"


def test_ensemble_weights_are_rounded_and_named():
    assert weights_text({"lgbm": 0.3333333333, "gnn": 0.6666666667}) == "lgbm 0.33, gnn 0.67"


@pytest.mark.parametrize("epoch, best, budget, patience, expected", [
    (0, 0, 60, 5, (5, 59)),      # improving: early stopping could end it 5 epochs on
    (9, 5, 60, 5, (1, 50)),      # 4 epochs since the best: one more without a gain stops it
    (9, 2, 60, 5, (0, 50)),      # past the patience (the stop decision comes next)
    (57, 57, 60, 5, (2, 2)),     # the budget ends it first
    (59, 59, 60, 5, (0, 0)),     # the last epoch of the budget
])
def test_gnn_eta_counts_the_epochs_early_stopping_leaves(epoch, best, budget, patience, expected):
    assert epochs_left(epoch, best, budget, patience) == expected
