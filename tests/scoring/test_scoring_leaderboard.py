"""The leaderboard's pieces on tiny hand-written inputs: ceilings of 0.0 kept, the ceiling row and short
revisions, rankings on the asked split (tests/test_summary.py covers the stage that prints them)."""
import pytest

from pipeline.scoring import leaderboard


def test_flat_summary_keeps_a_zero_ceiling_and_leaves_out_no_ceiling():
    detail = {"gnn": {"valid": {"kaggle": 0.7}}}
    # a ceiling of 0.0 (tau 0) is a ceiling, not a missing one
    assert leaderboard.flat_summary(detail, {"valid": 0.0, "test": None}) == {"gnn": {"valid": 0.7},
                                                                              "ceiling": {"valid": 0.0}}
    # no split with a ceiling: no "ceiling" entry at all (not an empty one, a row of dashes on the leaderboard)
    assert leaderboard.flat_summary(detail, {"valid": None}) == {"gnn": {"valid": 0.7}}


def test_workspace_table_puts_a_model_without_the_ranking_split_last():
    # lgbm has no valid score: ranked after heuristic's 0.1, not first
    summary = {"lgbm": {"test": 0.9}, "heuristic": {"valid": 0.1}, "gnn": {"valid": 0.3}}
    rows = leaderboard.workspace_table(summary, ["valid"], "valid").splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["gnn", "heuristic", "lgbm"]


def test_experiment_states_names_by_name_else_by_short_revision():
    states = [{"rev": "workspace", "data": {"x": 1}},
              {"rev": "0123456789abcdef", "data": {"x": 2},
               "experiments": [{"revs": [{"rev": "fedcba9876543210", "name": "wide", "data": {"x": 3}}]}]}]
    assert [name for name, _ in leaderboard.experiment_states(states)] == ["workspace", "0123456", "wide"]


def test_experiment_rows_rank_on_the_asked_split():
    def state(name, valid, test):
        data = {"metrics": {"s.json": {"data": {"m": {"valid": valid, "test": test}}}}}
        return {"rev": name, "name": name, "data": data}

    states = [state("a", 0.9, 0.1), state("b", 0.1, 0.8)]
    # ranked by m's test score (0.8 > 0.1), which is also the score each row shows
    assert leaderboard.experiment_rows(states, "s.json", ["m"], ("m", "test")) == [["b", 0.8], ["a", 0.1]]
    assert leaderboard.score_of({"m": {"test": {"kaggle": 0.25}}}, "m", "test") == 0.25    # the nested layout


def per_model():
    """Two collections; a's ceilings valid 1.0 / test 0.8, b's 0.5 / 0.2."""
    return {"gnn": {"a": {"valid": {"score": 0.6}, "test": {"score": 0.4}, "ceiling": {"valid": 1.0, "test": 0.8}},
                    "b": {"valid": {"score": 0.2}, "test": {"score": 0.0}, "ceiling": {"valid": 0.5, "test": 0.2}}}}


def test_markdown_summary_puts_each_splits_ceiling_under_it():
    # gnn: valid (0.6 + 0.2) / 2 = 0.4, test (0.4 + 0.0) / 2 = 0.2; ceiling valid (1.0 + 0.5) / 2 = 0.75,
    # test (0.8 + 0.2) / 2 = 0.5
    assert leaderboard.markdown_summary(per_model(), ["valid", "test"]).splitlines() == [
        "| model | valid | test |", "|---|---:|---:|",
        "| gnn | 0.4000 | 0.2000 |", "| ceiling | 0.7500 | 0.5000 |"]


def test_markdown_collections_means_the_ceilings_too():
    lines = leaderboard.markdown_collections(per_model(), "test").splitlines()
    assert lines[0] == "| collection (test) | gnn | ceiling |"
    assert lines[2:] == ["| a | 0.4000 | 0.8000 |", "| b | 0.0000 | 0.2000 |",
                         "| mean (Kaggle score) | 0.2000 | 0.5000 |"]       # (0.8 + 0.2) / 2 = 0.5
