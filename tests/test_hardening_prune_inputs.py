"""Hardening (#29): every bad data folder given to `python -m pipeline.prune` ends in one stderr line naming the
file or folder, exit status 2, and no output (pruned folder or metrics file) written."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import in_split, make_layout_arrays, make_tile_arrays, write_layout_splits, write_npz
from entry_points import error_line, run_entry, written

LAYOUT = Path("npz/layout/xla/random")
TILE = Path("npz/tile/xla")


def data_tree(root: Path) -> Path:
    """One valid layout:xla:random and one valid tile:xla graph per split."""
    write_layout_splits(root / LAYOUT)
    for split, stem in {"train": "a", "valid": "b", "test": "c"}.items():
        write_npz(root / TILE / split / f"t{stem}.npz", in_split(make_tile_arrays(), split))
    return root


def no_configs(root: Path, split: str, stem: str) -> None:
    arrays = make_layout_arrays()
    arrays["node_config_ids"] = np.zeros(0, np.int64)
    arrays["node_config_feat"] = np.zeros((4, 0, 18), np.float32)    # [configs, config nodes = 0, 18]
    write_npz(root / LAYOUT / split / f"{stem}.npz", arrays)


def nan_features(root: Path) -> None:
    arrays = make_layout_arrays()
    arrays["node_feat"][2, 5] = np.nan
    write_npz(root / LAYOUT / "train" / "a.npz", arrays)


def huge_features(root: Path) -> None:
    arrays = in_split(make_layout_arrays(), "test")
    arrays["node_feat"][:] = 3e38       # finite float32; standardised with train's statistics, far past the bound
    write_npz(root / LAYOUT / "test" / "c.npz", arrays)


# case: (how to spoil the tree, collection, extra overrides, the file or folder the line names, words it holds)
CASES = {
    "empty test split": (lambda r: (r / LAYOUT / "test/c.npz").unlink(), "layout-xla-random", [],
                         LAYOUT / "test", "found an empty folder"),
    "missing test folder": (lambda r: shutil.rmtree(r / LAYOUT / "test"), "layout-xla-random", [],
                            LAYOUT / "test", "found no such folder"),
    "empty train split": (lambda r: (r / LAYOUT / "train/a.npz").unlink(), "layout-xla-random", [],
                          LAYOUT / "train", "found an empty folder"),
    "no configurable node in train": (lambda r: no_configs(r, "train", "a"), "layout-xla-random", [],
                                      LAYOUT / "train/a.npz", "expected at least one configurable node"),
    "no configurable node in test": (lambda r: no_configs(r, "test", "c"), "layout-xla-random", [],
                                     LAYOUT / "test/c.npz", "expected at least one configurable node"),
    "one name in two splits": (lambda r: shutil.copy(r / LAYOUT / "train/a.npz", r / LAYOUT / "valid/a.npz"),
                               "layout-xla-random", [], LAYOUT / "valid/a.npz", "'a' in both train and valid"),
    "dangling symlink": (lambda r: os.symlink(r / "nowhere.npz", r / LAYOUT / "train/gone.npz"),
                         "layout-xla-random", [], LAYOUT / "train/gone.npz", "a dangling link"),
    "garbage npz": (lambda r: (r / LAYOUT / "train/g.npz").write_bytes(b"garbage"), "layout-xla-random", [],
                    LAYOUT / "train/g.npz", "a readable npz (zip) archive"),
    "truncated npz": (lambda r: (r / LAYOUT / "train/g.npz").write_bytes((r / LAYOUT / "train/a.npz").read_bytes()[
        :700]), "layout-xla-random", [], LAYOUT / "train/g.npz", "a readable npz (zip) archive"),
    "garbage valid npz, skip_invalid_train": (lambda r: (r / LAYOUT / "valid/g.npz").write_bytes(b"garbage"),
                                              "layout-xla-random", ["prune.skip_invalid_train=true"],
                                              LAYOUT / "valid/g.npz", "a readable npz (zip) archive"),
    "truncated test npz, skip_invalid_train": (lambda r: (r / LAYOUT / "test/c.npz").write_bytes(
        (r / LAYOUT / "train/a.npz").read_bytes()[:700]), "layout-xla-random", ["prune.skip_invalid_train=true"],
        LAYOUT / "test/c.npz", "a readable npz (zip) archive"),
    "NaN in node_feat": (nan_features, "layout-xla-random", [], LAYOUT / "train/a.npz",
                         "[key 'node_feat']: expected finite values"),
    "node_feat past the bound once standardised": (huge_features, "layout-xla-random", [], LAYOUT / "test/c.npz",
                                                   "[key 'node_feat']: expected values that standardise within 1e+06"),
    "a folder named x.npz": (lambda r: (r / LAYOUT / "train/x.npz").mkdir(), "layout-xla-random", [],
                             LAYOUT / "train/x.npz", "not a regular file"),
    "a tile file in a layout folder": (lambda r: write_npz(r / LAYOUT / "train/t.npz", make_tile_arrays()),
                                       "layout-xla-random", [], LAYOUT / "train/t.npz", "[key 'node_config_ids']"),
    "missing data.root": (lambda r: shutil.rmtree(r / "npz"), "layout-xla-random", [], Path("."),
                          "expected a folder holding npz/"),
    "empty tile test split": (lambda r: (r / TILE / "test/tc.npz").unlink(), "tile-xla", [], TILE / "test",
                              "found an empty folder"),
    "a file name that is not UTF-8": (lambda r: shutil.copy(r / LAYOUT / "train/a.npz", os.fsencode(
        r / LAYOUT / "train") + b"/\xff\xfe.npz"), "layout-xla-random", [], LAYOUT / "train",
        r"expected graph file names in UTF-8; found the name b'\xff\xfe.npz'"),
}
FAST = {"empty test split", "a file name that is not UTF-8", "node_feat past the bound once standardised"}        # the rest run in the slow (CI) selection


@pytest.mark.parametrize("case", [name if name in FAST else pytest.param(name, marks=pytest.mark.slow)
                                  for name in CASES])
def test_prune_refuses_bad_data_in_one_line_and_writes_nothing(tmp_path, case):
    spoil, collection, overrides, named, words = CASES[case]
    root = data_tree(tmp_path / "data")
    spoil(root)
    out, metrics = tmp_path / "pruned", tmp_path / "metrics"
    done = run_entry("pipeline.prune", "--collection", collection, "data=tpugraphs", f"data.root={root}",
                     "data.collections=[tile-xla,layout-xla-random]", f"paths.pruned_dir={out}",
                     f"paths.metrics_dir={metrics}", *overrides)
    line = error_line(done)
    named_path = str(root / named) if named != Path(".") else str(root)
    assert line.startswith(f"error: {named_path}") and words in line, line
    assert written(out) == [] and written(metrics) == []


@pytest.mark.parametrize("split, stem, added, why", [
    ("test", "c2", None, "its runtimes are unknown"),
    ("valid", "b2", 7, "its runtimes differ: measured again"),    # a kernel two models share, timed in each
    ("valid", "a2", 0, "its config_runtime too: a copy, or a kernel shared by two programs and timed by a "
                       "deterministic cost model; model selection scores a training example"),
])
def test_a_graph_identical_to_a_train_graph_is_pruned_with_a_warning(tmp_path, split, stem, added, why):
    root = data_tree(tmp_path / "data")
    arrays = make_layout_arrays()                            # the train graph a, with the same or other runtimes
    arrays["config_runtime"] = arrays["config_runtime"] * 0 if added is None else arrays["config_runtime"] + added
    write_npz(root / LAYOUT / split / f"{stem}.npz", arrays)
    done = run_entry("pipeline.prune", "--collection", "layout-xla-random", "data=tpugraphs", f"data.root={root}",
                     "data.collections=[layout-xla-random]", f"paths.pruned_dir={tmp_path / 'pruned'}",
                     f"paths.metrics_dir={tmp_path / 'metrics'}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stderr.splitlines() if line.startswith("warning")] == [
        f"warning: {root / LAYOUT / split / stem}.npz: {split} graph with the node_opcode, edge_index, node_feat of "
        f"train graph {root / LAYOUT / 'train/a.npz'} (allowed: {why})"]
    assert (tmp_path / "pruned/layout-xla-random" / split / stem).is_dir()
