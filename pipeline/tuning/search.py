"""Search algorithms over a `LayoutSpace`, with any scorer as the objective, and the guard.

A scorer maps node_config_feat int8 [B, NC, 18] to float64 [B]: the predicted (or, for the oracle, true) log of
runtime / compiler-default runtime; lower is faster, the default scores 0. `Objective` wraps one: it counts
evaluations (a candidate scored once is cached, repeats are free), scores in batches of `batch`, stops at `budget`
evaluations or `time_limit_s` (candidates past either score +inf; once a batch has been timed, the next is cut to
the rows the time left allows at the rate so far, so one slow batch of a large program does not overrun the limit
by its whole length) and tracks the best candidate. Algorithms:
- `evolution`: start from the default, its single-block mutations and random candidates; then every round,
  `local_share` of a batch mutates the best candidate (local search) and the rest are uniform per-node crossovers
  of two tournament-picked members of the population (the `population` best so far), mutated;
- `local`: evolution with local_share 1 (a batched hill climb from the best);
- `coordinate`: steepest descent: every single-block change of the current candidate (built and scored one batch
  at a time), then the improving changes of distinct blocks combined best first (the first 1..`combos` of them,
  then doubling up to all), the best of all taken; until nothing improves;
- `random`: the budget spent on random candidates (the baseline).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from pipeline.choices import AUTOTUNE_ALGORITHMS
from pipeline.tuning.space import DEFAULT_CHOICE, LayoutSpace

Scorer = Callable[[np.ndarray], np.ndarray]
ALGORITHMS = AUTOTUNE_ALGORITHMS
TOURNAMENT = 2                  # members drawn per tournament (the better one is a parent)
STALLS = 3                      # evolution stops after this many rounds without a new candidate (space exhausted)


@dataclass(frozen=True)
class SearchSettings:
    """The `autotune.search` group."""

    algorithm: str
    batch: int
    population: int
    local_share: float
    mutation_extra: float       # mean number of extra blocks a mutation changes (Poisson)
    random_default_prob: float  # random candidates: each block left default with this probability
    combos: int                 # coordinate: best single changes combined at most
    time_limit_s: float

    @classmethod
    def from_cfg(cls, cfg: Mapping) -> "SearchSettings":
        return cls(str(cfg["algorithm"]), int(cfg["batch"]), int(cfg["population"]), float(cfg["local_share"]),
                   float(cfg["mutation_extra"]), float(cfg["random_default_prob"]), int(cfg["combos"]),
                   float(cfg["time_limit_s"]))


@dataclass(frozen=True)
class SearchResult:
    candidate: np.ndarray       # int16 [NC, 3]
    score: float                # the objective's value of it (log runtime ratio against the default)
    evaluations: int
    seconds: float
    beyond_max_gain: int = 0    # candidates scored that the guard's max_gain refused (predicted faster than any valid
                                # configuration truly was: the model extrapolates on this program)


class Objective:
    """A scorer with a budget, a cache, batching and the best candidate seen (see the module docstring).

    With a guard `rule`, candidates are ranked by what the guard would make of them (`Guard.ranked`): +inf (never
    scored) outside the region or predicted beyond max_gain, else the prediction plus the margin at the candidate's
    distance when the margin goes by distance; the search then seeks the largest gain the guard can vouch for.
    Gain and distance are measured from `origin` (default: the compiler default; a guarded step of a chain,
    `pipeline.tuning.chain`: its current point, already in `predicted`), max_changed from the compiler default.
    `predicted` (the scorer's values by candidate) may be shared between objectives: a candidate in it is never
    scored again. `result().score` is the best candidate's prediction against the compiler default."""

    def __init__(self, space: LayoutSpace, scorer: Scorer, budget: int, batch: int, time_limit_s: float,
                 rule: "Guard | None" = None, origin: np.ndarray | None = None,
                 predicted: dict[bytes, float] | None = None):
        self.space, self.scorer, self.budget, self.batch = space, scorer, int(budget), int(batch)
        self.rule = rule
        self.deadline = time.perf_counter() + float(time_limit_s)
        self.started = time.perf_counter()
        self.origin = space.default()[0] if origin is None else np.asarray(origin, dtype=np.int16)
        self.predicted = {} if predicted is None else predicted                 # the scorer's value, maybe shared
        self.predicted.setdefault(space.default()[0].tobytes(), 0.0)
        self.origin_score = self.predicted[self.origin.tobytes()]
        self.cache: dict[bytes, float] = {self.origin.tobytes(): 0.0}           # ranked value
        self.evaluations, self.beyond_max_gain = 0, 0
        self.best, self.best_score = self.origin.copy(), 0.0

    @property
    def exhausted(self) -> bool:
        return self.evaluations >= self.budget or time.perf_counter() >= self.deadline

    def outside(self, candidate: np.ndarray) -> bool:
        """Never scored: beyond the rule's margins from the origin, or beyond max_changed from the default."""
        if self.rule is None:
            return False
        far = self.rule.max_changed is not None and changed_blocks(candidate) > self.rule.max_changed
        return far or self.rule.penalty(blocks_between(candidate, self.origin)) == np.inf

    def _record(self, key: bytes, row: np.ndarray, score: float) -> None:
        """Rank a scored candidate against the origin (`Guard.ranked` of its gain over the origin)."""
        gain = score - self.origin_score
        if self.rule is None:
            self.cache[key] = gain
        else:
            changed = blocks_between(row, self.origin)
            self.cache[key] = self.rule.ranked(gain, changed)
            self.beyond_max_gain += self.rule.beyond_max_gain(gain, changed)
        if self.cache[key] < self.best_score:
            self.best, self.best_score = row.copy(), self.cache[key]

    def __call__(self, candidates: np.ndarray) -> np.ndarray:
        """float64 [B] scores of candidates [B, NC, 3] (+inf for those the budget or time did not reach), each scored
        in its canonical form (`LayoutSpace.canonical`: a block spelt out as its default is the default)."""
        candidates = self.space.canonical(candidates)
        keys = [c.tobytes() for c in candidates]
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        for key in dict.fromkeys(keys):
            if key in self.cache:
                continue
            if self.outside(candidates[first[key]]):                 # outside the trust region: +inf, never scored
                self.cache[key] = np.inf
            elif key in self.predicted:                              # scored before (another origin): free
                self._record(key, candidates[first[key]], self.predicted[key])
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        lo = 0
        while lo < len(todo):
            now = time.perf_counter()
            room, left_s = self.budget - self.evaluations, self.deadline - now
            if room <= 0 or left_s <= 0:
                break
            if self.evaluations and np.isfinite(left_s):    # rows the time left allows at the rate seen so far
                rate = self.evaluations / max(now - self.started, 1e-9)          # scoring and the search's own work
                room = min(room, max(1, int(left_s * rate)))
            part = todo[lo:lo + min(self.batch, room)]
            lo += len(part)
            rows = candidates[[first[k] for k in part]]
            scores = np.asarray(self.scorer(self.space.encode(rows)), dtype=np.float64)
            self.evaluations += len(part)
            for key, row, score in zip(part, rows, scores):
                self.predicted[key] = float(score)
                self._record(key, row, float(score))
        return np.array([self.cache.get(k, np.inf) for k in keys])

    def result(self) -> SearchResult:
        return SearchResult(self.best, self.predicted[self.best.tobytes()], self.evaluations,
                            time.perf_counter() - self.started, self.beyond_max_gain)


def unique_rows(pop: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct candidates of pop int16 [B, NC, 3] and their scores [B]: each one's first occurrence, in the
    lexicographic order of the rows, as `np.unique(axis=0, return_index=True)` gives them. np.unique sorts the rows
    as records of NC * 3 fields, compared field by field: 16 of a 69 s search on a program of 27,000 blocks. Here
    each row becomes bytes whose memcmp order is that order (big-endian, offset to unsigned), sorted once."""
    flat = pop.reshape(len(pop), -1).astype(np.int32) + 2 ** 15                   # [B, NC * 3], >= 0
    keys = [row.tobytes() for row in flat.astype(">u2")]
    first: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    index = np.array([first[key] for key in sorted(first)], dtype=np.int64)
    return pop[index], scores[index]


def around(space: LayoutSpace, start: np.ndarray, n: int, default_prob: float, rng: np.random.Generator) -> np.ndarray:
    """int16 [n, NC, 3]: `space.random` candidates whose blocks drawn as the default keep start's choice instead
    (start = the default: exactly `space.random`)."""
    draw = space.random(n, default_prob, rng)
    return np.where(draw == DEFAULT_CHOICE, np.asarray(start, dtype=np.int16)[None], draw).astype(np.int16)


def evolution(objective: Objective, s: SearchSettings, rng: np.random.Generator, local_share: float,
              start: np.ndarray) -> None:
    space = objective.space
    n_mut = s.batch // 2
    first = np.concatenate([space.mutate(np.repeat(start[None], n_mut, axis=0), 0.0, rng),
                            around(space, start, s.batch - n_mut - 1, s.random_default_prob, rng)])
    pop = np.concatenate([start[None], first[rng.permutation(len(first))]])   # a small budget gets both
    scores, stalls = objective(pop), 0
    while not objective.exhausted and stalls < STALLS:
        before = objective.evaluations
        order = np.argsort(scores, kind="stable")[:s.population]
        pop, scores = pop[order], scores[order]
        n_local = int(round(s.batch * local_share))
        local = space.mutate(np.repeat(pop[:1], n_local, axis=0), s.mutation_extra, rng)
        n_cross = s.batch - n_local
        picks = rng.integers(len(pop), size=(2, n_cross, TOURNAMENT)).min(axis=2)      # sorted: lower = better
        take_a = rng.random((n_cross, space.n_nodes, 1)) < 0.5                          # per node, all its blocks
        children = space.mutate(np.where(take_a, pop[picks[0]], pop[picks[1]]), s.mutation_extra, rng)
        new = np.concatenate([local, children])
        pop, scores = unique_rows(np.concatenate([pop, new]), np.concatenate([scores, objective(new)]))
        stalls = stalls + 1 if objective.evaluations == before else 0


def prefix_lengths(n: int, combos: int) -> list[int]:
    """How many of the n best single changes each combination takes: 1..combos, then doubling up to all n."""
    lengths = list(range(1, min(n, combos) + 1))
    while lengths[-1] < n:
        lengths.append(min(n, 2 * lengths[-1]))
    return lengths


def single_changes(objective: Objective, current: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """(moves int64 [N, 3], their scores [N]) of every single-block change of `current`, scored `chunk` rows at a
    time (memory chunk x NC x 3, not N x NC x 3); once the objective is exhausted the rest score +inf."""
    moves = objective.space.moves(current)
    scores = np.full(len(moves), np.inf)
    for lo in range(0, len(moves), chunk):
        if objective.exhausted:
            break
        scores[lo:lo + chunk] = objective(objective.space.apply_moves(current, moves[lo:lo + chunk]))
    return moves, scores


def coordinate(objective: Objective, s: SearchSettings, start: np.ndarray) -> None:
    current = np.asarray(start, dtype=np.int16)
    score = float(objective(current[None])[0])
    while not objective.exhausted:
        moves, singles = single_changes(objective, current, s.batch)
        picked, seen = [], set()
        for i in np.argsort(singles, kind="stable"):
            if singles[i] >= score:
                break
            if tuple(moves[i, :2]) not in seen:
                seen.add(tuple(moves[i, :2]))
                picked.append(i)
        if not picked:
            return
        lengths = prefix_lengths(len(picked), s.combos)
        combos = np.repeat(current[None], len(lengths), axis=0)                 # [J, NC, 3]
        for j, length in enumerate(lengths):
            for i in picked[:length]:
                k, b, choice = moves[i]
                combos[j, k, b] = choice
        combo_scores = objective(combos)
        best = int(np.argmin(combo_scores))
        if combo_scores[best] >= score:
            return
        current, score = combos[best], float(combo_scores[best])


def run_search(space: LayoutSpace, scorer: Scorer, s: SearchSettings, budget: int, rng: np.random.Generator,
               algorithm: str | None = None, start: np.ndarray | None = None,
               rule: "Guard | None" = None, origin: np.ndarray | None = None,
               predicted: dict[bytes, float] | None = None) -> SearchResult:
    """The best candidate `algorithm` (default: s.algorithm) finds within `budget` evaluations of `scorer`, ranked
    as the guard `rule` would rank them (`Objective`; None: by prediction alone, anywhere). The ranking is of the
    gain over `origin` (default: the compiler default; a candidate `predicted` holds, which the search then
    shares); the algorithm starts at `start` (default: the origin)."""
    algorithm = algorithm or s.algorithm
    objective = Objective(space, scorer, budget, s.batch, s.time_limit_s, rule, origin, predicted)
    start = objective.origin if start is None else np.asarray(start, dtype=np.int16)
    if algorithm == "evolution":
        evolution(objective, s, rng, s.local_share, start)
    elif algorithm == "local":
        evolution(objective, s, rng, 1.0, start)
    elif algorithm == "coordinate":
        coordinate(objective, s, start)
    elif algorithm == "random":
        objective(around(space, start, budget, s.random_default_prob, rng))
    else:
        raise ValueError(f"search algorithm {algorithm!r}; expected one of {ALGORITHMS}")
    return objective.result()


def changed_blocks(candidate: np.ndarray) -> int:
    """Blocks of candidate [NC, 3] not at the compiler default."""
    return int(np.count_nonzero(candidate))


def blocks_between(a: np.ndarray, b: np.ndarray) -> int:
    """Blocks in which candidates a and b [NC, 3] differ (b the default: `changed_blocks(a)`)."""
    return int(np.count_nonzero(np.asarray(a) != np.asarray(b)))


@dataclass(frozen=True)
class Guard:
    """What a pick must satisfy to be returned (`pipeline.tuning.guard` measures it on the valid split): predicted
    faster than the default by more than the margin, by no more than `max_gain` (None: any), and changing at most
    `max_changed` blocks (None: any), the region where the margin was measured. The margin is `margin`, or with
    `by_distance` ((d_1, d_2, ...), (m_1, m_2, ...)) m_j for a pick changing at most d_j blocks (more than the last
    d: never measured, never kept). With `shrink` (s_1, s_2, ...) beside `by_distance`, a prediction of bin j is
    first scaled by s_j (`calibrated`), the valid moves' slope of true on predicted gains at that distance.
    `measured_blocks` ((opcode id, block, rank), ...): the kinds of block the valid configurations changed; the
    tool and stage search the space `LayoutSpace.only_kinds` of them (None: every block). `min_nodes`: the fewest
    nodes of a pruned valid graph the margins were measured on (None: unknown); `scale` multiplies every margin
    (`for_program`)."""

    margin: float
    max_gain: float | None = None
    max_changed: int | None = None
    by_distance: tuple | None = None
    shrink: tuple | None = None
    measured_blocks: tuple | None = None
    min_nodes: int | None = None
    scale: float = 1.0

    def for_program(self, nodes: int, small_scale: float) -> "Guard":
        """The rule for a program whose pruned graph has `nodes` nodes: margins times `small_scale` when that is
        fewer than `min_nodes`. A layout GNN averages per-node scores, so one change predicts larger the fewer nodes
        a graph has, and margins measured on larger valid graphs understate its error (docs/autotune-log.md,
        "The tool's picks on 110 small JAX programs, timed")."""
        small = self.min_nodes is not None and nodes < self.min_nodes
        return dataclasses.replace(self, scale=float(small_scale) if small else 1.0)

    def _bin(self, changed: int) -> int:
        return int(np.searchsorted(self.by_distance[0], changed, side="left"))

    def margin_at(self, changed: int) -> float:
        if self.by_distance is None:
            return self.scale * self.margin
        j = self._bin(changed)
        return self.scale * float(self.by_distance[1][j]) if j < len(self.by_distance[0]) else np.inf

    def calibrated(self, score: float, changed: int) -> float:
        """The prediction of a candidate changing `changed` blocks, scaled by its bin's `shrink` (if any)."""
        if self.shrink is None or self.by_distance is None or changed == 0:
            return score
        j = self._bin(changed)
        return float(self.shrink[j]) * score if j < len(self.shrink) else score

    def penalty(self, changed: int) -> float:
        """What a search adds to a candidate's prediction: +inf outside the region, the margin at its distance
        when the margin goes by distance, else 0 (the default itself: 0)."""
        if changed == 0:
            return 0.0
        if self.max_changed is not None and changed > self.max_changed:
            return np.inf
        return self.margin_at(changed) if self.by_distance is not None else 0.0

    def beyond_max_gain(self, score: float, changed: int) -> bool:
        """Predicted (calibrated) faster than `max_gain`, the largest gain the valid split truly showed."""
        return self.max_gain is not None and self.calibrated(score, changed) < -self.max_gain

    def ranked(self, score: float, changed: int) -> float:
        """A search's value of a candidate predicted `score` that changes `changed` blocks: the calibrated
        prediction + penalty, +inf when predicted faster than `max_gain` (a gain the valid split never showed is
        refused anyway)."""
        if self.beyond_max_gain(score, changed):
            return np.inf
        return self.calibrated(score, changed) + self.penalty(changed)

    def keeps(self, score: float, changed: int = 0) -> bool:
        score = self.calibrated(score, changed)
        return (score < -self.margin_at(changed) and (self.max_gain is None or score >= -self.max_gain)
                and (self.max_changed is None or changed <= self.max_changed))


def guard(result: SearchResult, default: np.ndarray, rule: Guard) -> tuple[np.ndarray, float, bool]:
    """(candidate, score, kept): the pick when `rule` keeps it, else the default with score 0 and kept False."""
    changed = changed_blocks(result.candidate)
    if rule.keeps(result.score, changed):
        return result.candidate, rule.calibrated(result.score, changed), True
    return np.asarray(default, dtype=np.int16), 0.0, False
