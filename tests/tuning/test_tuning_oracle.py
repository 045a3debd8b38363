"""The oracle (cost model as the objective) and the round trip: JSON layouts -> node_config_feat -> runtime."""
from __future__ import annotations

import json

import numpy as np
import pytest
from tuning_hlo import NARROW_DOT, RESHAPES, space_of

from pipeline.config import load_cfg
from pipeline.costmodel.layout import LayoutCostParams
from pipeline.settings.sections import layout_cost
from pipeline.tuning.oracle import CostModelScorer, oracle_search
from pipeline.tuning.report import share_of_gain
from pipeline.tuning.search import SearchSettings, run_search

SETTINGS = SearchSettings("evolution", batch=64, population=16, local_share=0.5, mutation_extra=0.5,
                          random_default_prob=0.5, combos=8, time_limit_s=60.0)


@pytest.fixture(scope="module")
def params() -> LayoutCostParams:
    return layout_cost(load_cfg([]).synthesize.layout_cost)


def exhaustive_best(space, scorer) -> float:
    """The true optimum of a small space: every combination scored."""
    choices = [range(int(n)) for n in space.n_choices.reshape(-1)]
    grid = np.array(np.meshgrid(*choices, indexing="ij")).reshape(len(choices), -1).T   # [combos, NC * 3]
    return float(scorer(space.encode(grid.reshape(-1, space.n_nodes, 3).astype(np.int16))).min())


def test_cost_model_scorer_is_zero_at_the_default_and_the_oracle_finds_the_optimum(params):
    space = space_of(NARROW_DOT)                                             # 3^4 = 81 configurations
    truth = CostModelScorer(space, params)
    assert truth(space.encode(space.default()))[0] == 0.0
    best = exhaustive_best(space, truth)
    result = oracle_search(space, truth, SETTINGS, 1000, 20, 256, np.random.default_rng(0))
    assert result.score == pytest.approx(best, abs=1e-12) and best < 0         # a narrow minor dim wastes lanes
    assert truth.runtime_ns(space.encode(result.candidate[None]))[0] == pytest.approx(
        truth.default_ns * np.exp(result.score), rel=1e-12)


def test_json_layouts_round_trip_to_the_searched_configuration_and_its_runtime(params, tmp_path):
    space = space_of(RESHAPES)
    truth = CostModelScorer(space, params)
    result = run_search(space, truth, SETTINGS, 2000, np.random.default_rng(3))
    path = tmp_path / "chain.json"
    path.write_text(json.dumps({"layouts": space.layouts(result.candidate)}))
    read = space.from_layouts(json.loads(path.read_text())["layouts"], str(path))
    assert np.array_equal(space.encode(read[None]), space.encode(result.candidate[None]))
    reported = truth.default_ns * np.exp(result.score)
    assert truth.runtime_ns(space.encode(read[None]))[0] == pytest.approx(reported, rel=1e-12)


def test_share_of_the_oracle_gain():
    assert share_of_gain(100.0, 90.0, 80.0) == pytest.approx(0.5)
    assert share_of_gain(100.0, 100.0, 80.0) == 0.0
    assert share_of_gain(100.0, 110.0, 80.0) == pytest.approx(-0.5)           # a pick slower than the default
    assert share_of_gain(100.0, 99.5, 99.5) is None                          # oracle gains < 1%: listed apart
