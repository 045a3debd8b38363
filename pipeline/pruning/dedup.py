"""Streamed de-duplication of configuration rows, and aggregation of their runtimes.

Rows arrive in chunks `(start, rows)` in file order (e.g. `Graph.iter_node_config_feat(chunk_size)`).
Within a chunk identical rows are found exactly with `np.unique` on a void view; across chunks each distinct
row is remembered by a 128-bit BLAKE2b digest of its bytes, so memory is O(chunk + distinct rows * 16 bytes),
never O(configs * row size). Kept rows are the first occurrences, in original order: kept row k is the k-th
distinct row met. `sink` receives each chunk's new distinct rows as they are found, so the kept rows can be
written to disk in one pass (see `pipeline.tpugraphs.npy.NpyStreamWriter`).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from pipeline.choices import PRUNE_DEDUP_MODES

DIGEST_BYTES = 16
DEDUP_MODES = PRUNE_DEDUP_MODES


@dataclass(frozen=True)
class Dedup:
    """Which original rows collapse into which kept row."""

    inverse: np.ndarray   # [configs] int64, kept row of each original row
    first: np.ndarray     # [kept] int64, original index of each kept row (ascending)
    count: np.ndarray     # [kept] int64, original rows merged into each kept row

    @property
    def n_kept(self) -> int:
        return len(self.first)


def identity_dedup(n_rows: int) -> Dedup:
    """No de-duplication (test split): every row kept, in order."""
    rows = np.arange(n_rows, dtype=np.int64)
    return Dedup(inverse=rows, first=rows.copy(), count=np.ones(n_rows, dtype=np.int64))


def dedup_chunks(chunks: Iterable[tuple[int, np.ndarray]], n_rows: int,
                 sink: Callable[[np.ndarray], None] | None = None) -> Dedup:
    """De-duplicate rows streamed in chunks.

    Args:
        chunks: `(start, rows)` in order, `rows` [chunk, ...] of one fixed shape and dtype; starts contiguous from 0.
        n_rows: total rows across the chunks.
        sink: called with `rows[new]` [new rows, ...] for each chunk that holds rows not seen before.

    Returns:
        Dedup over the n_rows rows.
    """
    seen: dict[bytes, int] = {}
    first: list[int] = []
    inverse = np.empty(n_rows, dtype=np.int64)
    expected = 0
    for start, rows in chunks:
        if start != expected:
            raise ValueError(f"dedup_chunks: chunk starts at row {start}, expected {expected}")
        n = len(rows)
        if expected + n > n_rows:
            raise ValueError(f"dedup_chunks: chunks hold more than the announced {n_rows} rows")
        flat = np.ascontiguousarray(rows).reshape(n, -1)   # [chunk, row bytes / itemsize]
        width = flat.shape[1] * flat.dtype.itemsize
        if width == 0:      # zero-width rows are all identical
            unique_index, local_inverse = np.zeros(min(n, 1), dtype=np.int64), np.zeros(n, dtype=np.int64)
        else:
            void = flat.view(np.dtype((np.void, width))).ravel()   # [chunk], one opaque item per row
            _, unique_index, local_inverse = np.unique(void, return_index=True, return_inverse=True)
        order = np.argsort(unique_index, kind="stable")      # distinct rows by first position in the chunk
        local_to_kept = np.empty(len(unique_index), dtype=np.int64)
        new_positions = []
        for u in order:
            position = int(unique_index[u])
            key = hashlib.blake2b(flat[position].tobytes(), digest_size=DIGEST_BYTES).digest()
            kept = seen.get(key)
            if kept is None:
                kept = seen[key] = len(first)
                first.append(start + position)
                new_positions.append(position)
            local_to_kept[u] = kept
        inverse[start:start + n] = local_to_kept[np.asarray(local_inverse).reshape(-1)]
        if sink is not None and new_positions:
            sink(rows[np.asarray(new_positions)])
        expected += n
    if expected != n_rows:
        raise ValueError(f"dedup_chunks: chunks held {expected} rows, expected {n_rows}")
    first_array = np.asarray(first, dtype=np.int64)
    return Dedup(inverse=inverse, first=first_array,
                 count=np.bincount(inverse, minlength=len(first_array)).astype(np.int64))


def _group_min(values: np.ndarray, dedup: Dedup) -> np.ndarray:
    out = np.full(dedup.n_kept, np.inf)
    np.minimum.at(out, dedup.inverse, values)
    return out


def _group_mean(values: np.ndarray, dedup: Dedup) -> np.ndarray:
    return np.bincount(dedup.inverse, weights=values, minlength=dedup.n_kept) / dedup.count


AGGREGATES = dict(zip(DEDUP_MODES, (_group_min, _group_mean)))    # prune.dedup (the schema checked the name)


def aggregate(values: np.ndarray, dedup: Dedup, how: str) -> np.ndarray:
    """float64 [kept]: `values` [configs] aggregated over each kept row's duplicates by `how` (min | mean)."""
    return AGGREGATES[how](np.asarray(values, dtype=np.float64), dedup)


def relative_spread(values: np.ndarray, dedup: Dedup) -> np.ndarray:
    """float64 [groups]: max / min - 1 of `values` [configs] over each kept row that stands for >= 2 identical
    configurations (kept-row order), i.e. how far repeated measurements of one configuration lie apart. Groups
    whose minimum is not positive carry no relative spread and are left out."""
    values = np.asarray(values, dtype=np.float64)
    low, high = np.full(dedup.n_kept, np.inf), np.full(dedup.n_kept, -np.inf)
    np.minimum.at(low, dedup.inverse, values)
    np.maximum.at(high, dedup.inverse, values)
    repeated = (dedup.count >= 2) & (low > 0)
    return high[repeated] / low[repeated] - 1.0

