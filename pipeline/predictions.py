"""The predictions contract shared by every model stage (heuristic, lgbm, gnn, ensemble).

Per model, collection and split one file `<predictions_dir>/<model>/<collection slug>/<split>.npz` holds, for every
graph of that split and every configuration index of the *original* npz file, one float score.
**Lower score = predicted faster.** `ensemble` and `submit` read nothing else.

File layout (no pickled objects): `graph_id` [G] unicode, `offsets` [G+1] int64, `scores` [sum C_g] float64;
graph g's scores are `scores[offsets[g]:offsets[g+1]]`, indexed by the original config index.
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from pipeline.errors import PipelineError, clipped
from pipeline.files import atomic_path


@dataclass
class Predictions:
    """Scores per graph, in the original config order; lower = predicted faster."""

    scores: dict[str, np.ndarray] = field(default_factory=dict)

    def __setitem__(self, graph_id: str, scores: np.ndarray) -> None:
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)  # [configs]
        if not np.all(np.isfinite(scores)):
            raise ValueError(f"predictions for graph {graph_id!r} contain NaN or inf")
        self.scores[graph_id] = scores

    def __getitem__(self, graph_id: str) -> np.ndarray:
        return self.scores[graph_id]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.scores))

    def __len__(self) -> int:
        return len(self.scores)

    def items(self):
        return ((g, self.scores[g]) for g in self)

    def check_covers(self, n_configs: Mapping[str, int], where: str = "predictions") -> None:
        """Raise ValueError unless there is exactly one score per config for exactly these graphs."""
        missing = sorted(set(n_configs) - set(self.scores))
        extra = sorted(set(self.scores) - set(n_configs))
        wrong = [f"{g}: {len(self.scores[g])} scores for {n} configs"
                 for g, n in sorted(n_configs.items()) if g in self.scores and len(self.scores[g]) != n]
        problems = ([f"missing graphs {missing}"] if missing else []) + \
                   ([f"unknown graphs {extra}"] if extra else []) + wrong
        if problems:
            raise ValueError(f"{where}: " + "; ".join(problems))


def predictions_path(predictions_dir: str | Path, model: str, collection_slug: str, split: str) -> Path:
    """Where a model's predictions for one collection and split live."""
    return Path(predictions_dir) / model / collection_slug / f"{split}.npz"


def save_predictions(preds: Predictions, path: str | Path) -> None:
    """Write atomically (temp file + rename), so a crash never leaves a half-written file."""
    graph_ids = list(preds)
    lengths = [len(preds[g]) for g in graph_ids]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # [graphs + 1]
    scores = np.concatenate([preds[g] for g in graph_ids]) if graph_ids else np.zeros(0)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, graph_id=np.array(graph_ids, dtype=np.str_), offsets=offsets, scores=scores.astype(np.float64))


def load_predictions(path: str | Path) -> Predictions:
    """Read a predictions file written by `save_predictions`; anything else (not an npz, keys or offsets that do
    not fit, NaN scores) is a PipelineError naming the file (a ValueError traceback until 2026-12-08)."""
    path = Path(path)
    what = "a predictions file (npz of graph_id, offsets, scores, as the model stages write it)"
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [key for key in ("graph_id", "offsets", "scores") if key not in z.files]
            if missing:
                raise PipelineError(f"{path}: expected {what}; found no key {missing[0]!r}")
            graph_ids, offsets, scores = z["graph_id"], z["offsets"], z["scores"]
        if len(offsets) != len(graph_ids) + 1 or offsets[0] != 0 or offsets[-1] != len(scores) \
                or np.any(np.diff(offsets) < 0):
            raise PipelineError(f"{path}: expected {what}; found offsets {clipped(str(offsets.tolist()), 60)} that "
                                f"do not cut {len(scores)} scores into {len(graph_ids)} graphs")
        if len(set(graph_ids.tolist())) != len(graph_ids):
            raise PipelineError(f"{path}: expected {what}; found a graph_id twice")
        preds = Predictions()
        for g, start, stop in zip(graph_ids, offsets[:-1], offsets[1:]):
            preds[str(g)] = scores[start:stop]
    except (PipelineError, FileNotFoundError):          # FileNotFoundError: run_main names the missing file
        raise
    except (ValueError, TypeError, OSError, EOFError, zipfile.BadZipFile) as error:   # numpy's, zipfile's, NaN scores
        found = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PipelineError(f"{path}: expected {what}; found {clipped(found, 120)}") from None
    return preds
