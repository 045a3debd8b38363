"""`python -m pipeline.config` with a setting it refuses changes no file: params.yaml and conf/selection/current.yaml
stay as they were, whatever step refuses it (the schema, the selection, the data root, the re-composition)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from pipeline import selection
from pipeline.config import repo_root
from pipeline.settings_types import SettingsError


@pytest.fixture()
def repo(tmp_path):
    """A copy of conf/ and params.yaml (no machine settings), where the command runs (DVC_ROOT) and writes."""
    shutil.copytree(repo_root() / "conf", tmp_path / "conf")
    (tmp_path / "conf" / "local" / "default.yaml").unlink(missing_ok=True)
    shutil.rmtree(tmp_path / "conf" / selection.GROUP, ignore_errors=True)
    shutil.copy(repo_root() / "params.yaml", tmp_path / "params.yaml")
    return tmp_path


def config(repo, *overrides):
    env = {**os.environ, "DVC_ROOT": str(repo), "PYTHONPATH": str(repo_root())}
    return subprocess.run([sys.executable, "-m", "pipeline.config", *overrides], cwd=repo, env=env,
                          capture_output=True, text=True)


def files(repo) -> tuple:
    path = selection.selection_file(repo / "conf")
    return (repo / "params.yaml").read_bytes(), path.read_bytes() if path.is_file() else None


@pytest.mark.parametrize("override, words", [
    ("hydra/launcher=basic", "setting hydra/launcher="),     # was kept in the selection: exit 2, every composition
    ("hydra.job.name=x", "setting hydra.job.name="),         # after it refused; hydra.job.name: kept, doing nothing
    ("data.root=README.md", "no such folder"),               # a file, not a folder: was written to params.yaml
])
@pytest.mark.parametrize("with_selection", [False, True])
def test_a_refused_override_changes_no_file(repo, override, words, with_selection):
    if with_selection:
        assert config(repo, "gnn.hidden=16").returncode == 0
    shutil.copy(repo_root() / "README.md", repo / "README.md")
    before = files(repo)
    result = config(repo, override)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr
    assert files(repo) == before


@pytest.mark.parametrize("previous", [None, "gnn.hidden=16"])
def test_keep_selection_puts_the_previous_selection_back_when_it_does_not_compose(tmp_path, previous):
    conf = tmp_path / "conf"
    (conf / selection.GROUP).mkdir(parents=True)
    if previous:
        selection.write_selection([previous], conf)
    before = selection.selection_file(conf).read_text() if previous else None

    def refused():
        raise SettingsError("x", 1, "y")

    for composes in (lambda: False, refused):
        with pytest.raises(SettingsError):
            selection.keep_selection(["gnn.hidden=8"], conf, composes)
        path = selection.selection_file(conf)
        assert (path.read_text() if path.is_file() else None) == before


def test_a_preset_chosen_in_the_machine_settings_is_refused(repo):
    """conf/local/default.yaml holds machine settings only; a defaults list there chose the preset unseen (rc 0,
    params.yaml rewritten with data=programs_ci while the selection said nothing)."""
    local = repo / "conf" / "local" / "default.yaml"
    local.write_text("# @package _global_\ndefaults:\n  - override /data: programs_ci\n")
    before = files(repo)
    result = config(repo)
    assert result.returncode == 2 and "expected machine settings only, no defaults list" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and files(repo) == before
    local.write_text("# @package _global_\ngnn:\n  num_threads: 1\n")
    assert config(repo).returncode == 0
