"""The oracle: the project's own cost model (`pipeline.costmodel`) as the objective, for built-in programs.

`CostModelScorer` gives the true log runtime ratio against the compiler default (noise-free), so any search can
run on it; `oracle_search` is the reference the autotune stage measures picks against: coordinate descent over
every block from the default and from the best of a random sample, the better of the two.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from pipeline.costmodel.layout import LayoutCostModel, LayoutCostParams
from pipeline.tuning.search import SearchResult, SearchSettings, run_search
from pipeline.tuning.space import LayoutSpace


class CostModelScorer:
    """node_config_feat [B, NC, 18] -> float64 [B] log(runtime / default runtime) under the layout cost model."""

    def __init__(self, space: LayoutSpace, params: LayoutCostParams):
        self.model = LayoutCostModel(space.graph, space.node_config_ids, params)
        self.default_ns = float(self.model.runtime_ns(space.encode(space.default()))[0])

    def runtime_ns(self, node_config_feat: np.ndarray) -> np.ndarray:
        """float64 [B]: noise-free runtimes."""
        return self.model.runtime_ns(node_config_feat)

    def __call__(self, node_config_feat: np.ndarray) -> np.ndarray:
        return np.log(self.runtime_ns(node_config_feat) / self.default_ns)


def oracle_search(space: LayoutSpace, scorer: CostModelScorer, settings: SearchSettings, budget: int,
                  random_samples: int, batch: int, rng: np.random.Generator) -> SearchResult:
    """The better of coordinate descent from the default and from the best of `random_samples` random candidates
    (each with `budget` evaluations at most, `batch` rows per cost-model call: its per-call work is per node)."""
    unlimited = dataclasses.replace(settings, time_limit_s=float("inf"), batch=batch)
    from_default = run_search(space, scorer, unlimited, budget, rng, algorithm="coordinate")
    sample = run_search(space, scorer, unlimited, random_samples, rng, algorithm="random")
    from_random = run_search(space, scorer, unlimited, budget, rng, algorithm="coordinate", start=sample.candidate)
    best = min((from_default, from_random), key=lambda r: r.score)
    return dataclasses.replace(best, evaluations=from_default.evaluations + sample.evaluations
                               + from_random.evaluations,
                               seconds=from_default.seconds + sample.seconds + from_random.seconds)
