"""The guard's margin and region from a tiny hand-made valid set, the rule, and the file the tool reads."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.trained import PredictError
from pipeline.tuning.guard import (ValidSample, error_margin, guard_file, model_guard, pair_errors, read_guard,
                                   trust_region)
from pipeline.tuning.search import Guard


def layout_rows() -> np.ndarray:
    """3 configs of 1 node: the compiler default, output set, output and input set."""
    feat = np.full((3, 1, 18), -1, dtype=np.int8)
    feat[1, 0, 0:2] = [0, 1]
    feat[2, 0, 0:2] = [1, 0]
    feat[2, 0, 6:8] = [0, 1]
    return feat


def test_layout_errors_are_against_the_config_nearest_the_default():
    # truth d = y - y[0] = [0.1, -0.2]; predicted dhat = p - p[0] = [-0.1, -0.5]; error e = d - dhat = [0.2, 0.3]
    errors, distances = pair_errors(layout_rows(), np.array([0.0, 0.1, -0.2]), np.array([0.0, -0.1, -0.5]))
    np.testing.assert_allclose(errors, [0.2, 0.3])
    assert distances.tolist() == [1, 2]
    assert error_margin(errors, 0.5) == pytest.approx(0.25) and error_margin(errors, 1.0) == pytest.approx(0.3)
    assert error_margin(-errors, 0.9) == 0.0 and error_margin(np.zeros(0), 0.9) == 0.0   # never below 0


def test_tile_errors_are_every_ordered_pair():
    # pair (0, 1): d = -0.6, dhat = -0.2 -> e = -0.4; pair (1, 0): e = +0.4
    errors, distances = pair_errors(np.zeros((2, 24), np.float32), np.array([-0.1, 0.5]), np.array([0.0, 0.2]))
    assert sorted(np.round(errors, 9).tolist()) == [-0.4, 0.4] and distances.tolist() == [-1, -1]


def test_model_guard_and_region_of_a_hand_made_valid_split():
    samples = [ValidSample(layout_rows(), np.array([0.0, 0.1, -0.2]), {"fake": np.array([0.0, -0.05, -0.25])})]
    entry = model_guard(samples, {"fake": 1.0}, {"fake": 2.0}, 1.0)       # slope 2: predictions [0, -0.1, -0.5]
    assert entry["margin"] == pytest.approx(0.3) and entry["pairs"] == 2 and entry["weights"] == {"fake": 1.0}
    assert trust_region(samples) == {"max_changed": 2, "max_gain": pytest.approx(0.2)}
    tile = [ValidSample(np.zeros((2, 24), np.float32), np.array([-0.1, 0.5]), {"fake": np.zeros(2)})]
    assert trust_region(tile) == {"max_changed": None, "max_gain": pytest.approx(0.1)}   # over the default


def test_the_rule_keeps_only_picks_inside_the_measured_region():
    rule = Guard(margin=0.1, max_gain=0.5, max_changed=3)
    assert rule.keeps(-0.2, 2)
    assert not rule.keeps(-0.05, 2)                 # within the margin
    assert not rule.keeps(-0.6, 2)                  # a larger gain than the valid split ever showed
    assert not rule.keeps(-0.2, 4)                  # further from the default than the valid split went
    assert Guard(0.1).keeps(-5.0, 10 ** 6)


def test_the_tool_refuses_a_missing_or_stale_guard_file_in_one_line(tmp_path):
    path = guard_file(tmp_path, "layout-xla-random")
    with pytest.raises(PredictError) as missing:
        read_guard(tmp_path, "layout-xla-random", "gnn", "programs:abc")
    assert str(missing.value) == (f"{path}: missing; run stage autotune first (dvc repro): it measures the guard's "
                                  f"margin")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"data_fingerprint": "programs_ci:def", "models": {"gnn": {"margin": 0.1}}}))
    with pytest.raises(PredictError, match="made on data 'programs_ci:def', not on this run's 'programs:abc'; "
                                           "run stage autotune") as stale:
        read_guard(tmp_path, "layout-xla-random", "gnn", "programs:abc")
    assert "\n" not in str(stale.value)
    assert read_guard(tmp_path, "layout-xla-random", "gnn", "programs_ci:def")["margin"] == 0.1
    with pytest.raises(PredictError, match="no guard for model 'lgbm'"):
        read_guard(tmp_path, "layout-xla-random", "lgbm", "programs_ci:def")
