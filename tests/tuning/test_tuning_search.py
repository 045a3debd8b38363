"""Search on a stub model with a known optimum, the objective's budget and cache, and the guard."""
from __future__ import annotations

import types

import numpy as np
import pytest
from tuning_hlo import DOT_RESHAPE, RESHAPES, space_of

import pipeline.tuning.search as search
from pipeline.tuning.search import Guard, Objective, SearchResult, SearchSettings, guard, run_search

SETTINGS = SearchSettings("evolution", batch=64, population=16, local_share=0.5, mutation_extra=0.5,
                          random_default_prob=0.5, combos=8, time_limit_s=60.0)


class Stub:
    """A separable stub model: 0.01 per block that differs from `target` (the default scored 0), so the unique
    optimum is `target`; counts the rows it scores."""

    def __init__(self, space, target):
        self.space, self.target, self.rows = space, target, 0
        self.base = (space.default()[0] != target).sum()

    def __call__(self, node_config_feat):
        self.rows += len(node_config_feat)
        cand = self.space.decode(node_config_feat)
        return 0.01 * ((cand != self.target[None]).sum(axis=(1, 2)) - self.base)


@pytest.fixture
def problem():
    space = space_of(RESHAPES)
    target = space.canonical(space.random(1, 0.0, np.random.default_rng(7))[0])   # every free block a permutation
    # (canonical: a block drawn as its own default layout is the default, which is all a search reaches)
    return space, target


@pytest.mark.parametrize("algorithm,budget", [("evolution", 3000), ("local", 3000), ("coordinate", 3000)])
def test_search_finds_the_known_optimum_within_the_budget(problem, algorithm, budget):
    space, target = problem
    stub = Stub(space, target)
    result = run_search(space, stub, SETTINGS, budget, np.random.default_rng(0), algorithm=algorithm)
    assert np.array_equal(result.candidate, target)
    assert result.score == pytest.approx(-0.01 * stub.base)
    assert result.evaluations <= budget and stub.rows == result.evaluations


def test_coordinate_descent_builds_single_changes_one_batch_at_a_time(problem, monkeypatch):
    """8 free blocks x 24 other choices = 192 single changes per step: never materialised at once (a real
    program has hundreds of thousands, each a copy of the whole candidate)."""
    space, target = problem
    built = []
    call = Objective.__call__
    monkeypatch.setattr(Objective, "__call__", lambda self, rows: built.append(len(rows)) or call(self, rows))
    result = run_search(space, Stub(space, target), SETTINGS, 3000, np.random.default_rng(0), algorithm="coordinate")
    assert np.array_equal(result.candidate, target)
    assert max(built) <= SETTINGS.batch and len(space.moves(space.default()[0])) > SETTINGS.batch


def test_random_search_spends_exactly_the_budget_and_finds_less(problem):
    space, target = problem
    stub = Stub(space, target)
    result = run_search(space, stub, SETTINGS, 500, np.random.default_rng(0), algorithm="random")
    assert result.evaluations == stub.rows <= 500 and result.evaluations > 450   # repeats are not rescored
    assert result.score > -0.01 * stub.base                               # 25^8 configs: not the optimum


def test_the_budget_stops_every_algorithm(problem):
    space, target = problem
    for algorithm in ("evolution", "local", "coordinate", "random"):
        stub = Stub(space, target)
        result = run_search(space, stub, SETTINGS, 100, np.random.default_rng(0), algorithm=algorithm)
        assert result.evaluations == stub.rows <= 100


def test_guard_never_returns_a_pick_scored_worse_than_the_default(problem):
    space, _ = problem
    default = space.default()[0]
    pick = space.random(1, 0.0, np.random.default_rng(0))[0]
    for score in (0.05, 0.0, -0.001):                                    # worse, equal, inside the margin
        cand, kept_score, kept = guard(SearchResult(pick, score, 10, 0.0), default, Guard(0.002))
        assert np.array_equal(cand, default) and kept_score == 0.0 and not kept
    cand, kept_score, kept = guard(SearchResult(pick, -0.01, 10, 0.0), default, Guard(0.002))
    assert np.array_equal(cand, pick) and kept_score == -0.01 and kept


