import pandas as pd
import pytest

from pipeline.predictions import Predictions
from pipeline.submit import (SubmissionError, build_rows, ranking_scores, read_submission, validate_submission,
                             write_submission)
from pipeline.tpugraphs.dataset import Collection

TILE = Collection.parse("tile:xla")
LAYOUT = Collection.parse("layout:nlp:default")
EXPECTED = {"tile:xla:aa": ("tile", 7), "tile:xla:bb": ("tile", 3), "layout:nlp:default:cc": ("layout", 4)}


def table(rows):
    return pd.DataFrame(rows, columns=["ID", "TopConfigs"])


def valid_rows():
    return [("tile:xla:aa", "6;5;4;3;2"), ("tile:xla:bb", "2;0;1"), ("layout:nlp:default:cc", "3;1;0;2")]


def test_build_rows_ranks_fastest_first():
    tile, layout = Predictions(), Predictions()
    tile["aa"] = [6, 5, 4, 3, 2, 1, 0]
    tile["bb"] = [1, 2, 0]
    layout["cc"] = [0.3, 0.1, 0.4, 0.0]
    rows = pd.concat([build_rows(TILE, tile, 5), build_rows(LAYOUT, layout, 5)], ignore_index=True)
    assert rows.values.tolist() == [list(r) for r in valid_rows()]
    assert validate_submission(rows, EXPECTED, 5) == []


@pytest.mark.parametrize("rows, problem", [
    (valid_rows() + [("tile:xla:aa", "0;1;2;3;4")], "duplicate ID 'tile:xla:aa'"),
    (valid_rows()[:2], "missing ID 'layout:nlp:default:cc'"),
    (valid_rows() + [("tile:xla:zz", "0")], "unknown ID 'tile:xla:zz'"),
    ([("tile:xla:aa", "0;1;2;3;7")] + valid_rows()[1:], "out of range"),
    ([("tile:xla:aa", "0;1;2;3")] + valid_rows()[1:], "needs the top 5"),
    ([("tile:xla:aa", "0;1;1;3;4")] + valid_rows()[1:], "repeats"),
    (valid_rows()[:2] + [("layout:nlp:default:cc", "3;1;0")], "full permutation of 4"),
    (valid_rows()[:2] + [("layout:nlp:default:cc", "3,1,0,2")], "non-negative integers"),
    (valid_rows()[:2] + [("layout:nlp:default:cc", "\uff13;\uff11;\uff10;\uff12")], "non-negative integers"),  # full-width
    (valid_rows()[:2] + [("layout:nlp:default:cc ", "3;1;0;2")], "unknown ID 'layout:nlp:default:cc '"),
])
def test_invalid_submissions_are_named(rows, problem):
    problems = validate_submission(table(rows), EXPECTED, 5)
    assert any(problem in p for p in problems), problems


def test_wrong_header_is_rejected():
    bad = pd.DataFrame(valid_rows(), columns=["Id", "TopConfigs"])
    assert "header" in validate_submission(bad, EXPECTED, 5)[0]


def test_invalid_submission_is_never_written(tmp_path):
    path = tmp_path / "sub.csv"
    with pytest.raises(SubmissionError, match="missing ID"):
        write_submission(table(valid_rows()[:2]), path, EXPECTED, 5)
    assert not path.exists() and not list(tmp_path.iterdir())
    write_submission(table(valid_rows()), path, EXPECTED, 5)
    assert pd.read_csv(path, dtype=str).values.tolist() == [list(r) for r in valid_rows()]


def test_ranking_scores_put_unlisted_last():
    assert list(ranking_scores([2, 0], 4)) == [1.0, 2.0, 0.0, 2.0]


def test_echoed_ids_and_values_are_shortened():
    """A huge token in the CSV (an ID, a TopConfigs value, a header name) is echoed as its first 77 characters,
    quoted, then '...': `--check` prints one short line per problem, not the token."""
    huge_id, huge_value = "x" * 100_000, "9," * 50_000
    rows = valid_rows()[:2] + [("layout:nlp:default:cc", huge_value), (huge_id, "0"), (huge_id, "0")]
    problems = validate_submission(table(rows), EXPECTED, 5)
    assert f"duplicate ID '{'x' * 77}'..." in problems and f"unknown ID '{'x' * 77}'..." in problems
    assert (f"layout:nlp:default:cc: not a ';'-separated list of non-negative integers: '{huge_value[:77]}'..."
            in problems)
    header = validate_submission(pd.DataFrame([["a", "b"]], columns=[huge_id, "TopConfigs"]), EXPECTED, 5)
    assert header == [f"header is ['{'x' * 75}...; expected ['ID', 'TopConfigs']"]
    assert max(len(p) for p in problems + header) < 200


def test_an_index_of_many_digits_is_named_shortened():
    """A 400-digit index was echoed whole ('index 999...9 out of range'); one past Python's 4300-digit limit for
    int(str) ended in its message about sys.set_int_max_str_digits."""
    rows = valid_rows()
    rows[0] = ("tile:xla:aa", "9" * 400)
    rows[1] = ("tile:xla:bb", "8" * 5000)
    problems = validate_submission(table(rows), EXPECTED, 5)
    assert problems == [f"tile:xla:aa: index {'9' * 77}... out of range for 7 configs",
                        f"tile:xla:bb: not a list of config indices (one has over 4300 digits): '{'8' * 77}'..."]


