"""Hardening (#29): `python -m pipeline.predict` refuses bad flags, files and model outputs in one line (exit 2),
writing no CSV; the ensemble's weights carry the data fingerprint they were chosen on."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import write_layout_splits
from entry_points import error_line, run_entry, written

from pipeline.config import compose, data_fingerprint
from pipeline.prune import prune_collection
from pipeline.settings.prune import prune_settings
from pipeline.tpugraphs.dataset import Collection
from pipeline.trained import PredictError

SLUG = "layout-xla-random"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(overrides, graph, folders): a tiny layout:xla:random tree pruned as stage prune would, and the overrides
    pointing predict at it (models and metrics folders empty until a test fills them)."""
    base = tmp_path_factory.mktemp("predict")
    write_layout_splits(base / "data/npz/layout/xla/random")
    overrides = ["data=tpugraphs", f"data.root={base / 'data'}", f"data.collections=[{SLUG}]",
                 *(f"paths.{key}={base / key}" for key in ("pruned_dir", "models_dir", "metrics_dir")),
                 f"predict.run_dir={base / 'runs'}"]
    cfg = compose(overrides)
    prune_collection(cfg.data.root, SLUG, cfg.paths.pruned_dir, prune_settings(cfg, Collection.parse(SLUG)))
    graph = shutil.copy(base / "data/npz/layout/xla/random/test/c.npz", base / "new.npz")
    return overrides, Path(graph), base


def refused(setup, *args) -> str:
    """The one error line of a predict run that must fail, after checking that it wrote no CSV."""
    overrides, _, base = setup
    out = base / "out.csv"
    line = error_line(run_entry("pipeline.predict", *args, "--out", out, *overrides))
    assert not out.exists() and written(base / "runs") == []
    return line


def test_an_unknown_collection_is_refused_up_front(setup):
    line = refused(setup, setup[1], "--model", "heuristic", "--collection", "layout-foo")
    assert line.startswith("error: --collection: unknown collection 'layout-foo': expected one of")


@pytest.mark.slow
@pytest.mark.parametrize("top", ["0", "-1"])
def test_top_below_one_is_refused(setup, top):
    assert refused(setup, setup[1], "--model", "heuristic", "--collection", SLUG, "--top", top) == (
        f"error: --top {top}: expected a count >= 1 (the configs printed per graph)")