def test_a_model_that_finds_nothing_better_keeps_the_default(problem):
    space, _ = problem
    worse = lambda feat: 0.1 + 0.01 * (feat != -1).sum(axis=(1, 2))      # every change predicted slower
    result = run_search(space, worse, SETTINGS, 300, np.random.default_rng(0))
    assert np.array_equal(result.candidate, space.default()[0]) and result.score == 0.0
    cand, _, kept = guard(result, space.default()[0], Guard(0.0))
    assert np.array_equal(cand, space.default()[0]) and not kept


@pytest.mark.parametrize("algorithm", ["evolution", "coordinate", "random"])
def test_a_search_stays_in_the_trust_region(problem, algorithm):
    space, target = problem                                              # the optimum changes all 8 blocks
    stub = Stub(space, target)
    result = run_search(space, stub, SETTINGS, 2000, np.random.default_rng(0), algorithm=algorithm,
                        rule=Guard(0.0, max_changed=2))
    assert np.count_nonzero(result.candidate) <= 2 and stub.rows == result.evaluations
    assert (stub.space.decode(stub.space.encode(result.candidate[None])) != 0).sum() <= 2
    if algorithm != "random":                                            # the best two changes are found
        assert result.score == pytest.approx(-0.02)
    cand, _, kept = guard(result, space.default()[0], Guard(0.0, max_changed=1))   # outside a smaller region
    assert np.array_equal(cand, space.default()[0]) and not kept


def test_a_search_counts_the_candidates_predicted_beyond_max_gain(problem):
    """The stub predicts a gain of 0.01 per block set as the optimum sets it; max_gain 0.015 refuses every candidate
    with two or more such blocks (+inf, never picked) and counts it: the tool's note that the model extrapolates."""
    space, target = problem
    rule = Guard(0.0, max_gain=0.015)
    result = run_search(space, Stub(space, target), SETTINGS, 1000, np.random.default_rng(0), rule=rule)
    assert result.score == pytest.approx(-0.01)                          # the best gain under the cap: one block
    assert 0 < result.beyond_max_gain < result.evaluations
    assert run_search(space, Stub(space, target), SETTINGS, 1000, np.random.default_rng(0),
                      rule=Guard(0.0)).beyond_max_gain == 0


@pytest.mark.parametrize("algorithm", ["evolution", "coordinate"])
def test_a_search_by_distance_finds_the_gain_the_guard_can_vouch_for(problem, algorithm):
    space, target = problem                              # -0.01 per block changed towards target, 8 blocks at most
    rule = Guard(0.1, by_distance=((1, 2, 8), (0.005, 0.03, 0.1)))
    # what the guard keeps: 1 block: -0.01 + 0.005 < 0; 2 blocks: -0.02 + 0.03 > 0; all 8: -0.08 + 0.1 > 0
    plain = run_search(space, Stub(space, target), SETTINGS, 3000, np.random.default_rng(0), algorithm=algorithm)
    assert np.array_equal(plain.candidate, target)
    assert not guard(plain, space.default()[0], rule)[2]                 # the model's best: refused
    result = run_search(space, Stub(space, target), SETTINGS, 3000, np.random.default_rng(0), algorithm=algorithm,
                        rule=rule)
    assert np.count_nonzero(result.candidate) == 1 and result.score == pytest.approx(-0.01)
    cand, score, kept = guard(result, space.default()[0], rule)
    changed = cand != 0
    assert kept and score == pytest.approx(-0.01) and (cand[changed] == target[changed]).all()


def test_a_program_smaller_than_every_valid_graph_gets_wider_margins(problem):
    space, target = problem                              # -0.01 per block changed towards target
    rule = Guard(0.1, by_distance=((1, 2, 8), (0.005, 0.03, 0.1)), min_nodes=20)
    assert rule.for_program(20, 4.0).scale == 1.0 and rule.for_program(19, 4.0).scale == 4.0
    assert Guard(0.1).for_program(1, 4.0).scale == 1.0                   # min_nodes unknown: as measured
    small = rule.for_program(5, 4.0)
    assert small.margin_at(1) == pytest.approx(0.02) and small.margin_at(2) == pytest.approx(0.12)
    assert small.margin_at(9) == np.inf and Guard(0.1, scale=3.0).margin_at(5) == pytest.approx(0.3)
    # one block gains 0.01: beyond the measured margin (0.005), within four times it (0.02): the default is kept
    for algorithm in ("evolution", "coordinate"):
        kept = run_search(space, Stub(space, target), SETTINGS, 3000, np.random.default_rng(0), algorithm=algorithm,
                          rule=rule.for_program(20, 4.0))
        assert guard(kept, space.default()[0], rule.for_program(20, 4.0))[2]
        refused = run_search(space, Stub(space, target), SETTINGS, 3000, np.random.default_rng(0),
                             algorithm=algorithm, rule=small)
        assert not guard(refused, space.default()[0], small)[2]


