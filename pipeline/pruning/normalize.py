"""Node-feature normalisation fitted on the train split only, saved as `normalizer.json` by stage `prune`.

Transform of the re-padded `node_feat_raw` [nodes, 140]:
1. columns whose name matches one of `log_columns` (fnmatch patterns over `schema.NODE_FEAT_NAMES`, e.g.
   `*_sum`, `*_product`, `shape_dimensions_*`) get `sign(x) * log1p(|x|)` (defined for the -1 padding too);
2. every column is standardised with the mean and standard deviation of the train nodes (after step 1), the
   deviation floored at `min_std`: a column almost constant on train (a rare window, a grouped convolution) would
   otherwise put an unseen value tens of deviations out (a feature_group_count of 64 at z = 90); with the floor,
   one unit is at least `min_std` of the (logged) value, so values beyond train grow as their logs, never explode;
3. columns that are constant on train (min == max) are dropped.
`node_opcode` is not a feature column: it stays an integer id for embeddings.

Statistics are gathered per graph (`ColumnStats.of`) and merged in a fixed order (Chan et al.'s pairwise
update), so the fitted normaliser does not depend on the number of workers.
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from pipeline.errors import PipelineError, shortened
from pipeline.files import is_number, read_json, write_text
from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.schema import NODE_FEAT_DIM, NODE_FEAT_NAMES

# Standardised values beyond this many train deviations are refused as bad input: no node of a real program lies
# there (binary columns one node in 10^7 sets stay under 10^4; `min_std` keeps values beyond train near their logs),
# and the models square their inputs' transforms (instance norm), which overflows float32 far below float32's range.
MAX_STANDARDISED = 1.0e6


def log_mask(patterns: Sequence[str], names: Sequence[str] = NODE_FEAT_NAMES) -> np.ndarray:
    """bool [len(names)]: the columns whose name matches any fnmatch pattern (the schema refuses a pattern that
    matches none, `prune.normalize.log_columns`)."""
    mask = np.zeros(len(names), dtype=bool)
    for pattern in patterns:
        mask |= np.array([fnmatch.fnmatchcase(name, pattern) for name in names])
    return mask


def signed_log(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """float64 copy of x [nodes, cols] with sign(x) * log1p(|x|) applied to the columns in mask."""
    out = np.asarray(x, dtype=np.float64).copy()
    out[:, mask] = np.sign(out[:, mask]) * np.log1p(np.abs(out[:, mask]))
    return out


@dataclass
class ColumnStats:
    """Per-column count, mean, sum of squared deviations (m2), min and max; mergeable."""

    count: int
    mean: np.ndarray   # [cols] float64
    m2: np.ndarray     # [cols] float64
    min: np.ndarray    # [cols] float64
    max: np.ndarray    # [cols] float64

    @classmethod
    def empty(cls, n_cols: int = NODE_FEAT_DIM) -> "ColumnStats":
        return cls(0, np.zeros(n_cols), np.zeros(n_cols), np.full(n_cols, np.inf), np.full(n_cols, -np.inf))

    @classmethod
    def of(cls, x: np.ndarray) -> "ColumnStats":
        """Statistics of the rows of x [rows, cols]."""
        x = np.asarray(x, dtype=np.float64)
        if len(x) == 0:
            return cls.empty(x.shape[1])
        mean = x.mean(axis=0)
        return cls(len(x), mean, ((x - mean) ** 2).sum(axis=0), x.min(axis=0), x.max(axis=0))

    def merge(self, other: "ColumnStats") -> "ColumnStats":
        """Statistics of the union of both row sets."""
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / n)
        m2 = self.m2 + other.m2 + delta ** 2 * (self.count * other.count / n)
        return ColumnStats(n, mean, m2, np.minimum(self.min, other.min), np.maximum(self.max, other.max))

    @classmethod
    def combine(cls, parts: Iterable["ColumnStats"], n_cols: int = NODE_FEAT_DIM) -> "ColumnStats":
        total = cls.empty(n_cols)
        for part in parts:
            total = total.merge(part)
        return total


@dataclass
class Normalizer:
    """Fitted transform from node_feat_raw [nodes, 140] to node_feat [nodes, len(columns)]."""

    columns: list[int]       # kept node_feat column indices (not constant on train), ascending
    log: list[bool]          # per kept column: signed log before standardising
    mean: list[float]        # per kept column, train mean after the log step
    std: list[float]         # per kept column, train standard deviation after the log step (> 0)
    pad_value: float         # the re-padding value the statistics were computed with
    train_nodes: int         # train nodes the statistics come from

    @property
    def names(self) -> list[str]:
        return [NODE_FEAT_NAMES[c] for c in self.columns]

    def apply(self, node_feat_raw: np.ndarray, where: str | Path) -> np.ndarray:
        """float32 [nodes, len(columns)]: log step, then (x - mean) / std, on the kept columns.

        Raises:
            TpuGraphsFormatError: naming `where` (the graph's file), when a value (finite, but far beyond the train
                range of a column that is not logged) standardises past MAX_STANDARDISED deviations.
        """
        cols = np.asarray(self.columns, dtype=np.int64)
        x = np.asarray(node_feat_raw, dtype=np.float64)[:, cols]   # [nodes, kept columns]
        log = np.asarray(self.log, dtype=bool)
        x[:, log] = np.sign(x[:, log]) * np.log1p(np.abs(x[:, log]))
        with np.errstate(over="ignore", invalid="ignore"):
            out = ((x - np.asarray(self.mean)) / np.asarray(self.std)).astype(np.float32)
        bad = ~(np.abs(out) <= MAX_STANDARDISED)                    # inf and NaN too
        if bad.any():
            node, k = (int(i) for i in np.argwhere(bad)[0])
            raw = np.asarray(node_feat_raw)[node, self.columns[k]]
            raise TpuGraphsFormatError(where, "node_feat", f"values that standardise within {MAX_STANDARDISED:g} train "
                                       f"deviations (column "
                                       f"'{self.names[k]}': train mean {self.mean[k]:.6g}, std {self.std[k]:.6g})",
                                       f"{raw:.6g} at node {node} ({int(bad.sum())} such values)")
        return out

    def to_dict(self) -> dict:
        return {"columns": self.columns, "names": self.names, "log": self.log, "mean": self.mean,
                "std": self.std, "pad_value": self.pad_value, "train_nodes": self.train_nodes}

    def save(self, path: str | Path) -> None:
        """Write normalizer.json atomically (sorted keys, deterministic)."""
        write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n", path)

    @classmethod
    def load(cls, path: str | Path) -> "Normalizer":
        """The normaliser stage prune saved; PipelineError naming the file and the key when it is not one (cut
        short, edited: a JSONDecodeError, TypeError or IndexError traceback in the commands that read it before)."""
        data = read_json(path)
        data.pop("names", None)
        columns = data.get("columns")
        checks = {"columns": isinstance(columns, list) and all(isinstance(c, int) and not isinstance(c, bool)
                                                               for c in columns)
                  and columns == sorted(set(columns)) and all(0 <= c < NODE_FEAT_DIM for c in columns)}
        size = len(columns) if checks["columns"] else -1
        for key, ok in (("log", lambda v: isinstance(v, bool)), ("mean", is_number),
                        ("std", lambda v: is_number(v) and v > 0)):
            value = data.get(key)
            checks[key] = isinstance(value, list) and len(value) == size and all(ok(v) for v in value)
        checks["pad_value"] = is_number(data.get("pad_value"))
        checks["train_nodes"] = isinstance(data.get("train_nodes"), int) and data["train_nodes"] >= 0
        expected = {"columns": f"ascending distinct node_feat columns 0..{NODE_FEAT_DIM - 1}",
                    "log": "a true/false per column", "mean": "a finite number per column",
                    "std": "a number > 0 per column", "pad_value": "a finite number", "train_nodes": "a count"}
        for key, ok in checks.items():
            if not ok or isinstance(data.get(key), bool):
                raise PipelineError(f"{path}: key {key!r}: expected {expected[key]}; found "
                                    f"{shortened(data.get(key))}; run stage prune again (dvc repro)")
        extra = sorted(set(data) - set(expected))
        if extra:
            raise PipelineError(f"{path}: keys {extra} unknown; expected the normaliser stage prune writes "
                                f"({sorted(expected)}); run stage prune again (dvc repro)")
        return cls(**data)


def fit_normalizer(stats: ColumnStats, mask: np.ndarray, pad_value: float, drop_constant: bool = True,
                   where: str = "train", min_std: float = 0.0) -> Normalizer:
    """Normaliser from train statistics gathered on `signed_log(node_feat_raw, mask)`.

    Args:
        stats: merged ColumnStats of the train nodes (after the log step).
        mask: bool [140], the log columns.
        pad_value: the re-padding value used (recorded).
        drop_constant: drop the columns constant on train; when False they are kept and only centred (std 1).
        where: names the data in the error raised when there are no train nodes.
        min_std: floor of the standard deviation each column is divided by (0 = the plain train deviation).
    """
    if stats.count == 0:
        raise ValueError(f"{where}: no train nodes to fit the node_feat normaliser on")
    constant = ~(stats.max > stats.min)
    keep = np.flatnonzero(~constant) if drop_constant else np.arange(len(stats.mean))
    std = np.where(constant[keep], 1.0, np.maximum(np.sqrt(stats.m2[keep] / stats.count), min_std))
    return Normalizer(columns=[int(c) for c in keep], log=[bool(mask[c]) for c in keep],
                      mean=[float(v) for v in stats.mean[keep]], std=[float(v) for v in std],
                      pad_value=float(pad_value), train_nodes=int(stats.count))
