"""Stage synthesize on the programs_ci preset (programs of the zoo): schema, layout, test split conventions,
determinism, stats and ceilings."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import BIN, ROOT

from pipeline.config import compose, write_params
from pipeline.errors import PipelineError
from pipeline.scoring.metrics import graph_score
from pipeline.zoo import common
from pipeline.synthesize import format_stats, main, run
from pipeline.tpugraphs.dataset import COLLECTIONS, check_disjoint_splits, graph_paths, load_graph
from pipeline.tpugraphs.schema import SPLITS

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def ci_cfg(out: Path, *extra: str):
    return compose(["data=programs_ci", f"paths.synthetic_dir={out}", *extra])


@pytest.fixture(scope="module")
def ci_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "synthetic"
    run(ci_cfg(out), progress=False)
    return out


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_file_loads_with_official_dtypes(ci_dir):
    for collection in COLLECTIONS:
        check_disjoint_splits(ci_dir / "npz", collection)        # no graph in two splits (what prune refuses)
        for split in SPLITS:
            paths = graph_paths(ci_dir / "npz", collection, split)
            assert paths, f"no files for {collection.name} {split}"
            for path in paths:
                graph = load_graph(path, collection, split)
                assert graph.node_feat.shape[1] == 140
                with np.load(path) as z:
                    assert z["node_opcode"].dtype == np.uint8
                    assert z["edge_index"].dtype == np.int64 and z["config_runtime"].dtype == np.int64
                    assert z["node_feat"].dtype == np.float32
                    if collection.kind == "layout":
                        assert z["node_splits"].shape[0] == 1 and z["node_splits"].dtype == np.int64
                        assert z["node_config_feat"].dtype == np.float32
                        feat = graph.read_node_config_feat()
                        assert feat.shape == (graph.n_configs, len(graph.node_config_ids), 18)
                    else:
                        assert z["config_feat"].shape == (graph.n_configs, 24)
                        assert z["config_runtime_normalizers"].dtype == np.int64


def test_edges_point_backwards_in_topological_order(ci_dir):
    path = graph_paths(ci_dir / "npz", "layout:nlp:random", "train")[0]
    graph = load_graph(path, "layout:nlp:random", "train")
    consumer, producer = graph.edge_index[:, 0], graph.edge_index[:, 1]
    assert (producer < consumer).all()


def test_test_split_hides_runtimes_and_truth_is_written(ci_dir):
    for collection in COLLECTIONS:
        paths = graph_paths(ci_dir / "npz", collection, "test")
        for path in paths:
            assert HEX32.match(path.stem), path.stem
            graph = load_graph(path, collection, "test")
            assert not graph.config_runtime.any()
            with np.load(ci_dir / "truth" / collection.slug / f"{path.stem}.npz") as truth:
                assert len(truth["config_runtime"]) == graph.n_configs
                assert (truth["config_runtime"] > 0).all()
                if collection.kind == "tile":
                    assert not graph.config_runtime_normalizers.any()
                    assert (truth["config_runtime_normalizers"] > 0).all()


def test_train_stems_look_like_real_names(ci_dir):
    tile = [p.stem for p in graph_paths(ci_dir / "npz", "tile:xla", "train")]
    assert all(re.match(r"^[a-z0-9_]+_[0-9a-f]{16}$", s) for s in tile), tile[:3]
    xla_random = {p.stem for p in graph_paths(ci_dir / "npz", "layout:xla:random", "valid")}
    xla_default = {p.stem for p in graph_paths(ci_dir / "npz", "layout:xla:default", "valid")}
    assert xla_random == xla_default   # both searches tune the same graphs, as in the real data


def test_default_search_spread_is_tighter_than_random(ci_dir):
    def spreads(name):
        out = []
        for split in ("train", "valid"):
            for path in graph_paths(ci_dir / "npz", name, split):
                runtime = load_graph(path, name, split).config_runtime
                out.append(runtime.max() / runtime.min())
        return np.median(out)

    for source in ("xla", "nlp"):
        assert spreads(f"layout:{source}:default") < spreads(f"layout:{source}:random")


def test_stats_json_counts_files(ci_dir):
    stats = json.loads((ci_dir / "stats.json").read_text())
    assert stats["synthesized"] is True
    for collection in COLLECTIONS:
        for split in SPLITS:
            row = stats["collections"][collection.slug][split]
            assert row["graphs"] == len(graph_paths(ci_dir / "npz", collection, split))
            assert row["nodes"] > 0 and row["configs"] > 0
    assert "layout-xla-random" in format_stats(stats)


def test_ceilings_are_scores_above_a_random_ranking(ci_dir):
    stats = json.loads((ci_dir / "stats.json").read_text())
    rng = np.random.default_rng(0)
    for collection in COLLECTIONS:
        ceilings = stats["ceiling"][collection.slug]
        assert set(ceilings) == set(SPLITS)
        assert all(-1.0 <= c <= 1.0 for c in ceilings.values())
        random_scores = []
        for path in graph_paths(ci_dir / "npz", collection, "valid"):
            graph = load_graph(path, collection, "valid")
            truth = graph.config_runtime / (graph.config_runtime_normalizers if collection.kind == "tile" else 1)
            random_scores += [graph_score(collection.kind, rng.random(len(truth)), truth) for _ in range(20)]
        if collection.kind == "layout":
            assert ceilings["valid"] > np.mean(random_scores) + 0.1, collection.name
        else:   # tile: the top 5 of a handful of tilings often holds the best even at random
            assert ceilings["valid"] >= np.mean(random_scores) and ceilings["valid"] > 0.95


def test_stats_list_programs_of_every_family_and_source(ci_dir):
    stats = json.loads((ci_dir / "stats.json").read_text())
    assert stats["builder"] == "programs"
    assert {p["source"] for p in stats["programs"]} == {"xla", "nlp"}
    assert len({p["family"] for p in stats["programs"]}) >= 4
    layout = [p.stem for p in graph_paths(ci_dir / "npz", "layout:xla:random", "train")]
    assert sorted(layout) == sorted(p["name"] for p in stats["programs"] if p["source"] == "xla"
                                    and p["split"] == "train" and "layout" in p["graphs"])


@pytest.mark.slow
def test_deterministic_for_a_seed(tmp_path):
    small = ["data.generator.programs={xla: {train: 1, valid: 0, test: 1}, nlp: {train: 1, valid: 0, test: 0}}"]
    for name, extra in (("a", []), ("b", []), ("c", ["data.generator.seed=1"])):
        common.compiled_text.cache_clear()   # lower and compile again: the HLO text itself must be stable
        common.lowered_text_cache_clear()
        run(ci_cfg(tmp_path / name, *small, *extra), progress=False)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a") != digest(tmp_path / "c")


def test_real_data_is_refused_and_leaves_the_built_in_dataset_alone(tmp_path, capsys):
    out = tmp_path / "synthetic"
    (out / "npz").mkdir(parents=True)
    (out / "npz" / "kept.npz").write_bytes(b"built before")
    with pytest.raises(SystemExit) as stop:
        main(["data=tpugraphs", "data.root=/nonexistent", f"paths.synthetic_dir={out}"])
    assert str(stop.value) == "error: data.kind=tpugraphs: nothing to synthesize (the pipeline reads data.root=" \
                              "/nonexistent); build the built-in dataset with a generated preset: " \
                              "python -m pipeline.synthesize data=programs"
    assert [p.relative_to(out).as_posix() for p in sorted(out.rglob("*"))] == ["npz", "npz/kept.npz"]
    with pytest.raises(ValueError, match="data.kind=tpugraphs: nothing to synthesize"):
        run(compose(["data=tpugraphs", "data.root=/nonexistent", f"paths.synthetic_dir={out}"]))
    (out / "stats.json").write_text(json.dumps({"synthesized": False, "note": "nothing synthesized (old)"}))
    main(["data=tpugraphs", "data.root=/nonexistent", f"paths.synthetic_dir={out}", "--stats"])
    assert capsys.readouterr().out == "nothing synthesized (old)\n"      # a folder an earlier version left


@pytest.mark.slow
@pytest.mark.parametrize("preset, stages", [("programs_ci", ["synthesize@programs"]), ("tpugraphs", [])])
def test_dvc_runs_synthesize_only_for_generated_data(preset, stages, tmp_path):
    """dvc.yaml's synthesize stage exists once per data.synthesized_by: none for real data, so `dvc repro` on a
    user's root (README, Featurise your own program) never replaces data/synthetic, which that root links from."""
    (tmp_path / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    write_params(compose([f"data={preset}", "data.root=data/mine"] if preset == "tpugraphs" else [f"data={preset}"]),
                 tmp_path / "params.yaml")
    for cmd in (["git", "init", "-q"], [str(BIN / "dvc"), "init", "-q"]):
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    listed = subprocess.run([str(BIN / "dvc"), "stage", "list", "--name-only"], cwd=tmp_path, check=True,
                            capture_output=True, text=True).stdout.split()
    assert [s for s in listed if s.startswith("synthesize")] == stages
    assert "submit" in listed and yaml.safe_load((tmp_path / "params.yaml").read_text())["data"]["synthesized_by"] \
        == [s.split("@")[1] for s in stages]


def test_stats_flag_reads_and_never_rewrites_the_dataset(ci_dir, tmp_path, capsys):
    """`--stats` prints the built dataset's table and leaves every file (bytes and modification time) alone; with
    nothing built it says so in one line instead of generating."""
    before = {p: (p.stat().st_mtime_ns, d) for p, d in zip(sorted(ci_dir.rglob("*")), digest(ci_dir).values())
              if p.is_file()}
    main(["data=programs_ci", f"paths.synthetic_dir={ci_dir}", "--stats"])
    printed = capsys.readouterr().out
    assert printed.strip() == format_stats(json.loads((ci_dir / "stats.json").read_text()))
    assert "layout-nlp-default" in printed
    after = {p: (p.stat().st_mtime_ns, d) for p, d in zip(sorted(ci_dir.rglob("*")), digest(ci_dir).values())
             if p.is_file()}
    assert after == before
    empty = tmp_path / "unbuilt"
    with pytest.raises(SystemExit) as stop:
        main(["data=programs_ci", f"paths.synthetic_dir={empty}", "--stats"])
    assert str(stop.value) == f"error: {empty / 'stats.json'}: no dataset stats there; build the dataset first " \
                              f"(`dvc repro synthesize`)"
    assert not empty.exists()


@pytest.mark.parametrize("edit, key, expected", [
    (lambda s: s["ceiling"]["tile-xla"].update(test=int("9" * 400)), "ceiling.tile-xla.test",
     "a finite number or null"),                                             # was an OverflowError traceback
    (lambda s: s["ceiling"]["tile-xla"].update(test="x"), "ceiling.tile-xla.test", "a finite number or null"),
    (lambda s: s["ceiling"]["tile-xla"].update(test=float("nan")), "ceiling.tile-xla.test", "a finite number or null"),
    (lambda s: s.pop("collections"), "collections", "an object {collection: {split: counts >= 0 of graphs"),
    (lambda s: s.update(collections=[1]), "collections", "an object"),      # an AttributeError traceback
    (lambda s: s["collections"]["tile-xla"]["test"].update(graphs=-1), "collections.tile-xla.test", "counts >= 0"),
    (lambda s: s["collections"]["tile-xla"]["test"].pop("nodes"), "collections.tile-xla.test", "counts >= 0"),
])
def test_stats_flag_refuses_an_edited_stats_json_naming_the_key(tmp_path, edit, key, expected):
    """--stats on a stats.json cut short or edited: one line naming the file and key (tracebacks before)."""
    stats = {"synthesized": True, "ceiling": {"tile-xla": {"test": 1.0}},
             "collections": {"tile-xla": {"test": {"graphs": 2, "nodes": 9, "edges": 8, "configs": 40}}}}
    edit(stats)
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    with pytest.raises(PipelineError) as err:
        main(["data=programs_ci", f"paths.synthetic_dir={tmp_path}", "--stats"])
    assert str(err.value).startswith(f"{tmp_path / 'stats.json'}: key {key!r}: expected {expected}")
