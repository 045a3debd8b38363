"""benchmarks/seed_members.py: the 3-member blend rebuilt from two runs equals rank_mean, and the table's arithmetic."""
import numpy as np
import pytest

from benchmarks.seed_members import combine, table
from pipeline.graphnet.members import rank_mean
from pipeline.predictions import Predictions


def preds(**graphs) -> Predictions:
    out = Predictions()
    for graph_id, scores in graphs.items():
        out[graph_id] = scores
    return out


def test_combine_equals_the_rank_mean_of_all_members():
    m0 = preds(g=[0.3, 0.1, 0.2, 0.9], h=[5.0, 4.0])
    m1 = preds(g=[0.0, 1.0, 2.0, 3.0], h=[1.0, 1.0])                 # a tie in h
    m2 = preds(g=[2.0, 2.5, 1.0, 0.0], h=[0.0, 1.0])
    one, rest = rank_mean([m0]), rank_mean([m1, m2])                  # what stage gnn saves for [0] and [1, 2]
    combined, direct = combine(one, rest, 2), rank_mean([m0, m1, m2])
    for graph_id in ("g", "h"):
        np.testing.assert_allclose(combined[graph_id], direct[graph_id], rtol=0, atol=1e-12)
    # by hand, graph h: m0 ranks [1, 0], m1 tie [0.5, 0.5], m2 [0, 1] -> mean [0.5, 0.5]
    np.testing.assert_allclose(combined["h"], [0.5, 0.5])


def test_combine_refuses_runs_of_different_graphs():
    with pytest.raises(ValueError, match="different graphs"):
        combine(preds(g=[1.0]), preds(h=[1.0]), 2)


def test_table_pairs_by_seed_and_averages_collections_first():
    def f(one, all_, mean, best):
        split = {"gnn_one": one, "gnn_all": all_, "member_mean": mean, "member_best": best,
                 "blend_one": one, "blend_all": all_}
        return {"valid": split, "test": split}
    figures = {"a": [f(0.5, 0.6, 0.4, 0.7), f(0.7, 0.6, 0.5, 0.8)],
               "b": [f(0.1, 0.2, 0.1, 0.3), f(0.3, 0.5, 0.2, 0.5)]}
    lines = table(figures)
    a_valid = next(line for line in lines if line.startswith("| a | valid"))
    # Δ over member 0: +0.1, -0.1 -> +0.0000 ± 0.1414; over the mean: +0.2, +0.1 -> +0.1500 ± 0.0707
    assert "| +0.0000 ± 0.1414 | +0.1500 ± 0.0707 |" in a_valid
    overall = next(line for line in lines if line.startswith("| **overall** | test"))
    # seed 0: one (0.5+0.1)/2 = 0.3, all 0.4; seed 1: one 0.5, all 0.55 -> Δ +0.1, +0.05
    assert overall.split(" | ")[4] == "+0.0750 ± 0.0354"
