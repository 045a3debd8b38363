"""Tool and stage autotune end to end: a program the models never saw, the built-in test programs verified by the
cost model (the `repo` fixture's `dvc repro` on data=programs_ci runs stage autotune), and the bad-input errors."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from conftest import BIN

from pipeline.autotune import main
from pipeline.config import compose
from pipeline.hlo.featurize import layout_program, parse_module
from pipeline.tpugraphs.dataset import Collection, graph_paths
from pipeline.trained import PredictError
from pipeline.tuning.search import Guard
from pipeline.tuning.space import LayoutSpace
from pipeline.tuning.tool import output_dir

NO_CONFIGURABLE = """HloModule plain, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}

ENTRY main.3 {
  Arg_0.1 = f32[8,16]{1,0} parameter(0)
  ROOT tanh.2 = f32[8,16]{1,0} tanh(Arg_0.1)
}
"""


def autotune(dest, env, *args):
    return subprocess.run([str(BIN / "python"), "-m", "pipeline.autotune", *map(str, args)], cwd=dest, env=env,
                          capture_output=True, text=True)


def test_stage_writes_seconds_apart_and_a_guard_file_per_collection(tmp_path, monkeypatch):
    import pipeline.autotune as stage
    from pipeline.config import load_cfg
    from pipeline.tuning.verify import Verification

    from contextlib import contextmanager
    from pipeline.tracking import NullRun

    metrics = {"all": {"share": {"mean": 0.5, "std": 0.0, "n": 1}, "log_share": {"pick": 0.4}, "guarded": 0,
                       "min_share": 0.5},
               "programs": [{"program": "p", "share": 0.5, "unguarded": {"verified_ratio": 0.9}}]}
    timings = {"seconds": 12.5, "programs": [{"program": "p", "seconds": 1.25}]}
    guards = {"layout-xla-random": {"collection": "layout:xla:random", "models": {"gnn": {"margin": 0.1}}}}
    monkeypatch.setattr(stage, "run", lambda cfg, work: Verification(metrics, timings, guards))
    runs, tables = [], []

    @contextmanager
    def recorded(cfg, stage_name, collection=None):
        runs.append((stage_name, collection, NullRun()))
        yield runs[-1][2]

    monkeypatch.setattr(stage.tracking, "start_run", recorded)
    monkeypatch.setattr(stage.tracking, "log_table", lambda run, name, table: tables.append((name, table)))
    cfg = load_cfg([f"paths.metrics_dir={tmp_path}/metrics", f"paths.models_dir={tmp_path}/models"])
    assert stage.run_stage(cfg) == metrics
    [(name, collection, run)] = runs                                      # the stage's W&B run: figures and rows
    assert (name, collection) == ("autotune", None)
    assert run.summary == {"share": 0.5, "log_share": 0.4, "guarded": 0, "min_share": 0.5}
    [(table_name, table)] = tables
    assert table_name == "programs" and table.columns.tolist() == ["program", "share", "unguarded.verified_ratio"]
    assert json.loads((tmp_path / "metrics" / "autotune.json").read_text()) == metrics      # no seconds in it
    assert json.loads((tmp_path / "metrics" / "timings" / "autotune.json").read_text()) == timings
    assert json.loads((tmp_path / "models" / "autotune" / "layout-xla-random.json").read_text()) == guards[
        "layout-xla-random"]


@pytest.mark.parametrize("argv", [["a.hlo.txt", "--out", ""], [""]])
def test_an_empty_path_is_refused_not_the_current_folder(tmp_path, monkeypatch, capsys, argv):
    """`--out "$DIR"` with DIR unset gave '', and the JSON was written into the current folder."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and "an empty path; expected the path of a file or folder" in capsys.readouterr().err


def test_the_command_needs_a_program_or_builtin():
    for argv in ([], ["a.hlo.txt", "--builtin"], ["a", "b", "c"]):
        with pytest.raises(SystemExit, match="give PROGRAM.hlo.txt"):
            main(argv)


