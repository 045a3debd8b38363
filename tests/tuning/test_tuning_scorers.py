"""Calibration of a member's raw scores on valid, and the scorer's predicted log runtime ratio against the default."""
from __future__ import annotations

import numpy as np
import pytest
from pruned_graphs import make_layout_graph

from pipeline.tuning.program import with_configs
from pipeline.tuning.scorers import ModelScorer, calibrate


class LogRuntimeTimes:
    """A member whose raw score is `factor` x log runtime of the graph's own formula (make_layout_graph)."""

    name = "fake"

    def __init__(self, factor: float):
        self.factor = factor

    def raw(self, graph):
        feat = np.asarray(graph.node_config_feat, dtype=np.float64)
        runtime = 100.0 + 10 * feat[:, 0, 0] + 3 * feat[:, 1, 6] + feat[:, :, 12].sum(1)
        return self.factor * np.log(runtime)


def test_calibration_recovers_the_slope_of_log_runtime_on_score():
    graphs = [make_layout_graph(f"g{i}", "valid", n_configs=40, seed=i) for i in range(3)]
    cal = calibrate(LogRuntimeTimes(4.0), graphs, max_configs=30, batch=7, rng=np.random.default_rng(0))
    assert cal.slope == pytest.approx(0.25) and cal.correlation == pytest.approx(1.0) and cal.configs == 90


def test_scorer_predicts_the_log_runtime_ratio_against_the_default_row():
    template = with_configs(make_layout_graph("prog", "test"), np.full((1, 2, 18), -1, dtype=np.int8))
    member = LogRuntimeTimes(4.0)
    cal = calibrate(member, [make_layout_graph("v", "valid", n_configs=40)], 40, 16, np.random.default_rng(0))
    scorer = ModelScorer(template, [member], [1.0], [cal])
    feat = make_layout_graph("c", "test", n_configs=5, seed=9).node_config_feat
    runtime = lambda f: 100.0 + 10 * f[:, 0, 0] + 3 * f[:, 1, 6] + f[:, :, 12].sum(1)
    default = runtime(np.full((1, 2, 18), -1.0))
    np.testing.assert_allclose(scorer(feat), np.log(runtime(feat.astype(np.float64)) / default), rtol=1e-9)
    assert scorer(np.full((2, 2, 18), -1, dtype=np.int8)).tolist() == [0.0, 0.0]
    unused = ModelScorer(template, [member, member], [0.0, 1.0], [cal, cal])   # a zero-weight member is skipped
    np.testing.assert_allclose(unused(feat), scorer(feat))
