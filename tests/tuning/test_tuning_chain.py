"""Guarded steps (pipeline.tuning.chain): a chain goes where one guarded jump cannot, and only by kept steps."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_tuning_search import SETTINGS, Stub
from tuning_hlo import RESHAPES, space_of

from pipeline.tuning.chain import chain_search, guarded_pick
from pipeline.tuning.search import Guard, around, blocks_between, guard, run_search

# -0.01 per block changed towards the stub's target; a one-block step beats its margin (0.005), a two-block step
# (-0.02 against 0.03) and the whole jump to the target (-0.08 against 0.1) do not
BY_DISTANCE = Guard(0.1, by_distance=((1, 2, 8), (0.005, 0.03, 0.1)))


@pytest.fixture
def problem():
    space = space_of(RESHAPES)
    target = space.canonical(space.random(1, 0.0, np.random.default_rng(7))[0])   # every free block a permutation
    # (canonical: a block drawn as its own default layout is the default, which is all a search reaches)
    return space, target


class Noisy:
    """A stub that scores every candidate with a fixed pseudo-random value (the default 0), counting rows."""

    def __init__(self, space):
        self.space, self.rows = space, 0

    def __call__(self, node_config_feat):
        self.rows += len(node_config_feat)
        cand = self.space.decode(node_config_feat).reshape(len(node_config_feat), -1).astype(np.int64)
        value = ((cand * np.arange(1, cand.shape[1] + 1)) % 97).sum(axis=1) % 89 / 1000.0 - 0.05   # [B]
        return np.where((cand == 0).all(axis=1), 0.0, value)


@pytest.mark.parametrize("algorithm", ["evolution", "coordinate"])
def test_a_chain_reaches_the_optimum_that_one_guarded_jump_cannot(problem, algorithm):
    space, target = problem
    s = dataclasses.replace(SETTINGS, algorithm=algorithm)
    jump = guarded_pick(space, Stub(space, target), s, 3000, np.random.default_rng(0), BY_DISTANCE, False, 300)
    assert jump.kept and np.count_nonzero(jump.candidate) == 1                   # one block, as far as one jump goes
    stub = Stub(space, target)               # 600 a step: evolution reached the target on 11 of 12 rng seeds (300: 6)
    found = chain_search(space, stub, s, 6000, 600, np.random.default_rng(0), BY_DISTANCE)
    assert found.kept and np.array_equal(found.result.candidate, target)
    assert found.result.score == pytest.approx(-0.08) == pytest.approx(sum(x.gain for x in found.steps))
    assert [x.changed for x in found.steps] == [1] * 8 and all(x.margin == 0.005 for x in found.steps)
    assert found.result.evaluations == stub.rows <= 6000                       # every step's evaluations count


@pytest.mark.parametrize("rule", [Guard(0.1, by_distance=((1, 2, 8), (0.015, 0.03, 0.1))),
                                  Guard(0.1)])                             # one margin: the search ranks by gain
def test_a_step_predicted_better_but_within_the_margin_is_never_taken(problem, rule):
    space, target = problem                                                 # -0.01 per block: never beyond
    pick = guarded_pick(space, Stub(space, target), SETTINGS, 3000, np.random.default_rng(0), rule, True, 300)
    assert not pick.kept and np.array_equal(pick.candidate, space.default()[0]) and pick.score == 0.0
    assert pick.steps == () and len(pick.points) == 1
    assert pick.search.evaluations > 0                                          # searched, found nothing to keep


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_step_of_a_chain_is_one_the_guard_keeps(problem, seed):
    space, _ = problem
    rule = Guard(0.1, by_distance=((1, 2, 4), (0.002, 0.004, 0.02)), max_gain=0.04, max_changed=6)
    stub = Noisy(space)
    found = chain_search(space, stub, SETTINGS, 2000, 200, np.random.default_rng(seed), rule)
    assert found.kept and len(found.points) == len(found.steps) + 1
    scores = stub(space.encode(np.stack(found.points)))                        # the points' own predictions
    for step, start, end, before, after in zip(found.steps, found.points, found.points[1:], scores, scores[1:]):
        assert step.changed == blocks_between(start, end) and step.gain == pytest.approx(after - before)
        assert rule.keeps(step.gain, step.changed) and step.margin == rule.margin_at(step.changed)
    assert np.count_nonzero(found.result.candidate) <= 6 and found.result.score == pytest.approx(scores[-1])
    assert found.result.evaluations <= 2000


def test_a_chain_with_shrinkage_keeps_and_sums_the_scaled_step_gains(problem):
    space, _ = problem
    rule = Guard(0.1, by_distance=((1, 2, 4), (0.001, 0.002, 0.01)), max_gain=0.04, max_changed=6,
                 shrink=(0.5, 0.5, 0.5))
    stub = Noisy(space)
    found = chain_search(space, stub, SETTINGS, 2000, 200, np.random.default_rng(0), rule)
    assert found.kept
    scores = stub(space.encode(np.stack(found.points)))
    for step, before, after in zip(found.steps, scores, scores[1:]):
        assert step.gain == pytest.approx(0.5 * (after - before)) and rule.keeps(after - before, step.changed)
    assert found.result.score == pytest.approx(0.5 * scores[-1])               # the sum of the scaled gains


def test_a_chain_stays_within_max_changed_of_the_default(problem):
    space, target = problem
    rule = dataclasses.replace(BY_DISTANCE, max_changed=3)
    found = chain_search(space, Stub(space, target), SETTINGS, 3000, 300, np.random.default_rng(0), rule)
    assert len(found.steps) == 3 and np.count_nonzero(found.result.candidate) == 3
    assert found.result.score == pytest.approx(-0.03)


def test_the_budget_bounds_the_whole_chain(problem):
    space, target = problem
    stub = Stub(space, target)
    found = chain_search(space, stub, SETTINGS, 250, 100, np.random.default_rng(0), BY_DISTANCE)
    assert found.result.evaluations == stub.rows <= 250 and len(found.steps) <= 3


def test_without_the_chain_the_pick_is_one_guarded_jump(problem):
    space, target = problem
    pick = guarded_pick(space, Stub(space, target), SETTINGS, 3000, np.random.default_rng(0), BY_DISTANCE, False, 1)
    result = run_search(space, Stub(space, target), SETTINGS, 3000, np.random.default_rng(0), rule=BY_DISTANCE)
    assert np.array_equal(pick.candidate, guard(result, space.default()[0], BY_DISTANCE)[0])
    assert pick.steps == () and pick.score == result.score


def test_random_candidates_around_the_default_are_the_space_s_own(problem):
    space, target = problem
    assert np.array_equal(around(space, space.default()[0], 5, 0.5, np.random.default_rng(3)),
                          space.random(5, 0.5, np.random.default_rng(3)))
    near = around(space, target, 200, 0.5, np.random.default_rng(3))            # blocks drawn default keep target's
    free = target != 0                                                          # the kernel blocks: no choice
    assert (near[:, free] != 0).all() and 0 < (near[:, free] == target[free]).mean() < 1
