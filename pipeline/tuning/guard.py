"""The guard's margin: the models' prediction error on the valid split, measured by stage autotune, read by the tool.

Per valid graph of a collection, up to `autotune.calibration.configs` configurations (the same rows for every
member) are scored by each member; each member is calibrated on them (`scorers.fit_calibration`), and a model
(ensemble, gnn, lgbm) predicts the log runtime ratio of configuration i against a reference r of the same graph as
dhat = yhat_i - yhat_r, where the truth is d = log t_i - log t_r. The error e = d - dhat says how much slower than
predicted i truly is. The guard keeps a pick only when dhat < -margin, margin = the `guard.error_quantile` quantile
q of e (at least 0): a pick predicted faster by more than the margin is truly faster unless its error is among the
largest 1 - q that the valid split showed.

Reference: layout: every graph's configuration with the fewest non-default blocks (the nearest to the compiler
default that the split holds); tile: every other configuration of the graph (the data do not mark the default tile).
Layout pairs also record their distance (blocks that differ), so the file says whether distance predicts error.

By distance (`guard.by_distance`, the default): a pick is a move of some blocks away from the default, and the
error grows with the blocks a move changes. Every ordered pair of a graph's sampled layout configurations is such a
move (`move_errors`); binned by blocks changed, each bin's margin is the error quantile of its worst graph
(`distance_margins`), so a small change is held to the error of small changes and a far one to that of far ones.
Stage autotune also samples the valid graphs of the source's other layout collections (`pipeline.tuning.evidence`):
a `default` collection's configurations lie a few blocks from the compiler default, where a `random` collection's
do not. With `guard.shrink` (the default) each bin's predictions are first scaled by the slope of true on predicted
gain of its valid moves (`distance_shrinkage`): next to the default the models overrate a move, and the margins are
then measured on the scaled predictions, which the search and the tool use too (`search.Guard.calibrated`).

Stage autotune writes `<models_dir>/autotune/<slug>.json` (`guard_file`) per collection of data.collections; the
tool reads it and refuses, naming the stage, when it is missing or was made on other data settings.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from pipeline.files import read_json
from pipeline.pruned import PrunedGraph
from pipeline.scoring.metrics import average_ranks
from pipeline.tpugraphs.schema import MAX_DIMS
from pipeline.trained import PredictError
from pipeline.tuning.guard_check import check_guard, refuse
from pipeline.tuning.program import with_configs

GUARD_DIR = "autotune"            # <models_dir>/autotune/<slug>.json
STAGE = "autotune"
REPORTED_QUANTILES = (0.5, 0.9, 0.95, 0.99)


@dataclass(frozen=True)
class GuardSettings:
    """The `autotune.guard` group."""

    error_quantile: float        # the margin: this quantile of the valid prediction errors
    by_distance: bool            # the margin at a pick's distance (`distance_margins`) instead of one for all
    min_pairs: int               # pairs per distance bin at least
    siblings: bool               # also measure on the valid graphs of the source's other layout collections
    chain: bool                  # guarded steps from the default (`pipeline.tuning.chain`) instead of one jump
    step_budget: int             # chain: evaluations per step at most
    shrink: bool                 # by distance: scale a bin's predictions by its moves' slope (`distance_shrinkage`)
    measured_blocks: bool        # search only blocks of kinds the valid configurations changed (`changed_kinds`)
    beside_unmeasured: int       # with it: also freeze the nodes this many edges from an unmeasured block (0: none)
    small_program_scale: float   # margins times this for a program that prunes to fewer nodes than any valid graph

    @classmethod
    def from_cfg(cls, cfg: Mapping) -> "GuardSettings":
        return cls(float(cfg["error_quantile"]), bool(cfg["by_distance"]), int(cfg["min_pairs"]),
                   bool(cfg["siblings"]), bool(cfg["chain"]), int(cfg["step_budget"]),
                   bool(cfg["shrink"]), bool(cfg["measured_blocks"]), int(cfg["beside_unmeasured"]),
                   float(cfg["small_program_scale"]))


@dataclass(frozen=True)
class ValidSample:
    """One valid graph's sampled configurations: their features, true log runtimes and every member's raw score."""

    feat: np.ndarray             # [C, NC, 18] int8 (layout) or [C, 24] float32 (tile)
    log_runtime: np.ndarray      # [C] float64
    raw: dict                    # member name -> float64 [C]
    kinds: frozenset = frozenset()   # layout: `changed_kinds` of the graph's sampled rows
    nodes: int = 0               # the pruned graph's nodes

    @cached_property
    def apart(self) -> np.ndarray:
        """int64 [C, C]: `moves_apart` of a layout sample's rows, computed once for every model."""
        return moves_apart(self.feat)