@pytest.mark.parametrize("budget, shown", [("0", "0"), ("9" * 400, "9" * 77 + "..."), (str(2 ** 63), str(2 ** 63))])
def test_a_budget_below_1_or_beyond_64_bits_is_refused(budget, shown):
    """--budget of 400 digits was searched (the time limit ends it) and written into the program's JSON whole, where
    autotune.budget must fit in 64 bits."""
    with pytest.raises(SystemExit) as stop:
        main(["a.hlo.txt", "--budget", budget])
    assert stop.value.code == f"error: --budget {shown}: expected an integer >= 1 that fits in 64 bits"


@pytest.mark.slow
def test_stage_autotune_verifies_every_builtin_test_program(repo):
    dest, _ = repo
    metrics = json.loads((dest / "metrics" / "autotune.json").read_text())
    rows = metrics["programs"]
    # programs_ci: 2 xla test programs x 2 layout collections + 1 nlp program x 2
    assert sorted({(r["collection"]) for r in rows}) == ["layout:nlp:default", "layout:nlp:random",
                                                         "layout:xla:default", "layout:xla:random"]
    assert len(rows) == 6 and len({r["program"] for r in rows}) == 3
    for r in rows:
        t_default, t_pick, t_oracle = r["t_default_ns"], r["t_pick_ns"], r["t_oracle_ns"]
        assert 0 < t_oracle <= t_default and 0 < r["evaluations"] <= metrics["budget"]
        if r["share"] is None:
            assert 1 - t_oracle / t_default < 0.01 and r["program"] in metrics["all"]["small_gain_programs"]
        else:
            assert r["share"] == pytest.approx((1 - t_pick / t_default) / (1 - t_oracle / t_default))
        if not r["guard_kept_pick"]:                       # the guard returned the compiler default
            assert t_pick == t_default and r["predicted_ratio"] == 1.0
        else:
            assert r["predicted_ratio"] < 1.0
    summary = json.loads((dest / "metrics" / "summary.json").read_text())
    assert summary["autotune"]["share"] == metrics["all"]["share"]["mean"]
    assert not any("seconds" in key for r in rows for key in r) and "seconds" not in metrics   # an identical
    timings = json.loads((dest / "metrics" / "timings" / "autotune.json").read_text())          # rerun: same file
    assert len(timings["programs"]) == len(rows) and timings["seconds"] > 0
    for slug in ("layout-xla-random", "layout-xla-default", "layout-nlp-random", "layout-nlp-default", "tile-xla"):
        table = json.loads((dest / "models" / "autotune" / f"{slug}.json").read_text())
        assert set(table["models"]) == {"ensemble", "gnn", "lgbm"} and table["graphs"] > 0
        assert all(entry["margin"] >= 0 and entry["pairs"] > 0 for entry in table["models"].values())
        layout = slug.startswith("layout")                 # measured on the sibling layout collection's valid too
        assert (table["sibling_graphs"] > 0) == layout
        assert all((entry["margin_by_distance"] is not None) == layout for entry in table["models"].values())
    for r in rows:                                         # a kept pick lies inside the region that was measured
        entry = metrics["guards"][r["collection"]]
        steps = entry["by_distance"]
        rule = Guard(entry["margin"], entry["max_gain"], entry["max_changed"],
                     (tuple(steps[0]), tuple(steps[1])) if steps else None)
        assert steps is not None                           # the default: the margin at the pick's distance
        if r["guard_kept_pick"]:                           # its prediction beats the margin at its distance
            assert rule.keeps(np.log(r["predicted_ratio"]), r["unguarded"]["changed_blocks"])
    assert metrics["tiles"]["tile:xla"]["all"]["kernels"] == len(metrics["tiles"]["tile:xla"]["kernels"]) > 0
    held = graph_paths(dest / "data" / "synthetic", "tile-xla", "test")
    assert len(metrics["tiles"]["tile:xla"]["kernels"]) == len(held)     # exactly the dataset's test kernels
    versus = metrics["tiles"]["tile:xla"]["all"]["vs_oracle"]            # the candidates, timed, never lose to the
    assert 1.0 <= versus["timed_candidates"]["geomean"] <= versus["default"]["geomean"]   # default they include
    kernels = metrics["tiles"]["tile:xla"]["kernels"]
    assert all(k["t_oracle_ns"] <= k["t_candidates_ns"] <= k["t_default_ns"] for k in kernels)


