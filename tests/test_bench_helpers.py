"""Hand-checked helpers of the benchmarks: ties in ranking comparisons and the inference table against the matmul
bound (bench_gnn), the split copies that stage prune needs (bench_scale), and the scored rows that the layout candidates
benchmark keeps (autotune_candidates)."""
from __future__ import annotations

import numpy as np

from omegaconf import OmegaConf

from benchmarks.autotune_candidates import recording
from benchmarks.bench_gnn import infer_lines
from benchmarks.common import swapped_pairs
from benchmarks.bench_scale import share_with_every_split
from pipeline.tpugraphs.schema import SPLITS


def test_swapped_pairs_ignores_ties_within_the_tolerance():
    a = np.array([0.0, 1.0, 1.0005, 3.0])
    b = np.array([0.0, 1.0004, 1.0, 3.0])          # swaps configs 1 and 2, whose gap under a is 5e-4
    assert swapped_pairs(a, b, tolerance=1e-3) == 0
    assert swapped_pairs(a, b, tolerance=1e-4) == 1
    assert swapped_pairs(a, a[::-1].copy(), tolerance=0.0) == 6   # reversed: all 4 * 3 / 2 pairs


def test_infer_lines_put_both_clocks_against_their_own_bound():
    # 10 configs x tta 2 = 20 evaluations of 1 GFLOP: 20 GFLOP; wall: 10 GFLOP/s bound, plain 10 s (2 GFLOP/s = 0.2
    # of it), chunked 2 s (1.0); CPU: 20 GFLOP/s bound, plain 4 s (0.25), chunked 2 s (0.5)
    infer = {"configs": 10, "flops_per_config": 1e9, "load": (1.0, 2.0), "max_rel_diff": 1e-7, "same_ranking": True,
             "tau": 1.0, "tie_tolerance": 1e-5, "swapped_beyond_ties": 0,
             "wall": {"threads": 2, "plain": 10.0, "chunked": 2.0, "matmul_gflops": 10.0},
             "cpu": {"threads": 1, "plain": 4.0, "chunked": 2.0, "matmul_gflops": 20.0}}
    lines = infer_lines(infer, OmegaConf.create({"tta": 2, "infer_batch": 8, "infer_chunk_mb": 2}), repeats=2)
    assert "| wall clock, 2 threads | 10.00 | 2.00 | **5.00x** | 0.200 | 1.000 |" in lines
    assert "| CPU time, 1 thread | 4.00 | 2.00 | **2.00x** | 0.250 | 0.500 |" in lines


def test_share_with_every_split_links_the_graph_under_unique_names(tmp_path):
    train = tmp_path / "npz" / "layout" / "train" / "g.npz"
    train.parent.mkdir(parents=True)
    train.write_bytes(b"graph")
    assert share_with_every_split(train) == len(SPLITS) == 3
    copies = sorted(p.relative_to(tmp_path / "npz" / "layout").as_posix() for p in (tmp_path / "npz").rglob("*.npz"))
    assert copies == ["test/g_test.npz", "train/g.npz", "valid/g_valid.npz"]
    assert (train.parent.parent / "valid" / "g_valid.npz").stat().st_ino == train.stat().st_ino   # hard link


def _result(tmp_path, tag: str, tests: dict[int, float], variant: str = "base"):
    """A bench_quality result file of one variant: gnn on one collection, test score per seed."""
    import json
    runs = {variant: {"gnn": {"layout-xla-random": {str(seed): {"valid": 0.5, "test": test, "seconds": 1.0}
                                                    for seed, test in tests.items()}}}}
    path = tmp_path / f"{tag}.json"
    path.write_text(json.dumps({"tag": tag, "variants": {variant: []}, "data": "programs", "common": [],
                                "runs": runs}))
    return str(path)


def test_compare_runs_pairs_separate_runs_by_seed(tmp_path):
    import pytest
    from benchmarks.compare_runs import compare, load_run
    a = load_run(_result(tmp_path, "a", {0: 0.2, 1: 0.3, 2: 0.4}))
    b = load_run(_result(tmp_path, "b", {0: 0.3, 1: 0.5, 2: 0.4, 3: 0.9}))      # seed 3 has no partner
    rows, models, collections, seeds = compare([a[:2], b[:2]])
    assert (models, collections, seeds) == (["gnn"], ["layout-xla-random"], [0, 1, 2])
    row = next(r for r in rows if r["variant"] == "b:base" and r["collection"] == "layout-xla-random")
    assert row["test_delta_mean"] == pytest.approx(0.1)                           # (0.1 + 0.2 + 0.0) / 3
    assert row["test_delta_std"] == pytest.approx(0.1)                            # sample std of 0.1, 0.2, 0.0
    assert row["valid_delta_mean"] == pytest.approx(0.0)
    with pytest.raises(SystemExit, match="no variant 'other'"):
        load_run(_result(tmp_path, "c", {0: 0.1}) + ":other")
    with pytest.raises(SystemExit, match="share 1 seed"):
        compare([a[:2], load_run(_result(tmp_path, "d", {0: 0.1}))[:2]])


def test_recording_keeps_every_scored_row_and_returns_the_scores_unchanged():
    seen = {}
    score = recording(lambda feat: feat[:, 0, 0].astype(float) * 0.5, seen)
    feat = np.full((2, 1, 18), -1, dtype=np.int8)
    feat[1, 0, 0] = 4
    assert score(feat).tolist() == [-0.5, 2.0]
    assert sorted(v for _, v in seen.values()) == [-0.5, 2.0]
    assert all(np.array_equal(seen[row.tobytes()][0], row) for row in feat)
