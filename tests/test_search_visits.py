"""benchmarks/search_visits.py: what a search visits is kept best first, and the table pairs the variants by seed."""
import numpy as np
import pytest

from benchmarks.search_visits import summarize, to_markdown, visited
from pipeline.hlo.featurize import layout_program, parse_module
from pipeline.tuning.search import SearchSettings
from pipeline.tuning.space import LayoutSpace

CHAIN = """HloModule chain, entry_computation_layout={(f32[2,3,4]{2,1,0})->f32[4,3,2]{2,1,0}}

ENTRY main.5 {
  Arg_0.1 = f32[2,3,4]{2,1,0} parameter(0)
  reshape.2 = f32[3,2,4]{2,1,0} reshape(Arg_0.1)
  tanh.3 = f32[3,2,4]{2,1,0} tanh(reshape.2)
  ROOT reshape.4 = f32[4,3,2]{2,1,0} reshape(tanh.3)
}
"""


class Settings:
    """What `visited` reads of AutotuneSettings: the search settings."""
    search = SearchSettings("evolution", batch=16, population=8, local_share=0.5, mutation_extra=0.5,
                            random_default_prob=0.5, combos=4, time_limit_s=60.0)


def test_visited_keeps_the_predicted_fastest_then_others_of_the_same_search():
    layout = layout_program(parse_module(CHAIN, "chain"))
    space = LayoutSpace.of(layout.graph, layout.config_node_ids, "chain")
    seen = {}

    def scorer(node_config_feat):                       # a stub: fewer changed blocks is slower, remembered by row
        changed = (space.decode(node_config_feat) != 0).sum(axis=(1, 2))
        for row, score in zip(space.decode(node_config_feat), -0.01 * changed):
            seen[row.tobytes()] = float(score)
        return -0.01 * changed

    kept = visited(space, scorer, Settings, None, 60, 5, 3, np.random.default_rng(0))
    assert kept.shape[1:] == (space.n_nodes, 3) and len(kept) == 8
    scores = np.array([seen[c.tobytes()] for c in kept])
    assert scores[:5].max() <= np.sort(list(seen.values()))[4]          # the first five: the five fastest seen
    assert len({c.tobytes() for c in kept}) == 8                         # drawn without repeats


def run(valid, shares, slower=False):
    rows = [{"guarded": {"share": s, "verified_ratio": 1.1 if slower else 0.9},
             "free100": {"share": 2 * s, "verified_ratio": 0.9}, "free1000": {"share": None, "verified_ratio": 0.9}}
            for s in shares]
    rows[0]["free1000"]["share"] = 0.5
    return {"kaggle": {"valid": valid, "test": valid - 0.1}, "rows": rows}


def test_summarize_pairs_the_variants_by_seed():
    runs = {"base": {0: run(0.7, [0.0, 0.2]), 1: run(0.8, [0.2, 0.2])},
            "aug": {0: run(0.6, [0.2, 0.4], slower=True), 1: run(0.9, [0.2, 0.2])}}
    base, aug = summarize(runs, [0, 1])
    assert base["guarded"] == pytest.approx((0.15, np.std([0.1, 0.2], ddof=1)))
    assert base["free100"][0] == pytest.approx(0.3) and base["free1000"] == (0.5, 0.0)    # None shares left out
    assert aug["valid_delta"] == pytest.approx((0.0, np.std([-0.1, 0.1], ddof=1)))
    assert aug["guarded_delta"][0] == pytest.approx(0.1)
    assert aug["slower"] == {"guarded": 2, "free100": 0, "free1000": 0} and base["slower"]["guarded"] == 0
    text = to_markdown([base, aug], "# t")
    assert "| Δ (paired) | +0.0000 ± 0.1414 |" in text and "guarded 2" in text