def sample_valid(graphs: Sequence[PrunedGraph], members: Sequence, max_configs: int, batch: int,
                 rng: np.random.Generator) -> list[ValidSample]:
    """Up to max_configs configurations per graph (sorted random rows), scored by every member in batches."""
    samples = []
    for graph in graphs:
        rows = np.sort(rng.permutation(graph.n_kept)[:max_configs])
        feat = np.asarray(graph.config_feat if graph.config_feat is not None else graph.node_config_feat)[rows]
        raw = {m.name: np.concatenate([m.raw(with_configs(graph, feat[lo:lo + batch]))
                                       for lo in range(0, len(rows), batch)]).astype(np.float64) for m in members}
        kinds = changed_kinds(graph.node_opcode[graph.node_config_ids], feat) if feat.ndim == 3 else frozenset()
        samples.append(ValidSample(feat, np.log(np.asarray(graph.config_runtime, dtype=np.float64)[rows]), raw,
                                   kinds, len(graph.node_opcode)))
    return samples


def changed_kinds(opcodes: np.ndarray, node_config_feat: np.ndarray) -> frozenset:
    """The kinds (opcode id, block 0/1/2, rank) of the blocks that differ between some rows of one graph's layout
    configurations [C, NC, 18], opcodes [NC] of its configurable nodes: the moves the valid split measured. A
    block of another kind was never changed there, so its error was never seen: on layout:xla:random (convolutions,
    2-d dots, reshapes) the models predicted a 4-d dot's two blocks 3.3x faster, and the cost model timed them 4%
    slower (docs/autotune-log.md, "Blocks no valid configuration changed")."""
    feat = np.asarray(node_config_feat)
    blocks = feat.reshape(len(feat), feat.shape[1], 3, MAX_DIMS)               # [C, NC, 3, 6]
    ranks = (blocks != -1).sum(axis=3).max(axis=0)                             # [NC, 3]
    varied = (blocks != blocks[:1]).any(axis=(0, 3))                           # [NC, 3]
    return frozenset((int(opcodes[k]), int(b), int(ranks[k, b])) for k, b in np.argwhere(varied & (ranks > 0)))


def non_default_blocks(node_config_feat: np.ndarray) -> np.ndarray:
    """int64 [C]: blocks (output, input, kernel per node) set to an explicit layout, of rows [C, NC, 18]."""
    feat = np.asarray(node_config_feat)
    blocks = feat.reshape(len(feat), feat.shape[1], 3, MAX_DIMS)            # [C, NC, 3, 6]
    return (blocks != -1).any(axis=3).reshape(len(feat), -1).sum(axis=1)


def blocks_apart(node_config_feat: np.ndarray, reference: int) -> np.ndarray:
    """int64 [C]: blocks in which each row [C, NC, 18] differs from row `reference`."""
    feat = np.asarray(node_config_feat)
    blocks = feat.reshape(len(feat), feat.shape[1], 3, MAX_DIMS)            # [C, NC, 3, 6]
    return (blocks != blocks[reference]).any(axis=3).reshape(len(feat), -1).sum(axis=1)


