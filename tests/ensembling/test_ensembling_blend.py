"""pipeline.ensembling.blend: normalisation, weight grids, the blend and the weights, by hand."""
import numpy as np
import pytest

from pipeline.scoring import metrics
from pipeline.ensembling.blend import blend, choose_weights, normalize_scores, weight_grid
from pipeline.predictions import Predictions


def preds_of(**graphs):
    p = Predictions()
    for g, s in graphs.items():
        p[g] = s
    return p


def test_normalize_minmax_and_rank_by_hand():
    np.testing.assert_allclose(normalize_scores([2.0, 4.0, 3.0], "minmax"), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(normalize_scores([10.0, 10.0, 30.0, 20.0], "rank"), [0.0, 0.0, 1.0, 0.6])  # ranks 1.5, 1.5, 4, 3
    np.testing.assert_allclose(normalize_scores([5.0, 5.0], "minmax"), [0.0, 0.0])


def test_weight_grid_covers_simplex_and_vertices():
    grid = weight_grid(3, 0.5)
    assert grid.shape == (6, 3)
    np.testing.assert_allclose(grid.sum(axis=1), 1.0)
    assert {tuple(r) for r in grid} >= {(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)}


def test_weight_grid_is_in_lexicographic_order_and_fine_steps_are_quick():
    """The order decides the last tie-break (the first on the grid), so it is pinned: the ticks' lexicographic
    order. A step of 0.001 over three members (501501 blends) was a walk of 10^9 tuples that never ended."""
    assert (weight_grid(3, 0.5) * 2).tolist() == [[0, 0, 2], [0, 1, 1], [0, 2, 0], [1, 0, 1], [1, 1, 0], [2, 0, 0]]
    assert (weight_grid(2, 0.25) * 4).tolist() == [[0, 4], [1, 3], [2, 2], [3, 1], [4, 0]]
    assert weight_grid(1, 0.1).tolist() == [[1.0]]
    import time

    start = time.process_time()
    fine = weight_grid(3, 0.001)
    assert fine.shape == (501501, 3) and time.process_time() - start < 30
    np.testing.assert_allclose(fine.sum(axis=1), 1.0)
    assert len({tuple(row) for row in fine[::997]}) == len(fine[::997])          # no repeats


def test_blend_is_weighted_sum_of_normalised_scores():
    a, b = preds_of(g=[0.0, 10.0, 5.0]), preds_of(g=[1.0, 0.0, 2.0])
    np.testing.assert_allclose(blend([a, b], np.array([0.5, 0.5]), "minmax")["g"], [0.25, 0.5, 0.75])


def test_choose_weights_is_never_worse_than_best_member():
    rng = np.random.default_rng(0)
    truth = {f"g{i}": rng.random(30) for i in range(4)}
    good = preds_of(**{g: r + rng.normal(0, 0.2, 30) for g, r in truth.items()})
    noisy = preds_of(**{g: r + rng.normal(0, 1.0, 30) for g, r in truth.items()})
    weights, score = choose_weights("layout", [good, noisy], truth, 0.1, "minmax")
    best_member = max(metrics.score_predictions("layout", p, truth)["score"] for p in (good, noisy))
    assert score >= best_member - 1e-12
    assert weights[0] > weights[1]


def test_equal_weighting_fits_nothing_and_grid_follows_valid():
    from pipeline.ensembling.blend import pick_weights

    truth = {"g": np.array([1.0, 2.0, 3.0, 4.0])}
    right, wrong = preds_of(g=[1.0, 2.0, 3.0, 4.0]), preds_of(g=[4.0, 3.0, 2.0, 1.0])
    np.testing.assert_allclose(pick_weights("layout", [right, wrong, wrong], truth, "equal", 0.5, "rank"),
                               [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(pick_weights("layout", [wrong, right], truth, "grid", 0.5, "rank"), [0.0, 1.0])


def test_gain_over_best_member_is_measured_against_the_valid_winner():
    from pipeline.ensembling.blend import gain_over_best_member

    members = {"valid": {"lgbm": 0.5, "gnn": 0.6}, "test": {"lgbm": 0.7, "gnn": 0.4}}
    gain = gain_over_best_member(members, {"valid": 0.65, "test": 0.5})
    assert gain["best_member"] == "gnn"                                  # best on valid, not on test
    assert gain["gain"] == pytest.approx({"valid": 0.05, "test": 0.1})
    assert gain_over_best_member({"valid": members["valid"]}, {"valid": 0.55})["gain"] == pytest.approx(
        {"valid": -0.05})


def test_schema_weightings_are_the_modules():
    from pipeline.ensembling.blend import TIE_BREAKS, WEIGHTINGS
    from pipeline.settings_schema import ENSEMBLE_TIE_BREAKS, ENSEMBLE_WEIGHTINGS

    assert ENSEMBLE_WEIGHTINGS == WEIGHTINGS and ENSEMBLE_TIE_BREAKS == TIE_BREAKS


def test_choose_weights_breaks_ties_towards_even_weights():
    truth = {"g": np.array([1.0, 2.0, 3.0])}
    right = preds_of(g=[1.0, 2.0, 3.0])
    wrong = preds_of(g=[3.0, 1.0, 2.0])      # tau -1/3: [right, right] ties everywhere, [right, wrong] does not
    weights, score = choose_weights("layout", [right, right], truth, 0.25, "minmax")
    np.testing.assert_allclose(weights, [0.5, 0.5])                      # not the first vertex [0, 1]
    assert score == pytest.approx(1.0)
    weights, _ = choose_weights("layout", [right, wrong], truth, 0.25, "minmax")
    assert weights[0] > weights[1]                                        # a strict winner still wins


def test_tie_break_order_prefers_the_blend_that_orders_valid_best_when_the_tile_score_ties():
    truth = {"k": np.arange(1.0, 8.0)}                  # config i runs i + 1
    good = preds_of(k=np.arange(1.0, 8.0))              # the whole order right: tau 1
    poor = preds_of(k=[1.0, 7, 6, 5, 4, 3, 2])          # the best first, the rest reversed: tau (6 - 15) / 21
    assert metrics.kendall_tau(poor["k"], truth["k"]) == pytest.approx(-3 / 7)
    # config 0 scores 0 in every normalised blend, so every blend's top-5 holds the best: the tile score ties at 1
    weights, score = choose_weights("tile", [good, poor], truth, 0.25, "minmax", "even")
    np.testing.assert_allclose(weights, [0.5, 0.5])
    assert score == pytest.approx(1.0)
    # order: blends 0.75/0.25 ((0.5 i + 1.75) / 6 rises with i) and 1/0 both order all 7 configs (tau 1); of those,
    # the more even wins. 0.5/0.5 gives configs 1..6 one score (tau-b < 1)
    weights, score = choose_weights("tile", [good, poor], truth, 0.25, "minmax", "order")
    np.testing.assert_allclose(weights, [0.75, 0.25])
    assert score == pytest.approx(1.0)


def test_tie_break_order_leaves_layout_to_its_own_score():
    truth = {"g": np.array([1.0, 2.0, 3.0])}
    right = preds_of(g=[1.0, 2.0, 3.0])
    for members in ([right, right], [right, preds_of(g=[3.0, 1.0, 2.0])]):
        np.testing.assert_allclose(choose_weights("layout", members, truth, 0.25, "minmax", "order")[0],
                                   choose_weights("layout", members, truth, 0.25, "minmax", "even")[0])


def test_blend_graph_is_blend_on_one_graph_and_reads_the_stage_weights(tmp_path):
    from pipeline.ensembling.blend import blend_graph, read_weights

    a, b = np.array([1.0, 3.0, 2.0]), np.array([30.0, 10.0, 20.0])
    one = blend([preds_of(g=a), preds_of(g=b)], np.array([0.25, 0.75]), "minmax")["g"]
    np.testing.assert_array_equal(blend_graph({"a": a, "b": b}, {"a": 0.25, "b": 0.75}, "minmax"), one)
    np.testing.assert_allclose(one, [0.75, 0.25, 0.5])                  # 0.25 * [0, 1, .5] + 0.75 * [1, 0, .5]
    with pytest.raises(ValueError, match=r"no scores of members \['c'\]"):
        blend_graph({"a": a}, {"a": 0.5, "c": 0.5}, "minmax")
    path = tmp_path / "layout-xla-random.json"
    with pytest.raises(FileNotFoundError, match="layout-xla-random.json: missing; run stage ensemble"):
        read_weights(path)
    path.write_text('{"weights": {}}')
    with pytest.raises(ValueError, match="key 'weights' missing"):
        read_weights(path)
    path.write_text('{"weights": {"gnn": 1, "lgbm": 0.0}, "data_fingerprint": "programs:ab"}')
    assert read_weights(path) == {"gnn": 1.0, "lgbm": 0.0} == read_weights(path, "programs:ab")
    with pytest.raises(ValueError, match="weights chosen on data 'programs:ab', but this run's data settings are"):
        read_weights(path, "programs_ci:cd")


@pytest.mark.parametrize("text, found", [
    ('{"weights": {"gnn": 1', "not valid JSON (Expecting ',' delimiter: line 1, column 22)"),      # cut short
    ('[1]', "expected a JSON object, found list"),
    ('{"weights": {"gnn": NaN}}', "key 'weights': expected weights >= 0 (finite, one above 0) of members among "
                                  "('heuristic', 'lgbm', 'gnn'); found {'gnn': nan}; run stage ensemble again"),
    ('{"weights": {"gnn": "x"}}', "found {'gnn': 'x'}"),
    ('{"weights": {"gnn": -0.5, "lgbm": 1.5}}', "found {'gnn': -0.5}"),
    ('{"weights": {"foo": 1.0}}', "found {'foo': 1.0}"),
    ('{"weights": {"gnn": 0, "lgbm": 0.0}}', "found {'gnn': 0, 'lgbm': 0.0}"),
])
def test_weights_the_stage_never_writes_are_named(tmp_path, text, found):
    """A metrics file cut short was one line without its name (the JSONDecodeError's words alone), a list an
    AttributeError traceback, a weight 'x' 'could not convert string to float', a member 'foo' blamed on --model,
    and NaN or all-zero weights blended silently (NaN or constant scores, a CSV written)."""
    from pipeline.errors import PipelineError
    from pipeline.ensembling.blend import read_weights

    path = tmp_path / "tile-xla.json"
    path.write_text(text)
    with pytest.raises(PipelineError) as refusal:
        read_weights(path)
    assert str(refusal.value).startswith(f"{path}: ") and found in str(refusal.value)


def test_tolerance_gives_near_ties_to_the_preferred_member():
    truth = {"g": np.arange(1.0, 7.0), "h": np.arange(1.0, 7.0)}
    best = preds_of(g=np.arange(1.0, 7.0), h=np.arange(1.0, 7.0))          # tau 1 on both graphs
    near = preds_of(g=[2.0, 1, 3, 4, 5, 6], h=np.arange(1.0, 7.0))          # one swapped pair on g: tau 13/15
    scores = [metrics.score_predictions("layout", p, truth)["score"] for p in (best, near)]
    assert scores == pytest.approx([1.0, (13 / 15 + 1) / 2])                # 1 and 0.9333
    # no tolerance: the best blend wins, whatever the preference (the pure `best` member)
    weights, score = choose_weights("layout", [best, near], truth, 0.5, "minmax", prefer=1)
    np.testing.assert_allclose(weights, [1.0, 0.0])
    assert score == pytest.approx(1.0)
    # within a tolerance of 0.1 every blend ties (the worst, `near` alone, is 0.0667 below): the preferred member
    weights, score = choose_weights("layout", [best, near], truth, 0.5, "minmax", tolerance=0.1, prefer=1)
    np.testing.assert_allclose(weights, [0.0, 1.0])
    assert score == pytest.approx(scores[1])
    # a tolerance of 0.05 leaves `near` alone out; of the blends left, the one with most weight on it
    weights, _ = choose_weights("layout", [best, near], truth, 0.5, "minmax", tolerance=0.05, prefer=1)
    np.testing.assert_allclose(weights, [0.5, 0.5])
    # a tolerance without a preference changes nothing
    weights, _ = choose_weights("layout", [best, near], truth, 0.5, "minmax", tolerance=0.1)
    np.testing.assert_allclose(weights, [1.0, 0.0])


def test_best_candidate_ties_within_tolerance_inclusive_and_within_tie_and_keeps_the_first():
    from pipeline.ensembling.blend import TIE, best_candidate

    grid = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    # tolerance 0.5 from the best 1.0: 0.5 is exactly on the floor, still tied; prefer member 1 -> row 1
    assert best_candidate(grid[:2], np.array([1.0, 0.5]), np.zeros(2), tolerance=0.5, prefer=1) == 1
    # scores 1e-14 apart (closer than TIE) are equal: the even row 2 wins over row 0's better-by-1e-14 score
    assert best_candidate(grid[[0, 2]], np.array([0.5 + TIE / 100, 0.5]), np.zeros(2)) == 1
    assert best_candidate(grid[[2, 0]], np.array([0.5, 0.5 + TIE / 100]), np.zeros(2)) == 0    # in either order
    # rows 0 and 1 tie on every key (score, order, sum of squares 1): the first on the grid wins
    assert best_candidate(grid[:2], np.array([0.5, 0.5]), np.zeros(2)) == 0


def test_gain_skips_a_split_the_ensemble_has_no_score_for():
    from pipeline.ensembling.blend import gain_over_best_member

    members = {"valid": {"gnn": 0.6, "lgbm": 0.5}, "test": {"gnn": 0.4, "lgbm": 0.3}}
    assert gain_over_best_member(members, {"valid": 0.75}) == {"best_member": "gnn",
                                                               "gain": {"valid": pytest.approx(0.15)}}


def test_weights_without_a_recorded_fingerprint_are_refused_when_one_is_asked(tmp_path):
    from pipeline.ensembling.blend import read_weights

    path = tmp_path / "layout-xla-random.json"
    path.write_text('{"weights": {"gnn": 1.0}}')
    assert read_weights(path) == {"gnn": 1.0}                     # no fingerprint asked: read
    with pytest.raises(ValueError, match=r"weights chosen on unrecorded data \(no key 'data_fingerprint'\)"):
        read_weights(path, "programs:ab")


def test_order_score_is_the_mean_tau_over_graphs():
    from pipeline.ensembling.blend import order_score

    preds = Predictions()
    preds["a"], preds["b"], preds["c"] = [1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [1.0, 2.0, 3.0]
    truth = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([1.0, 2.0, 3.0]), "c": np.array([1.0, 3.0, 2.0])}
    assert order_score(preds, truth) == pytest.approx(1 / 9)     # taus 1, -1, 1/3: mean 1/9 (median 1/3)
