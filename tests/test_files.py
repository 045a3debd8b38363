"""pipeline.files: an atomic write replaces its target on success and leaves it untouched on failure."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pipeline.files import atomic_path, read_csv, write_csv, write_json


def test_a_file_replaces_the_target_and_no_temp_stays(tmp_path):
    path = tmp_path / "sub" / "a.json"
    write_json({"b": 1, "a": [2]}, path)
    assert path.read_text() == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'            # sorted keys, indented
    write_csv(pd.DataFrame({"x": [1, 2]}), tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text() == "x\n1\n2\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.json", "sub", "t.csv"]


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "a.json"
    write_json({"old": True}, path)
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_path(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_a_folder_replaces_the_old_folder_whole(tmp_path):
    folder = tmp_path / "graph"
    folder.mkdir()
    (folder / "stale.npy").write_text("old")
    with atomic_path(folder) as tmp:
        tmp.mkdir()
        (tmp / "new.npy").write_text("new")
    assert [p.name for p in folder.iterdir()] == ["new.npy"]
    assert [p.name for p in tmp_path.iterdir()] == ["graph"]


def test_a_file_that_cannot_replace_a_folder_leaves_no_temp(tmp_path):
    """os.replace refuses a file over a folder (predict --out DIR): the error propagates, no `<name>.tmp` stays."""
    (tmp_path / "out").mkdir()
    with pytest.raises(OSError):
        write_csv(pd.DataFrame({"a": [1]}), tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and not any((tmp_path / "out").iterdir())


def test_read_csv_keeps_text_columns_verbatim_and_reads_empty_cells_as_missing(tmp_path):
    path = tmp_path / "t.csv"
    write_csv(pd.DataFrame({"graph_id": ["NA", "None", "nan", "", "0001"], "score": [1.0, None, 2.0, 3.0, 4.0],
                            "note": ["NA", "x", "y", "z", "w"]}), path)
    table = read_csv(path, ["graph_id", "absent"])
    assert table["graph_id"].tolist() == ["NA", "None", "nan", "", "0001"]
    assert np.isnan(table["score"][1]) and table["score"].dtype == np.float64
    assert table["note"].tolist() == ["NA", "x", "y", "z", "w"]     # an empty cell alone is missing, not "NA"


@pytest.mark.parametrize("content, found", [(b"", "No columns to parse"), (b"a,b\n\"x,1\n", "EOF inside string"),
                                            (b"a,b\n\xff\xfe,1\n", "not UTF-8 text")])
def test_read_csv_refuses_a_file_that_is_no_csv_naming_it(tmp_path, content, found):
    """An empty index.csv, one with an unclosed quote or binary bytes was a pandas EmptyDataError / ParserError /
    UnicodeDecodeError traceback without the file's name (a stage reading index.csv, or a notebook)."""
    from pipeline.errors import PipelineError

    path = tmp_path / "index.csv"
    path.write_bytes(content)
    with pytest.raises(PipelineError, match=rf"index\.csv: expected a CSV the pipeline wrote, .*{found}"):
        read_csv(path, ["graph_id"])


def test_read_json_names_a_file_that_is_not_utf8(tmp_path):
    """Was 'utf-8' codec can't decode byte 0xff, naming no file (featurize's record of an earlier run, any metrics)."""
    from pipeline.errors import PipelineError
    from pipeline.files import read_json

    (tmp_path / "featurize.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(PipelineError, match=r"featurize\.json: not valid JSON \(not UTF-8 text: byte 0, "):
        read_json(tmp_path / "featurize.json")


@pytest.mark.parametrize("value, low, high, expected", [
    (1, None, None, True), (2.5, 0, 3, True), (-1.0, 0, None, False), (4, None, 3, False), (True, None, None, False),
    (float("nan"), None, None, False), (float("inf"), None, None, False), ("1", None, None, False),
    (None, None, None, False), pytest.param(10 ** 400, None, None, False, id="int-beyond-float")])  # OverflowError
def test_is_number_is_a_finite_number_in_range(value, low, high, expected):
    from pipeline.files import is_number

    assert is_number(value, low, high) is expected
