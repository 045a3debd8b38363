"""The paths.* folders may not overlap where a stage would write over another's output: paths.synthetic_dir is
replaced whole by stage synthesize (so no other folder may be it, in it or around it, and it may not hold files the
stage did not write), and paths.models_dir / paths.predictions_dir are laid out alike (<model>/<collection>/)."""
from __future__ import annotations

import pytest

from pipeline import synthesize
from pipeline.config import compose
from pipeline.errors import PipelineError
from pipeline.files import atomic_path
from pipeline.settings_types import SettingsError


@pytest.mark.parametrize("overrides, key", [
    (["paths.models_dir=predictions"], "paths.predictions_dir"),
    (["paths.pruned_dir=data/synthetic"], "paths.pruned_dir"),
    (["paths.models_dir=data/synthetic/models"], "paths.models_dir"),
    (["paths.synthetic_dir=data"], "paths.tpugraphs_dir"),            # holds data/tpugraphs
    (["paths.synthetic_dir=."], "paths.tpugraphs_dir"),
    (["paths.models_dir=."], "paths.models_dir"),                      # holds data/synthetic
])
def test_overlapping_output_folders_are_refused(overrides, key):
    with pytest.raises(SettingsError) as error:
        compose(overrides, with_selection=False)
    assert error.value.key == key


@pytest.mark.parametrize("overrides", [
    ["paths.synthetic_dir=./data/synthetic/"], ["paths.metrics_dir=plots"], ["paths.models_dir=predictions/models"],
    ["paths.checkpoints_dir=/tmp/checkpoints"],
])
def test_folders_apart_still_load(overrides):
    compose(overrides, with_selection=False)


@pytest.mark.parametrize("holding", ["a file in the folder", "the path is a file"])
def test_synthesize_refuses_to_replace_what_it_did_not_write(tmp_path, monkeypatch, holding):
    out = tmp_path / "mine"
    if holding == "the path is a file":
        out.write_text("keep")
        precious = out
    else:
        out.mkdir()
        precious = out / "precious.txt"
        precious.write_text("keep")

    def build(settings, collections, out_dir, progress=True, workers=1):       # what the zoo does: replace it
        with atomic_path(out_dir) as tmp:
            tmp.mkdir()
        return {}

    monkeypatch.setattr(synthesize.programs, "build", build)
    with pytest.raises(PipelineError, match="paths.synthetic_dir=.*: a file, or a folder holding files"):
        synthesize.run(compose(["data=programs_ci", f"paths.synthetic_dir={out}"], with_selection=False))
    assert precious.read_text() == "keep"


def test_synthesize_replaces_its_own_dataset_or_an_empty_folder(tmp_path):
    for made in (tmp_path / "empty", tmp_path / "built"):
        made.mkdir()
    (tmp_path / "built" / "stats.json").write_text("{}")
    for out in (tmp_path / "empty", tmp_path / "built", tmp_path / "absent"):
        synthesize.check_replaceable(out)


def refused_before_writing(monkeypatch, override: str, error: type, match: str) -> None:
    """`python -m pipeline.config <override>` raises `error` matching `match` without writing the selection or
    params.yaml."""
    from pipeline import config, selection

    monkeypatch.setattr(selection, "keep_selection", lambda *a: pytest.fail("wrote the selection"))
    monkeypatch.setattr(config, "write_params", lambda *a: pytest.fail("wrote params.yaml"))
    with pytest.raises(error, match=match):
        config.main([override])


@pytest.mark.parametrize("key", ["predictions_dir", "metrics_dir", "models_dir"])
def test_an_output_folder_that_is_a_file_stops_a_stage_before_any_work(tmp_path, monkeypatch, key):
    """stage heuristic wrote its predictions, then died on a NotADirectoryError traceback making its metrics."""
    from pipeline.config import stage_args

    afile = tmp_path / "afile"
    afile.write_text("x")
    for value in (afile, afile / "sub"):
        with pytest.raises(SystemExit, match=rf"^error: paths.{key}={value}: {afile} is a file; expected a folder"):
            stage_args("d", [f"paths.{key}={value}"], collection=False)
    refused_before_writing(monkeypatch, f"paths.{key}={afile}", SystemExit, rf"^error: paths.{key}=")


def test_an_output_folder_on_a_loop_of_symbolic_links_is_refused_before_any_work(tmp_path, monkeypatch):
    """paths.* on a loop of symbolic links: `python -m pipeline.config` kept it in the selection and params.yaml,
    a stage then failed later; refused like a file there, naming the key."""
    from pipeline.config import stage_args

    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    loop = tmp_path / "loop1"
    with pytest.raises(PipelineError, match=rf"^paths.models_dir {loop}: a loop of symbolic links"):
        stage_args("d", [f"paths.models_dir={loop}"], collection=False)
    refused_before_writing(monkeypatch, f"paths.synthetic_dir={loop}", PipelineError,
                           rf"^paths.synthetic_dir {loop}: a loop of symbolic links")