class Pinning:
    """A model that believes pinning a block to the layout the compiler gives it anyway saves 1 per block (what a
    model reading the "was default" flags can learn); records every row it scores."""

    def __init__(self, space):
        self.space, self.seen = space, []

    def __call__(self, node_config_feat):
        cand = self.space.decode(node_config_feat)
        self.seen.append(cand)
        spelt = (cand == self.space.default_choices[None]) & (self.space.default_choices[None] > 0)
        return -1.0 * spelt.sum(axis=(1, 2))


@pytest.mark.parametrize("algorithm", ["evolution", "coordinate"])
def test_a_block_spelt_out_as_its_default_is_never_scored_apart_from_the_default(algorithm):
    space = space_of(RESHAPES)
    model = Pinning(space)
    found = run_search(space, model, SETTINGS, 500, np.random.default_rng(0), algorithm=algorithm)
    seen = np.concatenate(model.seen)                              # [rows, NC, 3]
    assert len(seen) and np.array_equal(space.canonical(seen), seen)
    assert found.score == 0.0 and np.array_equal(found.candidate, space.default()[0])


@pytest.mark.parametrize("algorithm", ["evolution", "coordinate", "random"])
def test_a_search_on_measured_kinds_never_changes_a_frozen_block(algorithm):
    space = space_of(DOT_RESHAPE)                                  # dot.3, reshape.5: row-major (choice 2) by default
    target = np.array([[1, 1, 0], [1, 1, 0]], dtype=np.int16)      # every block column-major: 0.01 each
    narrow = space.only_kinds([space.kinds[1][0], space.kinds[1][1]])   # the reshape's kinds only: the dot frozen
    stub = Stub(narrow, target)
    scored = []
    counted = lambda feat: (scored.append(narrow.decode(feat)), stub(feat))[1]   # noqa: E731
    found = run_search(narrow, counted, SETTINGS, 300, np.random.default_rng(0), algorithm=algorithm)
    seen = np.concatenate(scored)                                  # [rows, NC, 3]
    assert (seen[:, 0] == 0).all() and (seen[:, 1] != 0).any()     # the dot never scored changed, the reshape was
    assert found.candidate.tolist() == [[0, 0, 0], [1, 1, 0]]      # the optimum of what may change
    free = run_search(space, Stub(space, target), SETTINGS, 300, np.random.default_rng(0), algorithm=algorithm)
    assert free.candidate.tolist() == target.tolist()              # unfrozen, the dot changes too


def test_a_slow_scorer_stops_at_the_time_limit_not_a_batch_later(problem, monkeypatch):
    """Once a batch has been timed, the next is cut to the rows the time left allows (a fake clock: 1 s per row)."""
    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(search, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    space, target = problem
    stub = Stub(space, target)

    def slow(node_config_feat):
        clock.now += float(len(node_config_feat))
        return stub(node_config_feat)

    objective = Objective(space, slow, budget=1000, batch=4, time_limit_s=10.0)
    candidates = np.unique(space.canonical(space.random(60, 0.3, np.random.default_rng(0))), axis=0)
    assert len(candidates) > 12
    scores = objective(candidates)
    assert objective.evaluations == 10 and clock.now == 10.0           # 4 + 4 + 2 rows: not 12 rows, 12 s
    assert np.isfinite(scores).sum() == 10


def test_unique_rows_keeps_what_numpy_unique_keeps_in_its_order():
    rng = np.random.default_rng(3)
    pop = rng.integers(-2, 3, size=(400, 5, 3)).astype(np.int16)     # [B, NC, 3], many repeated rows
    pop[7], pop[300] = pop[2], pop[2]
    scores = rng.random(400)
    _, first = np.unique(pop.reshape(len(pop), -1), axis=0, return_index=True)
    rows, kept = search.unique_rows(pop, scores)
    assert np.array_equal(rows, pop[first]) and np.array_equal(kept, scores[first])
    assert len(rows) < len(pop) and 7 not in first and 300 not in first
    assert search.unique_rows(pop[:1], scores[:1])[0].shape == (1, 5, 3)
