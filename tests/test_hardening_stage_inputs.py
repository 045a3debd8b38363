"""Hardening (#29): bad settings and inputs of stages gnn and ensemble and of tool featurize end, through the real
entry points, in one stderr line naming the key or file, exit status 2, and no output written."""
from __future__ import annotations

import pytest
from conftest import write_layout_splits
from entry_points import error_line, run_entry, written

from pipeline.config import compose
from pipeline.prune import prune_collection
from pipeline.settings.prune import prune_settings
from pipeline.tpugraphs.dataset import Collection

SLUG = "layout-xla-random"
PLAIN_HLO = """HloModule plain, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY main {
  p = f32[4]{0} parameter(0)
  ROOT t = f32[4]{0} tanh(p)
}
"""


def test_ensemble_members_must_be_model_stages(tmp_path):
    line = error_line(run_entry("pipeline.ensemble", "--collection", SLUG, "ensemble.members=[lgbm,foo]",
                                f"paths.metrics_dir={tmp_path / 'metrics'}",
                                f"paths.predictions_dir={tmp_path / 'predictions'}"))
    assert line == "error: setting ensemble.members[1]='foo': expected one of ['heuristic', 'lgbm', 'gnn']"
    assert written(tmp_path) == []


@pytest.mark.slow
def test_a_diverging_gnn_stops_at_the_first_non_finite_loss_naming_gnn_lr(tmp_path):
    write_layout_splits(tmp_path / "data/npz/layout/xla/random")
    overrides = ["data=tpugraphs", f"data.root={tmp_path / 'data'}", f"data.collections=[{SLUG}]",
                 *(f"paths.{key}={tmp_path / key}" for key in ("pruned_dir", "models_dir", "predictions_dir",
                                                               "metrics_dir", "plots_dir"))]
    cfg = compose(overrides)
    prune_collection(cfg.data.root, SLUG, cfg.paths.pruned_dir, prune_settings(cfg, Collection.parse(SLUG)))
    line = error_line(run_entry("pipeline.gnn", "--collection", SLUG, *overrides, "gnn.lr=1e9", "gnn.seeds=[0]",
                                "gnn.epochs=20", "gnn.num_threads=1"))
    assert line.startswith("error: training diverged: the loss is nan at epoch ") and line.endswith(
        "; lower gnn.lr (now 1e+09 for this collection)"), line
    for key in ("predictions_dir", "metrics_dir", "plots_dir"):
        assert written(tmp_path / key) == [], key
    assert not (tmp_path / "models_dir/gnn" / SLUG / "seed0/model.pt").exists()   # only the resume checkpoint


def test_featurize_exits_non_zero_when_no_program_gives_a_graph(tmp_path):
    program = tmp_path / "plain.hlo.txt"
    program.write_text(PLAIN_HLO)
    line = error_line(run_entry("pipeline.featurize", program, "--out", tmp_path / "out"))
    assert line.startswith(f"error: featurize: {program}: no configurable node") and line.endswith(
        "no fused kernel (tile needs optimised HLO such as .compile().as_text()); nothing written")
    assert not (tmp_path / "out").exists()                       # not even a folder


@pytest.mark.slow
def test_featurize_refuses_an_unbounded_dynamic_shape_in_the_module_header(tmp_path):
    program = tmp_path / "dynamic.hlo.txt"
    program.write_text(PLAIN_HLO.replace("{(f32[4]{0})", "{(f32[?]{0})", 1))
    line = error_line(run_entry("pipeline.featurize", program, "--out", tmp_path / "out"))
    assert line == (f"error: featurize: {program}:1: expected static or bounded dimension sizes (unbounded dynamic "
                    f"dimensions '?' are not supported), found 'f32[?]'")
    assert written(tmp_path / "out") == []


def test_a_model_stage_run_before_prune_names_the_missing_file(tmp_path):
    outputs = [f"paths.{key}={tmp_path / key}" for key in ("pruned_dir", "models_dir", "predictions_dir",
                                                           "metrics_dir", "plots_dir")]
    line = error_line(run_entry("pipeline.lgbm", "--collection", "tile-xla", *outputs))
    assert line == (f"error: {tmp_path / 'pruned_dir' / 'tile-xla' / 'index.csv'}: no such file or folder; expected "
                    f"the output of an earlier stage (run `dvc repro`) or a path you gave")
    assert written(tmp_path) == []
