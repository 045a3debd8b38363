"""Hand-checked helpers of the benchmarks: ties in ranking comparisons (bench_gnn) and the split copies that stage
prune needs (bench_scale)."""
from __future__ import annotations

import numpy as np

from benchmarks.bench_gnn import swapped_pairs
from benchmarks.bench_scale import share_with_every_split
from pipeline.tpugraphs.schema import SPLITS


def test_swapped_pairs_ignores_ties_within_the_tolerance():
    a = np.array([0.0, 1.0, 1.0005, 3.0])
    b = np.array([0.0, 1.0004, 1.0, 3.0])          # swaps configs 1 and 2, whose gap under a is 5e-4
    assert swapped_pairs(a, b, tolerance=1e-3) == 0
    assert swapped_pairs(a, b, tolerance=1e-4) == 1
    assert swapped_pairs(a, a[::-1].copy(), tolerance=0.0) == 6   # reversed: all 4 * 3 / 2 pairs


def test_share_with_every_split_links_the_graph_under_unique_names(tmp_path):
    train = tmp_path / "npz" / "layout" / "train" / "g.npz"
    train.parent.mkdir(parents=True)
    train.write_bytes(b"graph")
    assert share_with_every_split(train) == len(SPLITS) == 3
    copies = sorted(p.relative_to(tmp_path / "npz" / "layout").as_posix() for p in (tmp_path / "npz").rglob("*.npz"))
    assert copies == ["test/g_test.npz", "train/g.npz", "valid/g_valid.npz"]
    assert (train.parent.parent / "valid" / "g_valid.npz").stat().st_ino == train.stat().st_ino   # hard link
