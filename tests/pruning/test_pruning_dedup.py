"""Streamed config de-duplication: one row per distinct config across chunk boundaries, aggregates, npy writer."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.pruning.dedup import aggregate, dedup_chunks, identity_dedup, relative_spread

# 7 configs of 2 nodes x 3 features; rows 3 and 6 repeat row 0, row 5 repeats row 1.
ROWS = np.array([[[0, 1, -1], [2, 2, 2]],
                 [[1, 0, -1], [2, 2, 2]],
                 [[0, 1, -1], [2, 2, 3]],
                 [[0, 1, -1], [2, 2, 2]],
                 [[-1, -1, -1], [-1, -1, -1]],
                 [[1, 0, -1], [2, 2, 2]],
                 [[0, 1, -1], [2, 2, 2]]], np.int8)
RUNTIME = np.array([10, 20, 30, 16, 50, 26, 4], np.int64)


def chunked(rows: np.ndarray, size: int):
    return ((s, rows[s:s + size]) for s in range(0, len(rows), size))


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 100])
def test_one_row_per_distinct_config_across_chunks(chunk):
    received = []
    d = dedup_chunks(chunked(ROWS, chunk), len(ROWS), sink=received.append)
    assert d.first.tolist() == [0, 1, 2, 4]
    assert d.inverse.tolist() == [0, 1, 2, 0, 3, 1, 0]
    assert d.count.tolist() == [3, 2, 1, 1]
    assert np.array_equal(np.concatenate(received), ROWS[[0, 1, 2, 4]])   # kept rows in order, each once
    assert np.array_equal(ROWS[d.first][d.inverse], ROWS)                 # the inverse map reconstructs all rows


def test_min_and_mean_aggregates():
    d = dedup_chunks(chunked(ROWS, 2), len(ROWS))
    assert aggregate(RUNTIME, d, "min").tolist() == [4, 20, 30, 50]
    assert aggregate(RUNTIME, d, "mean").tolist() == [10.0, 23.0, 30.0, 50.0]


def test_relative_spread_of_repeated_configs():
    d = dedup_chunks(chunked(ROWS, 3), len(ROWS))
    # rows 0, 3, 6 ran 10, 16, 4 ns: 16 / 4 - 1 = 3; rows 1, 5 ran 20, 26: 26 / 20 - 1 = 0.3; rows 2, 4 once
    assert relative_spread(RUNTIME, d).tolist() == pytest.approx([3.0, 0.3])
    assert relative_spread(np.where(np.arange(7) == 6, 0, RUNTIME), d).tolist() == pytest.approx([0.3])  # min 0
    assert relative_spread(RUNTIME, identity_dedup(7)).size == 0


def test_identity_and_random_rows_against_numpy_unique():
    d = identity_dedup(4)
    assert d.inverse.tolist() == d.first.tolist() == [0, 1, 2, 3] and d.count.tolist() == [1] * 4
    rng = np.random.default_rng(1)
    rows = rng.integers(-1, 1, size=(500, 3, 2)).astype(np.int8)        # 64 possible rows: many duplicates
    d = dedup_chunks(chunked(rows, 37), len(rows))
    _, first = np.unique(rows.reshape(len(rows), -1), axis=0, return_index=True)
    assert d.first.tolist() == sorted(first.tolist())
    assert np.array_equal(rows[d.first][d.inverse], rows) and d.count.sum() == len(rows)


def test_tile_float_rows_and_zero_width_rows():
    feat = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.5]], np.float32)
    assert dedup_chunks([(0, feat)], 3).inverse.tolist() == [0, 0, 1]
    empty = np.zeros((3, 0, 18), np.int8)
    d = dedup_chunks([(0, empty)], 3)
    assert d.first.tolist() == [0] and d.count.tolist() == [3]


def test_chunk_order_is_checked():
    with pytest.raises(ValueError, match="chunk starts at row 2, expected 0"):
        dedup_chunks([(2, ROWS[2:])], len(ROWS))
    with pytest.raises(ValueError, match="expected 7"):
        dedup_chunks([(0, ROWS[:3])], len(ROWS))
