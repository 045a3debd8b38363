"""The suite's own machinery (conftest.py): the module order that `pytest -n 2` takes and the repo fixture's
build, made once for every worker."""
from __future__ import annotations

import pytest
from conftest import build_once, module_order


class Item:
    def __init__(self, nodeid: str, *fixtures: str):
        self.nodeid, self.fixturenames = nodeid, list(fixtures)


def test_the_first_module_needing_the_repo_leads_and_the_others_close():
    items = [Item("tests/a.py::t1"), Item("tests/b.py::t1", "repo"), Item("tests/b.py::t2"),
             Item("tests/c.py::t1"), Item("tests/d.py::t1", "tmp_path", "outputs_repo"), Item("tests/e.py::t1")]
    assert [i.nodeid for i in module_order(items)] == [
        "tests/b.py::t1", "tests/b.py::t2",                         # the repo's builder, the whole module
        "tests/a.py::t1", "tests/c.py::t1", "tests/e.py::t1",       # no repo: while it builds
        "tests/d.py::t1"]                                           # needs it: last
    plain = [Item("tests/a.py::t1"), Item("tests/b.py::t1")]
    assert module_order(plain) == plain


def test_a_build_runs_once_and_a_failed_one_fails_every_later_call(tmp_path):
    built = []

    def build(path):
        built.append(path)
        path.mkdir()

    assert build_once(tmp_path, "repo", build) == tmp_path / "repo"
    assert build_once(tmp_path, "repo", build) == tmp_path / "repo" and built == [tmp_path / "repo"]

    def broken(path):
        raise RuntimeError("dvc repro failed")

    with pytest.raises(RuntimeError, match="dvc repro failed"):
        build_once(tmp_path, "other", broken)
    with pytest.raises(pytest.fail.Exception, match="other: the build failed in another test process:\ndvc repro"):
        build_once(tmp_path, "other", build)
    assert built == [tmp_path / "repo"]