@pytest.mark.slow
def test_the_stage_pool_gives_the_rows_of_one_process(repo, tmp_path, monkeypatch):
    import torch

    from pipeline.config import load_cfg
    from pipeline.tuning.verify import run

    dest, _ = repo
    monkeypatch.chdir(dest)                                # the fixture's relative paths; run() writes under tmp
    cfg = load_cfg([], params_file=dest / "params.yaml")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)                               # one thread here as in each of the two workers
    try:
        done = {}
        for workers in (1, 2):
            cfg.autotune.workers = workers
            (tmp_path / str(workers)).mkdir()
            done[workers] = run(cfg, tmp_path / str(workers), progress=False)
    finally:
        torch.set_num_threads(threads)
    assert done[1].metrics == done[2].metrics and len(done[2].metrics["programs"]) == 6
    assert [t["program"] for t in done[1].timings["programs"]] == [t["program"] for t in done[2].timings["programs"]]
    assert done[2].timings["workers"] == 2


@pytest.mark.slow
def test_tool_autotunes_a_program_it_never_saw(repo, tmp_path, jax_hlo):
    dest, env = repo
    lowered, compiled = tmp_path / "mine.hlo.txt", tmp_path / "mine_opt.hlo.txt"
    lowered.write_text(jax_hlo["lowered"])
    compiled.write_text(jax_hlo["compiled"])
    done = autotune(dest, env, lowered, compiled, "--model", "lgbm", "--budget", 300, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mine: predicted speed-up" in done.stdout and f"wrote {tmp_path / 'out' / 'mine.json'}" in done.stdout
    result = json.loads((tmp_path / "out" / "mine.json").read_text())
    assert result["model"] == "lgbm" and result["budget"] == 300 and 0 < result["evaluations"] <= 300
    assert 0 < result["predicted_runtime_ratio"] <= 1.0 and result["tiles"]
    program = layout_program(parse_module(jax_hlo["lowered"], "mine"))
    space = LayoutSpace.of(program.graph, program.config_node_ids, "mine")
    assert len(result["layouts"]) == space.n_nodes
    for obj in result["layouts"]:                          # names exactly as in the HLO text, without %
        assert f"{obj['instruction']} = " in jax_hlo["lowered"] and f"{obj['computation']} " in jax_hlo["lowered"]
    picked = space.from_layouts(result["layouts"], "mine.json")
    assert np.array_equal(space.decode(space.encode(picked[None]))[0], picked)
    slug = Collection.parse(result["collection"]).slug
    table = json.loads((dest / "models" / "autotune" / f"{slug}.json").read_text())
    measured = {tuple(kind) for kind in table["measured_blocks"]}          # what stage autotune saw change on valid
    assert all(space.kinds[k][b] in measured for k, b in np.argwhere(picked != 0))
    frozen = space.only_kinds(table["measured_blocks"]).frozen_kinds()
    assert sum(u["blocks"] for u in result["unmeasured_blocks"]) == sum(frozen.values())
    small = result["pruned_nodes"] < table["min_nodes"]                     # the margins' scale for its size
    assert result["pruned_nodes"] > 0 and result["guard"]["min_nodes"] == table["min_nodes"]
    assert (result["margin_scale"] > 1.0) == small and result["margin_scale"] >= 1.0
    assert ("fewer than any valid graph the guard measured" in done.stdout) == small
    for tile in result["tiles"]:
        assert f"%{tile['fusion']} = " in jax_hlo["compiled"] and len(tile["tile"]) == len(tile["default_tile"])
        listed = tile["candidates"]                                  # the model's best sizes, best first, to time
        assert 0 < len(listed) <= min(5, tile["tile_sizes_scored"])
        assert [c["predicted_ratio"] for c in listed] == sorted(c["predicted_ratio"] for c in listed)
        assert sum(c["default"] for c in listed) <= 1 and all(c["tile"] == tile["default_tile"] for c in listed
                                                              if c["default"])


@pytest.mark.slow
def test_the_search_is_seeded_by_the_program_not_its_file_name(repo, tmp_path, jax_hlo, monkeypatch):
    """The same HLO text under two file names got two random streams (the seed hashed the name) and, at the default
    budget, could get two different picks; the stream is now the program's graphs': a comment (or the metadata that
    names the compiling script) changes nothing, another program gets another stream."""
    from pipeline.tuning import tool

    dest, _ = repo
    monkeypatch.chdir(dest)
    cfg = compose([], conf_dir=dest / "conf")
    drawn = []

    def first_draws(space, scorer, search, budget, rng, *args):
        drawn.append(rng.integers(0, 2 ** 62, size=4).tolist())
        raise KeyboardInterrupt                                   # the draws are all this test needs

    monkeypatch.setattr(tool, "guarded_pick", first_draws)
    texts = {"a/mine": jax_hlo["lowered"], "b/yours": jax_hlo["lowered"], "c/mine": jax_hlo["lowered"] + "\n// v2\n",
             "d/mine": jax_hlo["lowered"].replace("tanh", "exponential")}
    for stem, text in texts.items():
        path = tmp_path / f"{stem}.hlo.txt"
        path.parent.mkdir()
        path.write_text(text)
        with pytest.raises(KeyboardInterrupt):
            tool.autotune(cfg, tool.Request(path, None, "lgbm", 10, None, tmp_path / "out"))
    assert drawn[0] == drawn[1] == drawn[2] and drawn[3] != drawn[0]


@pytest.mark.slow
def test_bad_input_is_one_line(repo, tmp_path, jax_hlo):
    dest, env = repo
    plain = tmp_path / "plain.hlo.txt"
    plain.write_text(NO_CONFIGURABLE)
    program = tmp_path / "mine.hlo.txt"
    program.write_text(jax_hlo["lowered"])
    unguarded = tmp_path / "models"                        # the models without stage autotune's guard files
    shutil.copytree(dest / "models" / "lgbm", unguarded / "lgbm")
    cases = [((plain,), f"error: {plain}: no configurable node (convolution, dot, reshape) to lay out"),
             ((program, "--collection", "tile-xla"),
              "error: autotune.collection=tile-xla: a tile collection; autotune needs a layout model here"),
             ((program, "--model", "lgbm", "paths.models_dir=elsewhere"),
              "error: elsewhere/lgbm/layout-xla-random/model.txt: missing; run stage lgbm@layout-xla-random first "
              "(dvc repro)"),
             ((program, "--model", "lgbm", f"paths.models_dir={unguarded}"),
              f"error: {unguarded}/autotune/layout-xla-random.json: missing; run stage autotune first (dvc repro): "
              f"it measures the guard's margin")]
    for args, line in cases:
        refused = autotune(dest, env, *args, "--out", tmp_path / "out")
        assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("under", ["", "sub"])
def test_an_out_folder_where_a_file_stands_is_refused(tmp_path, under):
    """--out (or autotune.out_dir) at a file, or below one: one line before the search, no FileExistsError after."""
    (tmp_path / "taken").write_text("x")
    out = tmp_path / "taken" / under
    expected = f"--out {out}: {tmp_path / 'taken'} is a file; expected a folder"
    with pytest.raises(PredictError, match="^" + re.escape(expected)):
        output_dir(compose([]), out)


def test_an_out_the_system_cannot_write_is_one_line(tmp_path, monkeypatch, jax_hlo):
    """--out where the JSON cannot be written (a name too long here; no permission, a read-only disk) was an OSError
    traceback after the whole search (or a bare `[Errno 2]` line not naming --out); the search is stubbed here."""
    from types import SimpleNamespace

    from pipeline.errors import PipelineError
    from pipeline.tuning import tool

    program = tmp_path / "mine.hlo.txt"
    program.write_text(jax_hlo["lowered"])
    monkeypatch.setattr(tool, "load_guide", lambda *args: SimpleNamespace(rule=SimpleNamespace(measured_blocks=None)))
    monkeypatch.setattr(tool, "search_layouts", lambda *args: {"layouts": []})
    out = tmp_path / ("x" * 300)
    with pytest.raises(PipelineError, match=rf"^--out {out}: cannot write there \(File name too long\); expected a "
                                           r"path this user can create and write$"):
        tool.autotune(compose([]), tool.Request(program, None, "lgbm", 10, None, out))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.hlo.txt"]
