"""Guarded steps (`autotune.guard.chain`): a pick that goes further from the default than one guarded jump.

The guard's margin by distance is measured on moves between any two valid configurations
(`pipeline.tuning.guard.move_errors`), not only on moves away from the compiler default. So a chain of moves,
each kept by the guard relative to the point it starts from, is a chain of moves the valid split vouches for:

- start at the compiler default;
- each step runs the configured search from the current point (`run_search` with `origin` = `start` = the
  current point) for at most `step_budget` of the evaluations left: candidates are ranked by their predicted
  gain over the current point plus the margin at their distance from it (`Guard.ranked`), +inf beyond the
  margins' reach or beyond `max_changed` blocks from the compiler default;
- the chain moves to the step's best candidate when `Guard.keeps` its gain over the current point at that
  distance (beyond the margin, within `max_gain`), else it stops (also when the budget or the time is spent).

The pick is the chain's end; its prediction against the default is the sum of the kept steps' gains, each as the
guard judged it (`Guard.calibrated`: scaled by its distance's slope with `autotune.guard.shrink`; unscaled, the sum
is the end's own prediction, since the scorer predicts against the default). Every step's evaluations count
against the one budget, and a candidate scored in one step is ranked again in the next without being rescored.
Every kept step passed the guard, so a chain never returns a point that a step's guard refused; without a kept
step the pick is the default (as `search.guard` returns it).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from pipeline.tuning.search import (Guard, Scorer, SearchResult, SearchSettings, blocks_between, guard,
                                    run_search)
from pipeline.tuning.space import LayoutSpace


@dataclass(frozen=True)
class Step:
    """One kept step of a chain."""

    changed: int                 # blocks the step changes (its distance from the point it starts from)
    gain: float                  # predicted log runtime of its end minus its start, as judged (< -margin)
    margin: float                # the guard's margin at that distance


@dataclass(frozen=True)
class ChainResult:
    """A chain's end and how it got there."""

    result: SearchResult         # the end (the default without a kept step), its prediction against the default,
                                 # the evaluations of every step and the seconds of the whole chain
    steps: tuple[Step, ...]      # the kept steps, in order
    points: tuple[np.ndarray, ...]  # int16 [NC, 3] each: the default, then every kept step's end
    refused: SearchResult | None    # the last step's best candidate when the guard refused it (None: budget/time)

    @property
    def kept(self) -> bool:
        return bool(self.steps)


def chain_search(space: LayoutSpace, scorer: Scorer, s: SearchSettings, budget: int, step_budget: int,
                 rng: np.random.Generator, rule: Guard, algorithm: str | None = None) -> ChainResult:
    """Guarded steps from the compiler default within `budget` evaluations (see the module docstring); each step
    spends at most `step_budget` of them, the whole chain at most `s.time_limit_s` seconds."""
    started = time.perf_counter()
    current = space.default()[0]
    predicted: dict[bytes, float] = {current.tobytes(): 0.0}
    steps, points, spent, refused, beyond = [], [current], 0, None, 0
    while spent < budget:
        left_s = s.time_limit_s - (time.perf_counter() - started)
        if left_s <= 0:
            break
        result = run_search(space, scorer, dataclasses.replace(s, time_limit_s=left_s), min(step_budget,
                            budget - spent), rng, algorithm, rule=rule, origin=current, predicted=predicted)
        spent, beyond = spent + result.evaluations, beyond + result.beyond_max_gain
        distance = blocks_between(result.candidate, current)
        gain = result.score - predicted[current.tobytes()]
        if distance == 0 or not rule.keeps(gain, distance):
            refused = result if distance else None
            break
        steps.append(Step(distance, rule.calibrated(gain, distance), rule.margin_at(distance)))
        current = np.asarray(result.candidate, dtype=np.int16)
        points.append(current)
    end = SearchResult(current, float(sum(step.gain for step in steps)), spent, time.perf_counter() - started, beyond)
    return ChainResult(end, tuple(steps), tuple(points), refused)


@dataclass(frozen=True)
class Pick:
    """What the tool and stage autotune return for one program: the guarded pick and how it was found."""

    candidate: np.ndarray        # int16 [NC, 3]: the pick (the default when guarded)
    score: float                 # its prediction against the default (0.0 when guarded)
    kept: bool                   # False: the guard kept the compiler default
    search: SearchResult         # evaluations and seconds of the whole search (the chain's end when chained)
    unguarded: SearchResult      # what the search would return without the guard's last word (a chain: the refused
                                 # step's candidate, else its end)
    steps: tuple[Step, ...]      # the chain's kept steps (empty for one jump)
    points: tuple[np.ndarray, ...]  # the chain's points from the default (empty for one jump)


def guarded_pick(space: LayoutSpace, scorer: Scorer, s: SearchSettings, budget: int, rng: np.random.Generator,
                 rule: Guard, chain: bool, step_budget: int) -> Pick:
    """One guarded jump (`run_search` then `search.guard`) or, with `chain`, guarded steps (`chain_search`)."""
    if not chain:
        result = run_search(space, scorer, s, budget, rng, rule=rule)
        candidate, score, kept = guard(result, space.default()[0], rule)
        return Pick(candidate, score, kept, result, result, (), ())
    found = chain_search(space, scorer, s, budget, step_budget, rng, rule)
    return Pick(found.result.candidate, found.result.score, found.kept, found.result,
                found.refused or found.result, found.steps, found.points)