@pytest.mark.parametrize("body, fields", [
    ("x,tile:xla:aa,6;5;4;3;2\ny,tile:xla:bb,2;0;1\n", 3),      # an extra first column, no header for it
    ("tile:xla:aa,6;5;4;3;2,\ntile:xla:bb,2;0;1,\n", 3),        # a trailing ',' on every row
    ("x,z,tile:xla:aa,6;5;4;3;2\ny,z,tile:xla:bb,2;0;1\n", 4),
])
def test_rows_with_more_fields_than_the_header_are_refused(tmp_path, body, fields):
    """pandas takes the extra leading fields of such rows as an index: the first CSV read valid (the IDs shifted
    into place, 'x' and 'y' dropped) and the second named its indices as unknown IDs."""
    csv = tmp_path / "sub.csv"
    csv.write_text("ID,TopConfigs\n" + body)
    assert read_submission(csv) == (None, f"cannot read {csv}: its first row has {fields} fields, the header "
                                          f"['ID', 'TopConfigs'] 2 (an extra column, or a trailing ',' on each row)")


def test_check_refuses_a_pipe_or_device_unread(tmp_path):
    """--check on a named pipe without a writer waited forever, on `/dev/zero` filled the memory, on `<(...)` read
    it empty the second time (its notes read the file first); each is refused unread, one line naming it."""
    import os
    import threading

    fifo = tmp_path / "s.csv"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("ID,TopConfigs\n"), daemon=True)
    writer.start()
    for path in (fifo, "/dev/null"):
        assert read_submission(path) == (None, f"cannot read {path}: not a regular file (a pipe, device or socket); "
                                               f"expected a CSV file")
    fifo.read_text()                            # the writer's end: it finishes
    writer.join()


def test_check_of_an_empty_path_is_refused_not_the_stage(monkeypatch, capsys):
    """`--check "$FILE"` with FILE unset gave '', which the command took as no --check: it ran the stage, writing
    submissions/<name>.csv and metrics/submit.json over DVC's outputs. Now argparse's one line naming the flag."""
    import pipeline.submit as submit

    monkeypatch.setattr(submit, "run", lambda cfg: pytest.fail("the stage ran"))
    with pytest.raises(SystemExit) as stop:
        submit.main(["--check", ""])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "error: argument --check: an empty path; expected the path of a file or folder")


@pytest.mark.parametrize("rows, problem", [
    ([("tile:xla:aa", "6;5;4;3;2;1")] + valid_rows()[1:], "tile:xla:aa: has 6 indices; a tile row needs the top 5"),
    (valid_rows()[:2] + [("layout:nlp:default:cc", "3;x;0;2")],                                         # one bad part
     "layout:nlp:default:cc: not a ';'-separated list of non-negative integers: '3;x;0;2'"),
])
def test_a_tile_row_longer_than_the_top_k_or_a_row_with_one_bad_index_is_named(rows, problem):
    assert validate_submission(table(rows), EXPECTED, 5) == [problem]


def test_columns_in_the_other_order_are_a_wrong_header():
    swapped = pd.DataFrame([(c, i) for i, c in valid_rows()], columns=["TopConfigs", "ID"])
    assert validate_submission(swapped, EXPECTED, 5) == [
        "header is ['TopConfigs', 'ID']; expected ['ID', 'TopConfigs']"]


def test_a_submission_with_a_single_problem_is_never_written(tmp_path):
    """The refusal is for one problem too, not only for several."""
    path = tmp_path / "sub.csv"
    rows = [("tile:xla:aa", "0;1;1;3;4")] + valid_rows()[1:]                 # one repeated index, nothing else
    with pytest.raises(SubmissionError, match=r"1 problem\(s\):\n  tile:xla:aa: repeats a config index"):
        write_submission(table(rows), path, EXPECTED, 5)
    assert not path.exists()


def test_indices_may_have_spaces_around_them():
    """parse_indices strips each part (as int() does): '3; 1;0 ;2' is the permutation 3, 1, 0, 2."""
    rows = valid_rows()[:2] + [("layout:nlp:default:cc", "3; 1;0 ;2")]
    assert validate_submission(table(rows), EXPECTED, 5) == []


def test_row_ids_keep_the_graph_ids_case():
    preds = Predictions()
    preds["Bert.4x4"] = [0.2, 0.1]
    assert build_rows(TILE, preds, 5).values.tolist() == [["tile:xla:Bert.4x4", "1;0"]]


def test_an_empty_value_is_read_as_text_not_nan(tmp_path):
    csv = tmp_path / "sub.csv"
    csv.write_text("ID,TopConfigs\ntile:xla:aa,\nNA,0\n")
    read, _ = read_submission(csv)
    assert read.values.tolist() == [["tile:xla:aa", ""], ["NA", "0"]]


def test_official_counts_are_noted_above_as_well_as_below():
    from pipeline.submit import official_count_notes

    layout = Collection.parse("layout:xla:random")          # 8 graphs in the official test set
    rows = table([(f"layout:xla:random:g{i}", "0") for i in range(9)])
    assert official_count_notes(rows, [layout]) == [
        "layout:xla:random: 9 rows; the official test set has 8 graphs (894 rows in all)"]
    assert official_count_notes(table([(f"layout:xla:random:g{i}", "0") for i in range(8)]), [layout]) == []
