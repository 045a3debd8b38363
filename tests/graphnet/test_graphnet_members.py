"""Seed members: distinct seeds per (global seed, member), rank-normalised averaging checked by hand."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.graphnet.members import member_dir, member_seed, rank_mean, rank_normalize
from pipeline.predictions import Predictions


def test_member_seeds_are_distinct_within_and_across_global_seeds():
    seeds = {(g, m): member_seed(g, m) for g in range(4) for m in range(4)}
    assert len(set(seeds.values())) == 16                       # (0, 1) and (1, 0) differ too
    assert member_seed(0, 1) == member_seed(0, 1) and 0 <= min(seeds.values()) and max(seeds.values()) < 2 ** 31
    assert member_seed(0, 0) != 0                              # not the global seed itself


def test_member_dir(tmp_path):
    assert member_dir(tmp_path / "gnn" / "tile-xla", 3) == tmp_path / "gnn" / "tile-xla" / "seed3"


def test_rank_normalize_by_hand():
    np.testing.assert_allclose(rank_normalize(np.array([10.0, -1.0, 5.0])), [1.0, 0.0, 0.5])
    np.testing.assert_allclose(rank_normalize(np.array([3.0, 1.0, 3.0, 2.0, 0.0])), [0.875, 0.25, 0.875, 0.5, 0.0])
    np.testing.assert_allclose(rank_normalize(np.array([7.0])), [0.0])


def test_rank_mean_by_hand():
    a, b = Predictions(), Predictions()
    a["g"], b["g"] = np.array([0.1, 0.2, 0.3]), np.array([30.0, 10.0, 20.0])    # ranks 0,.5,1 and 1,0,.5
    a["h"], b["h"] = np.array([5.0, 5.0]), np.array([1.0, 2.0])                 # ranks .5,.5 and 0,1
    blended = rank_mean([a, b])
    np.testing.assert_allclose(blended["g"], [0.5, 0.25, 0.75])
    np.testing.assert_allclose(blended["h"], [0.25, 0.75])
    np.testing.assert_allclose(rank_mean([b])["g"], [1.0, 0.0, 0.5])          # one member: its ranks
    c = Predictions()
    c["g"] = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"member 1 scores graphs \['g'\], member 0 scores \['g', 'h'\]"):
        rank_mean([a, c])
