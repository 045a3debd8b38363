"""Ranking losses on hand-made scores (lower score = faster)."""
from __future__ import annotations

import math

import pytest
import torch

from pipeline.graphnet.losses import (hinge_min_gap, listmle, ordered_pair_count, ordered_pairs, pairwise_hinge,
                                     ranking_loss)

RUNTIMES = torch.tensor([1.0, 2.0, 3.0])


def test_hinge_zero_when_ordered_by_margin():
    assert pairwise_hinge(torch.tensor([0.0, 1.0, 2.0]), RUNTIMES, margin=1.0, min_gap=0.0).item() == 0.0


def test_hinge_positive_by_hand():
    # pairs (0,1) (0,2) (1,2); gaps s_j - s_i = 0.5, 1.0, 0.5 with margin 1 -> 0.5, 0, 0.5 -> mean 1/3
    assert pairwise_hinge(torch.tensor([0.0, 0.5, 1.0]), RUNTIMES, 1.0, min_gap=0.0).item() == pytest.approx(1 / 3)
    # fully reversed, margin 0: gaps -1, -2, -1 -> mean 4/3
    assert pairwise_hinge(torch.tensor([2.0, 1.0, 0.0]), RUNTIMES, 0.0, min_gap=0.0).item() == pytest.approx(4 / 3)


def test_hinge_ignores_ties():
    tied = torch.tensor([1.0, 1.0])
    assert pairwise_hinge(torch.tensor([5.0, 0.0]), tied, 1.0, min_gap=0.0).item() == 0.0


def test_hinge_min_gap_ignores_near_ties():
    runtimes = torch.tensor([100.0, 100.2, 110.0])
    scores = torch.tensor([1.0, 0.0, 2.0])               # the 0.2% pair is reversed, the others ordered by >= 1
    assert pairwise_hinge(scores, runtimes, 1.0, min_gap=0.0).item() == pytest.approx(2 / 3)  # (2 + 0 + 0) / 3
    assert pairwise_hinge(scores, runtimes, 1.0, min_gap=0.005).item() == 0.0
    assert ranking_loss("pairwise_hinge", scores, runtimes, 1.0, 0.005).item() == 0.0


def test_listmle_by_hand():
    # two configs, faster first: loss = mean([lse(-s0, -s1) + s0, lse(-s1) + s1]) = log(1 + exp(s0 - s1)) / 2
    s = torch.tensor([0.0, 1.0])
    assert listmle(s, torch.tensor([1.0, 2.0])).item() == pytest.approx(math.log(1 + math.exp(-1)) / 2)


def test_listmle_near_zero_when_ordered_positive_when_reversed():
    assert listmle(torch.tensor([0.0, 50.0, 100.0]), RUNTIMES).item() < 1e-6
    assert listmle(torch.tensor([100.0, 50.0, 0.0]), RUNTIMES).item() > 10.0


def test_losses_have_gradients_and_reject_bad_shapes():
    s = torch.tensor([2.0, 1.0, 0.0], requires_grad=True)
    ranking_loss("listmle", s, RUNTIMES, 0.1, 0.0).backward()
    assert s.grad is not None and s.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="shapes"):
        pairwise_hinge(torch.zeros(2), RUNTIMES, 0.1, 0.0)


def test_min_gap_from_the_duplicate_spread_and_its_fallbacks():
    report = {"duplicate_spread": {"groups": 3, "percentiles": [i / 1000 for i in range(101)]}}   # p_k = k / 1000
    assert hinge_min_gap(0.005, 0.9, report, "r")[0] == pytest.approx(0.09)
    assert hinge_min_gap(0.005, 0.905, report, "r")[0] == pytest.approx(0.0905)          # between percentiles
    none = {"duplicate_spread": {"groups": 0, "percentiles": None}}
    assert hinge_min_gap(0.005, 0.9, none, "r") == (0.005, "gnn.min_gap (no repeated train configuration in r)")
    with pytest.raises(ValueError, match="r: no duplicate_spread"):
        hinge_min_gap(0.005, 0.9, {}, "r")
    with pytest.raises(ValueError, match="r: duplicate_spread.percentiles must list 101 numbers"):
        hinge_min_gap(0.005, 0.9, {"duplicate_spread": {"groups": 1, "percentiles": [0.1]}}, "r")
    # the derived gap drops the pairs closer than it: runtimes 1.0, 1.05, 2.0 with min_gap 0.09 keep 2 of 3 pairs
    assert ordered_pairs(torch.tensor([1.0, 1.05, 2.0]), 0.09).sum().item() == 2


@pytest.mark.parametrize("min_gap", [0.0, 0.1, 0.5, 2.0])
def test_ordered_pair_count_is_the_sum_of_ordered_pairs(min_gap):
    runtimes = torch.tensor([100.0, 100.0, 105.0, 150.0, 300.0, 320.0, 1000.0], dtype=torch.float64)
    assert ordered_pair_count(runtimes.numpy(), min_gap) == int(ordered_pairs(runtimes, min_gap).sum())