def pair_errors(feat: np.ndarray, log_runtime: np.ndarray, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(errors e = d - dhat, distances) of one graph's pairs (see the module docstring); distance is -1 for tile."""
    y, p = np.asarray(log_runtime, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if np.asarray(feat).ndim == 3:                                           # layout: against the nearest default
        ref = int(np.argmin(non_default_blocks(feat)))
        others = np.arange(len(y)) != ref
        return (y - y[ref] - (p - p[ref]))[others], blocks_apart(feat, ref)[others]
    i, j = np.nonzero(~np.eye(len(y), dtype=bool))                         # tile: every ordered pair
    return y[i] - y[j] - (p[i] - p[j]), np.full(len(i), -1, dtype=np.int64)


def error_margin(errors: np.ndarray, quantile: float) -> float:
    """The guard's margin: the `quantile` of the errors, at least 0 (0 without any pair)."""
    errors = np.asarray(errors, dtype=np.float64)
    return max(0.0, float(np.quantile(errors, quantile))) if len(errors) else 0.0


def moves_apart(node_config_feat: np.ndarray) -> np.ndarray:
    """int64 [C, C]: blocks in which rows i and j of [C, NC, 18] differ. Each block's 6 dimension numbers (-1..5)
    are packed into one int64, then compared one row at a time (memory C x NC x 3)."""
    feat = np.asarray(node_config_feat).astype(np.int8)
    blocks = feat.reshape(len(feat), feat.shape[1] * 3, MAX_DIMS)          # [C, NC * 3, 6]
    padded = np.zeros(blocks.shape[:2] + (8,), dtype=np.int8)              # [C, NC * 3, 8]: 8 bytes per block
    padded[..., :MAX_DIMS] = blocks
    keys = padded.view(np.int64)[..., 0]                                    # [C, NC * 3]
    out = np.zeros((len(feat), len(feat)), dtype=np.int64)
    for i in range(len(feat)):
        out[i] = np.count_nonzero(keys != keys[i], axis=1)
    return out


def move_errors(feat: np.ndarray, log_runtime: np.ndarray, predicted: np.ndarray,
                apart: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(errors, distances) of every move j -> i (ordered pairs i != j) of one layout graph's rows [C, NC, 18]:
    e = (log t_i - log t_j) - (yhat_i - yhat_j), and the blocks the move changes (`apart`, `moves_apart(feat)` when
    not given). A search's pick is such a move (default -> pick); every pair is one, so no single reference's own
    error shifts them all."""
    y, p = np.asarray(log_runtime, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    i, j = np.nonzero(~np.eye(len(y), dtype=bool))
    return y[i] - y[j] - (p[i] - p[j]), (moves_apart(feat) if apart is None else apart)[i, j]


def distance_margins(per_graph: Sequence[tuple[np.ndarray, np.ndarray]], quantile: float,
                     min_pairs: int) -> dict | None:
    """The margin as a step function of the blocks a pick changes, from each graph's (move errors, distances):
    {"upto": [d_1 < d_2 < ...], "margin": [m_1 <= m_2 <= ...]}, m_j for a pick changing at most d_j (and more than
    d_(j-1)) blocks. All pairs sorted by distance are cut into bins of at least `min_pairs` (a distance's pairs stay
    together, a short remainder joins the last bin). m_j is the `quantile` of the errors of the worst graph among
    those with `min_pairs` pairs in bin j (the pooled bin's when none has): a new program is trusted no more than
    the worst valid program; at least 0 and at least every nearer bin's (a farther pick is never trusted more).
    None without pairs."""
    errors = np.concatenate([np.asarray(e, dtype=np.float64) for e, _ in per_graph] or [np.zeros(0)])
    distances = np.concatenate([np.asarray(d, dtype=np.int64) for _, d in per_graph] or [np.zeros(0, np.int64)])
    graph = np.concatenate([np.full(len(e), g) for g, (e, _) in enumerate(per_graph)] or [np.zeros(0, np.int64)])
    order = np.argsort(distances, kind="stable")
    e, d, g = errors[order], distances[order], graph[order]
    if len(e) == 0:
        return None
    upto, margins, lo, running = [], [], 0, 0.0
    while lo < len(e):
        hi = min(len(e), lo + int(min_pairs))
        while hi < len(e) and d[hi] == d[hi - 1]:
            hi += 1
        if len(e) - hi < min_pairs:
            hi = len(e)
        bin_e, bin_g = e[lo:hi], g[lo:hi]
        full = [bin_e[bin_g == k] for k in np.unique(bin_g) if np.count_nonzero(bin_g == k) >= min_pairs]
        worst = max((float(np.quantile(x, quantile)) for x in full), default=float(np.quantile(bin_e, quantile)))
        running = max(running, worst)
        upto.append(int(d[hi - 1]))
        margins.append(running)
        lo = hi
    return {"upto": upto, "margin": margins}


def distance_evidence(errors: np.ndarray, distances: np.ndarray) -> dict | None:
    """Does distance predict error? Spearman correlation of |error| with distance (None when every |error| is the
    same, e.g. a valid graph whose runtimes all tie and a model that scores its configurations alike: no correlation
    is defined, and a NaN would make the guard file invalid JSON), and the error quantile q of the nearer and the
    farther half of the pairs (None for tile or too few pairs)."""
    keep = distances >= 0
    errors, distances = np.asarray(errors)[keep], np.asarray(distances)[keep]
    if len(errors) < 4 or len(np.unique(distances)) < 2:
        return None
    median = float(np.median(distances))
    near, far = errors[distances <= median], errors[distances > median]
    ranks = np.column_stack([average_ranks(np.abs(errors)), average_ranks(distances)])        # [pairs, 2]
    tied = len(np.unique(np.abs(errors))) < 2                       # a constant column: no correlation
    spearman = None if tied else float(np.corrcoef(ranks, rowvar=False)[1, 0])   # as scipy.stats.spearmanr, bit for bit
    return {"spearman_abs_error_distance": spearman,
            "median_distance": median, "max_distance": int(distances.max()),
            "error_q95_near": float(np.quantile(near, 0.95)) if len(near) else None,
            "error_q95_far": float(np.quantile(far, 0.95)) if len(far) else None}


def predictions(samples: Sequence[ValidSample], weights: Mapping[str, float],
                slopes: Mapping[str, float]) -> list[np.ndarray]:
    """A model's predicted log runtimes of each sample: the weighted mean of its calibrated members' scores."""
    return [np.asarray(sum(w * slopes[name] * sample.raw[name] for name, w in weights.items() if w > 0),
                       dtype=np.float64) for sample in samples]


def model_errors(samples: Sequence[ValidSample], weights: Mapping[str, float],
                 slopes: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Pooled (errors, distances) of a model against each graph's reference (`pair_errors`)."""
    errors, distances = [np.zeros(0)], [np.zeros(0, dtype=np.int64)]
    for sample, predicted in zip(samples, predictions(samples, weights, slopes)):
        e, d = pair_errors(sample.feat, sample.log_runtime, predicted)
        errors.append(e)
        distances.append(d)
    return np.concatenate(errors), np.concatenate(distances)


def move_gains(predicted: np.ndarray) -> np.ndarray:
    """float64 [C * (C - 1)]: the gain yhat_j - yhat_i the model predicts for each move j -> i of one graph (the
    order of `move_errors`)."""
    p = np.asarray(predicted, dtype=np.float64)
    i, j = np.nonzero(~np.eye(len(p), dtype=bool))
    return p[j] - p[i]


def distance_shrinkage(per_graph: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
                       upto: Sequence[int]) -> list[float]:
    """Per distance bin (`upto`, the bins of `distance_margins`), from each graph's (true move gains, predicted
    move gains, distances): the least-squares slope through the origin of true on predicted gain, pooled over the
    graphs, clipped to [0, 1]. Near the default the models overrate a move (slopes 0.27-0.92 for one block on the
    built-in valid graphs): the slope says how much of a predicted gain of that distance was real, and a prediction
    is never trusted more than as it comes."""
    true = np.concatenate([np.asarray(t, dtype=np.float64) for t, _, _ in per_graph])
    predicted = np.concatenate([np.asarray(p, dtype=np.float64) for _, p, _ in per_graph])
    j = np.searchsorted(np.asarray(upto), np.concatenate([np.asarray(d) for _, _, d in per_graph]), side="left")
    slopes = []
    for b in range(len(upto)):
        t, p = true[j == b], predicted[j == b]
        power = float(np.dot(p, p))
        slopes.append(float(np.clip(np.dot(t, p) / power, 0.0, 1.0)) if power > 0 else 0.0)
    return slopes


def model_guard(samples: Sequence[ValidSample], weights: Mapping[str, float], slopes: Mapping[str, float],
                quantile: float, min_pairs: int, shrink: bool = False) -> dict:
    """One model's entry of the guard file: weights, margin, margin by distance (`distance_margins`; with `shrink`
    of the predictions scaled per bin, `distance_shrinkage`, stored as "shrink"), pairs, error quantiles, distance
    evidence."""
    errors, distances = model_errors(samples, weights, slopes)
    layout = [(s, predicted) for s, predicted in zip(samples, predictions(samples, weights, slopes))
              if np.asarray(s.feat).ndim == 3]
    moves = [move_errors(s.feat, s.log_runtime, predicted, s.apart) for s, predicted in layout]
    by_distance = distance_margins(moves, quantile, min_pairs) if moves else None
    if by_distance is not None and shrink:
        gains = [move_gains(predicted) for _, predicted in layout]
        # e = true loss + predicted gain g, so the true gain is g - e, and scaling g by s makes the error e - (1 - s) g
        scale = distance_shrinkage([(g - e, g, d) for (e, d), g in zip(moves, gains)], by_distance["upto"])
        unreal = [1.0 - np.take(scale, np.searchsorted(by_distance["upto"], d, side="left")) for _, d in moves]
        scaled = [(e - u * g, d) for (e, d), g, u in zip(moves, gains, unreal)]
        by_distance = {**distance_margins(scaled, quantile, min_pairs), "shrink": scale}
    return {"weights": {k: float(v) for k, v in weights.items()}, "margin": error_margin(errors, quantile),
            "margin_by_distance": by_distance, "pairs": int(len(errors)),
            "error_quantiles": {str(q): float(np.quantile(errors, q)) if len(errors) else None
                                for q in REPORTED_QUANTILES},
            "distance": distance_evidence(errors, distances)}


REGION_KEYS = ("max_gain", "max_changed", "measured_blocks", "min_nodes")   # what `trust_region` measures


def trust_region(samples: Sequence[ValidSample], measured_blocks: bool = False) -> dict:
    """Where the valid split measured the margin, model-independent: `max_changed`, the most blocks a layout
    configuration changed from its graph's reference (None for tile), and `max_gain`, the largest true log
    runtime gain seen: layout over the reference, tile over the compiler default (tile runtimes are normalised by
    the default's; docs/tpugraphs-format.md). A pick beyond either was never checked against the truth. With
    `measured_blocks` (layout) also "measured_blocks": the sorted kinds [opcode id, block, rank] any sample changed
    (`changed_kinds`); a search changes no other block. "min_nodes" (layout; None for tile): the fewest nodes of a
    pruned graph the margins were measured on (`Guard.for_program`)."""
    changed, gains = [0], [0.0]
    for sample in samples:
        y = sample.log_runtime
        if np.asarray(sample.feat).ndim == 3:
            ref = int(np.argmin(non_default_blocks(sample.feat)))
            changed.append(int(blocks_apart(sample.feat, ref).max()))
            gains.append(float(y[ref] - y.min()))
        else:
            gains.append(float(-y.min()))
    layout = any(np.asarray(s.feat).ndim == 3 for s in samples)
    region = {"max_changed": max(changed) if layout else None, "max_gain": max(gains),
              "min_nodes": min(s.nodes for s in samples if np.asarray(s.feat).ndim == 3) if layout else None}
    if layout and measured_blocks:
        region["measured_blocks"] = sorted(list(kind) for kind in frozenset().union(*(s.kinds for s in samples)))
    return region


def guard_file(models_dir: str | Path, slug: str) -> Path:
    """`<models_dir>/autotune/<slug>.json`: a collection's calibrations and guard margins (stage autotune)."""
    return Path(models_dir) / GUARD_DIR / f"{slug}.json"


def read_guard(models_dir: str | Path, slug: str, model: str, fingerprint: str) -> dict:
    """The guard file's entry of `model` plus its member calibrations and region ({"margin", "weights",
    "calibrations", *REGION_KEYS}); a one-line PredictError naming stage autotune when the file is missing, stale,
    lacks the model or holds a key the stage does not write so (`guard_check`)."""
    path = guard_file(models_dir, slug)
    if not path.is_file():
        raise PredictError(f"{path}: missing; run stage {STAGE} first (dvc repro): it measures the guard's margin")
    table = read_json(path)
    if table.get("data_fingerprint") != fingerprint:
        raise PredictError(f"{path}: made on data {table.get('data_fingerprint')!r}, not on this run's "
                           f"{fingerprint!r}; run stage {STAGE} on this data (dvc repro)")
    models = table.get("models", {})
    if not isinstance(models, dict):
        refuse(path, "models", "an object of each model's guard", models)
    entry = models.get(model)
    if not isinstance(entry, dict) or "margin" not in entry:
        raise PredictError(f"{path}: no guard for model {model!r}; run stage {STAGE} (dvc repro)")
    check_guard(path, table, model)        # every key the tool reads, as the stage writes it
    return {**entry, "calibrations": table.get("calibrations", {}), **{key: table.get(key) for key in REGION_KEYS}}