@pytest.mark.slow
def test_a_truncated_lightgbm_model_is_named(setup, tmp_path):
    import lightgbm as lgb

    _, graph, base = setup
    booster = lgb.train({"objective": "regression", "verbose": -1, "num_threads": 1},
                        lgb.Dataset(np.random.default_rng(0).random((40, 3)), label=np.arange(40.0)), 3)
    model_file = base / "models_dir/lgbm" / SLUG / "model.txt"
    model_file.parent.mkdir(parents=True, exist_ok=True)
    text = booster.model_to_string()
    try:
        for cut in (len(text) // 3, 200):            # LightGBM loads the first cut, refuses the second
            model_file.write_text(text[:cut])
            line = refused(setup, graph, "--model", "lgbm", "--collection", SLUG)
            assert line.startswith(f"error: {model_file}: expected a LightGBM model as stage lgbm saves it; found "), line
    finally:
        shutil.rmtree(base / "models_dir/lgbm")


@pytest.mark.parametrize("name, content, words", [
    ("notes.txt", "remember the milk\n", "expected HLO module text, whose first line (after comments) starts with "
                                         "'HloModule'; found 'remember the milk'"),
    ("notes.md", "HloModule m\n", "expected an .npz graph file, a folder of them, or HLO module text "
                                  "(a .hlo or .txt file)"),
])
def test_a_file_that_is_neither_npz_nor_hlo_text_is_refused(setup, tmp_path, name, content, words):
    path = tmp_path / name
    path.write_text(content)
    assert refused(setup, path, "--model", "heuristic") == f"error: {path}: {words}"


def test_a_graph_whose_node_feat_standardises_past_the_bound_is_refused(setup, tmp_path):
    """A finite node_feat far beyond train's range (3e38) became inf once standardised: the GNN stopped with a
    traceback, LightGBM and the heuristic ranked with inf features after a RuntimeWarning. With the deviation floor
    of random search it stays finite, but the GNN's squares overflow: refused past MAX_STANDARDISED deviations."""
    arrays = dict(np.load(setup[1]))
    arrays["node_feat"][:] = 3e38
    path = tmp_path / "huge.npz"
    np.savez(path, **arrays)
    line = refused(setup, path, "--model", "heuristic", "--collection", SLUG)
    assert line.startswith(f"error: {path} [key 'node_feat']: expected values that standardise within 1e+06 "
                           f"train deviations (column '"), line


def test_hlo_text_opening_with_comments_is_hlo_text(tmp_path):
    """predict sniffed the first non-blank line: XLA's benchmark files open with a /* ... */ note and lit tests with
    `// RUN:` lines, which the parser skips but predict refused as 'expected HLO module text'."""
    from pipeline.predict import is_hlo_text

    for k, head in enumerate(("/* kept stale\n   on purpose */\n", "// RUN: hlo-opt %s\n\n", "")):
        path = tmp_path / f"p{k}.hlo"
        path.write_text(head + "HloModule m\n")
        assert is_hlo_text(path)
    (tmp_path / "n.txt").write_text("/* HloModule m */ notes\n")
    with pytest.raises(PredictError, match="found 'notes'"):
        is_hlo_text(tmp_path / "n.txt")


def test_hlo_text_after_comments_longer_than_the_sniffed_head_is_hlo_text(tmp_path):
    """predict read the first 64 KiB only: a longer `/* ... */` note or run of `//` lines before `HloModule` (which
    the reader and the other two commands accept) was refused as 'expected HLO module text'. It reads on while the
    head is all comment; a text that is not HLO is still refused after the first chunk."""
    from pipeline.predict import HLO_SNIFF_BYTES, is_hlo_text

    for k, head in enumerate(("/*" + "x" * HLO_SNIFF_BYTES + "*/\n", "// note\n" * (HLO_SNIFF_BYTES // 4))):
        path = tmp_path / f"p{k}.hlo.txt"
        path.write_text(head + "HloModule m\n")
        assert is_hlo_text(path)
    (tmp_path / "n.txt").write_text("// note\n" * (HLO_SNIFF_BYTES // 4) + "notes\n")
    with pytest.raises(PredictError, match="found 'notes'"):
        is_hlo_text(tmp_path / "n.txt")


def test_hlo_text_after_a_byte_order_mark_is_hlo_text(tmp_path):
    """An editor's UTF-8 BOM before `HloModule`: the HLO reader skips it, so predict's sniffing must too."""
    from pipeline.predict import is_hlo_text

    path = tmp_path / "bom.hlo.txt"
    path.write_text("\ufeffHloModule m\n", encoding="utf-8")
    assert is_hlo_text(path)


def test_an_out_that_would_replace_an_input_or_lies_below_a_file_is_refused(setup, tmp_path):
    """--out on the input graph (or program), or on a graph inside an input folder, would be replaced by the CSV;
    --out below a file cannot be written: each is refused in one line before any ranking, the input intact."""
    from pipeline.predict import output_path

    overrides, graph, base = setup
    cfg, before = compose(overrides), graph.read_bytes()
    for source in (graph, graph.parent):
        with pytest.raises(PredictError, match=f"--out {graph}: the input {graph}; the CSV would replace it"):
            output_path(cfg, str(graph), "lgbm", set(), source)
    line = error_line(run_entry("pipeline.predict", graph, "--model", "heuristic", "--collection", SLUG, "--out",
                                graph, *overrides))
    assert line == f"error: --out {graph}: the input {graph}; the CSV would replace it, so choose another path"
    assert graph.read_bytes() == before
    blocker = tmp_path / "f.csv"
    blocker.write_text("x")
    with pytest.raises(PredictError, match=f"--out {blocker}/x.csv: {blocker} is a file; expected a folder"):
        output_path(cfg, str(blocker / "x.csv"), "lgbm", set(), graph)
    assert output_path(cfg, str(tmp_path / "ok.csv"), "lgbm", set(), graph) == tmp_path / "ok.csv"


@pytest.mark.slow
def test_ensemble_weights_of_other_data_are_refused_and_of_this_data_used(setup):
    overrides, graph, base = setup
    weights = base / "metrics_dir/ensemble" / f"{SLUG}.json"
    weights.parent.mkdir(parents=True, exist_ok=True)
    fingerprint = data_fingerprint(compose(overrides).data)
    other = data_fingerprint(compose(["data=programs_ci"]).data)
    assert fingerprint != other and fingerprint.startswith("tpugraphs:") and other.startswith("programs_ci:")
    try:
        weights.write_text(json.dumps({"weights": {"heuristic": 1.0}, "data_fingerprint": other}))
        line = refused(setup, graph, "--model", "ensemble", "--collection", SLUG)
        assert line == (f"error: {weights}: weights chosen on data '{other}', but this run's data settings are "
                        f"'{fingerprint}'; run stage ensemble on this data (dvc repro) or pass the data= it used")
        weights.write_text(json.dumps({"weights": {"heuristic": 1.0}}))          # written before fingerprints
        assert "weights chosen on unrecorded data (no key 'data_fingerprint'), but" in refused(
            setup, graph, "--model", "ensemble", "--collection", SLUG)
        weights.write_text(json.dumps({"weights": {"heuristic": 1.0}, "data_fingerprint": fingerprint}))
        out = base / "ok.csv"
        done = run_entry("pipeline.predict", graph, "--model", "ensemble", "--collection", SLUG, "--out", out,
                         *overrides)
        assert done.returncode == 0, done.stderr[-3000:]
        assert sorted(pd.read_csv(out)["config_index"]) == [0, 1, 2, 3]       # every config ranked once
    finally:
        shutil.rmtree(weights.parent)


def test_an_out_folder_is_refused_before_ranking(setup):
    """--out naming a folder (a CSV file is written): one line up front, not an IsADirectoryError after the
    ranking with a `<folder>.tmp` left beside it."""
    overrides, graph, base = setup
    folder = base / "out-folder"
    folder.mkdir()
    line = error_line(run_entry("pipeline.predict", graph, "--model", "heuristic", "--collection", SLUG,
                                "--out", folder, *overrides))
    assert line == f"error: --out {folder}: a folder; expected the path of the CSV file to write"
    assert written(folder) == [] and not (base / "out-folder.tmp").exists()


TOO_LONG = "x" * 300        # a file name longer than any file system takes (NAME_MAX 255): the system cannot look


def test_an_out_or_input_the_system_cannot_write_or_read_is_one_line(setup, tmp_path):
    """--out where the CSV cannot be written (a name too long here; no permission, a read-only disk) was an OSError
    traceback (or named only `<out>.tmp` and suggested `dvc repro`); an input path the system cannot look at too."""
    overrides, graph, base = setup
    out = tmp_path / f"{TOO_LONG}.csv"
    line = error_line(run_entry("pipeline.predict", graph, "--model", "heuristic", "--collection", SLUG, "--out",
                                out, *overrides))
    assert line == (f"error: --out {out}: cannot write there (File name too long); expected a path this user can "
                    f"create and write")
    program = tmp_path / f"{TOO_LONG}.hlo.txt"
    assert error_line(run_entry("pipeline.predict", program, "--model", "heuristic", "--out", tmp_path / "r.csv",
                                *overrides)) == f"error: {program}: cannot read (File name too long)"
    assert written(tmp_path) == []


def test_a_loop_of_symbolic_links_as_input_or_out_is_one_line(setup, tmp_path):
    """An input or --out on a loop of symbolic links was a RuntimeError traceback (Path.resolve)."""
    overrides, graph, base = setup
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    loop = tmp_path / "loop1"
    assert error_line(run_entry("pipeline.predict", graph, "--model", "heuristic", "--collection", SLUG, "--out",
                                loop, *overrides)) == (f"error: --out {loop}: a loop of symbolic links; expected a "
                                                       f"path that leads to a file or folder")
    assert error_line(run_entry("pipeline.predict", loop, "--model", "heuristic", "--collection", SLUG, "--out",
                                tmp_path / "r.csv", *overrides)) == (f"error: {loop}: a loop of symbolic links; "
                                                                     f"expected a path that leads to a file or folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop1", "loop2"]


def test_an_empty_path_is_refused_not_the_current_folder(setup, tmp_path):
    """An input of '' (`"$FILE"` with FILE unset) was the current folder: every file under it was ranked; an --out
    of '' was refused as 'a folder'."""
    overrides, graph, base = setup
    for args in (["", "--out", tmp_path / "r.csv"], [graph, "--out", ""]):
        done = run_entry("pipeline.predict", *args, "--model", "heuristic", "--collection", SLUG, *overrides)
        assert done.returncode == 2 and done.stderr.splitlines()[-1].endswith(
            ": an empty path; expected the path of a file or folder"), done.stderr[-2000:]
    assert written(tmp_path) == []


def test_models_trained_on_other_pruned_data_are_named(setup):
    """prune re-run on other data (another data.root, an ad-hoc run) while the models were not: the pruned graphs
    carry another number of normalised node_feat columns than the models were trained on. A GNN member ended in a
    torch RuntimeError traceback (mat1 and mat2 shapes cannot be multiplied), LightGBM in a ValueError traceback
    (feature columns differ from the model's); each is one line naming the model file and the stage to re-run."""
    import lightgbm as lgb
    import torch

    from pipeline.graphnet import checkpoint as ckpt
    from pipeline.graphnet.members import member_dir
    from pipeline.graphnet.model import build_model
    from pipeline.pruned import NORMALIZER_FILE, collection_dir
    from pipeline.pruning.normalize import Normalizer
    from pipeline.settings.gnn import gnn_settings

    overrides, graph, base = setup
    cfg, collection = compose(overrides), Collection.parse(SLUG)
    columns = len(Normalizer.load(collection_dir(cfg.paths.pruned_dir, SLUG) / NORMALIZER_FILE).columns)
    settings, models = gnn_settings(cfg, collection), base / "models_dir"
    try:
        torch.manual_seed(0)
        for member in settings.members:
            net = build_model(settings.spec(columns + 3))
            ckpt.save_model(net, net.spec, member_dir(models / "gnn" / SLUG, member) / ckpt.MODEL_FILE, {})
        first = member_dir(models / "gnn" / SLUG, settings.members[0]) / ckpt.MODEL_FILE
        assert refused(setup, graph, "--model", "gnn", "--collection", SLUG) == (
            f"error: {first}: a model of {columns + 3} node_feat columns, but the pruned graphs of {SLUG} have "
            f"{columns} (prune ran on other data or settings since stage gnn trained it); run stage gnn again "
            f"(dvc repro)")
        booster = lgb.train({"objective": "regression", "verbose": -1, "num_threads": 1},
                            lgb.Dataset(np.random.default_rng(0).random((40, 3)), label=np.arange(40.0)), 3)
        (models / "lgbm" / SLUG).mkdir(parents=True)
        booster.save_model(str(models / "lgbm" / SLUG / "model.txt"))
        line = refused(setup, graph, "--model", "lgbm", "--collection", SLUG)
        assert line.startswith(f"error: {models / 'lgbm' / SLUG / 'model.txt'}: a model of 3 feature columns "
                               f"(Column_0, Column_1, ...), but graph 'new' gives "), line
        assert line.endswith("(prune ran on other data or settings since stage lgbm trained it, or lgbm.features "
                             "changed); run stage lgbm again (dvc repro)"), line
    finally:
        shutil.rmtree(models, ignore_errors=True)


def test_a_pruned_report_prune_never_writes_is_named(setup):
    """report.json (what prune ran with) cut short was a JSONDecodeError traceback, one without 'params' a KeyError
    traceback: one line names the file and the stage to re-run."""
    from pipeline.pruned import REPORT_FILE, collection_dir

    overrides, graph, base = setup
    report = collection_dir(base / "pruned_dir", SLUG) / REPORT_FILE
    before = report.read_text()
    try:
        report.write_text(before[:40])
        assert refused(setup, graph, "--model", "heuristic", "--collection", SLUG).startswith(
            f"error: {report}: not valid JSON (")
        report.write_text(json.dumps({**json.loads(before), "params": {"hops": "3", "pad_value": -1, "dedup": "min"}}))
        assert refused(setup, graph, "--model", "heuristic", "--collection", SLUG) == (
            f"error: {report}: key 'params': expected what stage prune ran with (hops a count or 'all', a finite "
            f"pad_value, dedup one of ('min', 'mean')); found {{'hops': '3', 'pad_value': -1, 'dedup': 'min'}}; run "
            f"stage prune for {SLUG} again (dvc repro)")
    finally:
        report.write_text(before)
