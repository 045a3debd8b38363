"""Stage prune: hand-built collections (outputs, test configs untouched, train-only normalisation, determinism,
corrupt inputs) and an end-to-end run on programs_ci checked against the original files."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import in_split, make_tile_arrays, write_npz
from pipeline.config import compose
from pipeline.graphnet.losses import hinge_min_gap
from pipeline.prune import main, prune_collection
from pipeline.pruning.params import PruneParams
from pipeline.settings.prune import prune_settings
from pipeline.pruned import iter_split, load_pruned_graph
from pipeline.synthesize import run as synthesize
from pipeline.tpugraphs.dataset import Collection, load_graph
from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.schema import SPLITS

LAYOUT = "layout-xla-random"
RUNTIME = np.array([100, 200, 300, 40, 260, 500], np.int64)


def layout_arrays(split: str, seed: int = 0) -> dict[str, np.ndarray]:
    """8-node chain 0 <- 1 <- ... <- 7, configurable nodes 1 and 5, 6 configs (3 = 0 and 4 = 1 repeated)."""
    rng = np.random.default_rng(seed)
    node_feat = np.zeros((8, 140), np.float32)
    node_feat[:, 21:23] = rng.integers(1, 64, size=(8, 2))               # shape_dimensions_0..1: rank 2
    node_feat[:, 27] = node_feat[:, 21:23].sum(1)
    node_feat[:, 28] = node_feat[:, 21:23].prod(1)
    node_feat[:, 134] = 1                                                 # layout_minor_to_major {1, 0}
    node_config_feat = rng.integers(-1, 2, size=(6, 2, 18)).astype(np.float32)
    node_config_feat[3], node_config_feat[4] = node_config_feat[0], node_config_feat[1]
    return in_split({"node_feat": node_feat, "node_opcode": np.array([63, 26, 41, 34, 98, 26, 41, 100], np.uint8),
            "edge_index": np.array([[i + 1, i] for i in range(7)], np.int32),
            "node_config_ids": np.array([1, 5], np.int64), "node_config_feat": node_config_feat,
            "config_runtime": RUNTIME if split != "test" else np.zeros(6, np.int64),
            "node_splits": np.array([[0, 8]], np.int64)}, split)


def stem(split: str, g: int) -> str:
    """Graph ids are unique across splits (prune refuses a graph id in two splits)."""
    return f"{split}_g{g}"


def build_layout(root: Path, n_graphs: int = 2) -> Path:
    for split in SPLITS:
        for g in range(n_graphs):
            write_npz(root / "npz/layout/xla/random" / split / f"{stem(split, g)}.npz", layout_arrays(split, seed=g))
    return root


def params(**overrides) -> PruneParams:
    return dataclasses.replace(prune_settings(compose(["data=programs_ci"]), Collection.parse(LAYOUT)), **overrides)


@pytest.fixture(scope="module")
def layout_run(tmp_path_factory):
    root = build_layout(tmp_path_factory.mktemp("npz"))
    out = tmp_path_factory.mktemp("pruned")
    report = prune_collection(root, LAYOUT, out, params(hops=1, dedup="min", chunk_size=2))
    return root, out / LAYOUT, report


def test_layout_outputs(layout_run):
    _, folder, report = layout_run
    g = load_pruned_graph(folder / "train" / stem("train", 0))
    assert g.node_ids.tolist() == [0, 1, 2, 4, 5, 6]
    assert g.edge_index.tolist() == [[1, 0], [2, 1], [4, 3], [5, 4]]
    assert g.node_config_ids.tolist() == [1, 4] and g.node_opcode.tolist() == [63, 26, 41, 98, 26, 41]
    original = layout_arrays("train", seed=0)["node_config_feat"]
    assert g.config_inverse.tolist() == [0, 1, 2, 0, 1, 3] and g.config_count.tolist() == [2, 2, 1, 1]
    assert g.config_runtime.dtype == np.float64 and g.config_runtime.tolist() == [40, 200, 300, 500]
    assert g.node_config_feat.dtype == np.int8 and np.array_equal(g.node_config_feat, original[[0, 1, 2, 5]])
    assert g.node_feat_raw.shape == (6, 140) and g.node_feat_raw[0, 21:25].tolist()[2:] == [-1, -1]
    assert g.node_feat_raw[:, 134:140].tolist() == [[1, 0, -1, -1, -1, -1]] * 6      # rank-2 layout {1, 0}
    assert g.node_splits.tolist() == [0, 8]
    normalizer = json.loads((folder / "normalizer.json").read_text())
    assert g.node_feat.shape == (6, len(normalizer["columns"])) and g.node_feat.dtype == np.float32
    index = pd.read_csv(folder / "index.csv")
    assert index[["split", "graph_id"]].values.tolist() == [[s, stem(s, i)] for s in sorted(SPLITS) for i in (0, 1)]
    assert set(index["nodes_pruned"]) == {6} and set(index["edges_pruned"]) == {4}
    assert report["splits"]["train"] == {"graphs": 2, "nodes": 16, "edges": 14, "nodes_pruned": 12,
                                         "edges_pruned": 8, "configs": 12, "configs_dedup": 8}
    assert report["splits"]["valid"]["configs_dedup"] == 8 and report["skipped"] == []
    assert sorted(p.name for p in folder.parent.iterdir()) == [LAYOUT]          # no temp folder left behind


def test_duplicate_runtime_spread_in_the_report_and_the_hinge_min_gap(layout_run):
    _, folder, report = layout_run
    # each train graph repeats config 0 (100 and 40 ns: 100 / 40 - 1 = 1.5) and config 1 (200, 260: 0.3);
    # pooled over the 2 train graphs: [0.3, 0.3, 1.5, 1.5] -> median 0.9, 25th percentile 0.3
    spread = json.loads((folder / "report.json").read_text())["duplicate_spread"]
    assert spread == report["duplicate_spread"] and spread["groups"] == 4
    assert spread["percentiles"][50] == pytest.approx(0.9) and spread["percentiles"][25] == pytest.approx(0.3)
    assert spread["percentiles"][0] == pytest.approx(0.3) and spread["percentiles"][100] == pytest.approx(1.5)
    assert hinge_min_gap(0.005, 0.5, report, "r")[0] == pytest.approx(0.9)
    assert hinge_min_gap(0.005, 0.375, report, "r")[0] == pytest.approx(0.45)   # 0.3 + 0.125 * (1.5 - 0.3)
    assert hinge_min_gap(0.005, None, report, "r") == (0.005, "gnn.min_gap")    # the user's number


def test_test_configs_survive_untouched(layout_run):
    root, folder, _ = layout_run
    g = load_pruned_graph(folder / "test" / stem("test", 1))
    original = layout_arrays("test", seed=1)["node_config_feat"]
    assert np.array_equal(g.node_config_feat, original.astype(np.int8))        # all 6, same order
    assert g.config_inverse.tolist() == list(range(6)) and g.config_count.tolist() == [1] * 6
    assert g.config_runtime.tolist() == [0.0] * 6


def test_mean_dedup_and_hops(tmp_path, layout_run):
    root, _, _ = layout_run
    prune_collection(root, LAYOUT, tmp_path / "mean", params(dedup="mean", hops=0))
    g = load_pruned_graph(tmp_path / "mean" / LAYOUT / "valid" / stem("valid", 0))
    assert g.config_runtime.tolist() == [70, 230, 300, 500]
    assert g.node_ids.tolist() == [1, 5] and g.edge_index.shape == (0, 2) and g.node_config_ids.tolist() == [0, 1]
    prune_collection(root, LAYOUT, tmp_path / "all", params(hops=None))
    g = load_pruned_graph(tmp_path / "all" / LAYOUT / "train" / stem("train", 1))
    assert g.node_ids.tolist() == list(range(8)) and len(g.edge_index) == 7 and g.node_config_ids.tolist() == [1, 5]


def test_tile_targets_and_test_without_normalizers(tmp_path):
    tile = tmp_path / "npz/tile/xla"
    for split in SPLITS:
        arrays = in_split(make_tile_arrays(), split)
        arrays["node_feat"][:, 0] = [0, 1, 1]
        arrays["config_feat"] = np.concatenate([arrays["config_feat"], arrays["config_feat"][:1]])   # a repeat
        arrays["config_runtime"] = np.array([1200, 900, 1500, 1100], np.int64)
        arrays["config_runtime_normalizers"] = np.array([1000, 1000, 1000, 1000], np.int64)
        if split == "test":
            arrays["config_runtime"][:] = 0
            del arrays["config_runtime_normalizers"]
        write_npz(tile / split / f"{stem(split, 0)}.npz", arrays)
    prune_collection(tmp_path, "tile:xla", tmp_path / "out", params(dedup="min"))
    train = load_pruned_graph(tmp_path / "out/tile-xla/train" / stem("train", 0))
    assert train.config_runtime.tolist() == [1.1, 0.9, 1.5] and train.config_count.tolist() == [2, 1, 1]
    assert train.config_inverse.tolist() == [0, 1, 2, 0] and train.node_config_feat is None
    assert train.config_feat.shape == (3, 24) and train.config_feat[0, 8:12].tolist() == [8, 128, -1, -1]
    assert train.node_ids.tolist() == [0, 1, 2] and train.node_config_ids is None
    test = load_pruned_graph(tmp_path / "out/tile-xla/test" / stem("test", 0))
    assert test.config_runtime.tolist() == [0, 0, 0, 0] and test.config_inverse.tolist() == [0, 1, 2, 3]
    assert test.config_feat.shape == (4, 24)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_two_runs_are_identical_and_normalisation_uses_train_only(tmp_path, layout_run):
    root, folder, _ = layout_run
    prune_collection(root, LAYOUT, tmp_path / "again", params(hops=1, dedup="min", chunk_size=4, workers=2))
    first, second = _files(folder), _files(tmp_path / "again" / LAYOUT)
    assert first.keys() == second.keys() and len(first) > 30
    assert [k for k in first if first[k] != second[k]] == []   # byte-identical, report.json included
    assert json.loads(first["report.json"])["params"]["hops"] == 1
    # changing valid and test node features leaves the normaliser alone; changing train does not
    for split in ("valid", "test"):
        arrays = layout_arrays(split)
        arrays["node_feat"][:, 21] *= 1000
        write_npz(tmp_path / "npz/layout/xla/random" / split / f"{stem(split, 0)}.npz", arrays)
    write_npz(tmp_path / "npz/layout/xla/random/train" / f"{stem('train', 0)}.npz", layout_arrays("train"))
    write_npz(tmp_path / "npz/layout/xla/random/train" / f"{stem('train', 1)}.npz", layout_arrays("train", seed=1))
    prune_collection(tmp_path, LAYOUT, tmp_path / "valid_changed", params(hops=1))
    normalizer = (tmp_path / "valid_changed" / LAYOUT / "normalizer.json").read_bytes()
    assert normalizer == first["normalizer.json"]
    write_npz(tmp_path / "npz/layout/xla/random/train" / f"{stem('train', 1)}.npz", layout_arrays("train", seed=7))
    prune_collection(tmp_path, LAYOUT, tmp_path / "train_changed", params(hops=1))
    assert (tmp_path / "train_changed" / LAYOUT / "normalizer.json").read_bytes() != normalizer


def test_corrupt_graph_names_the_file_and_leaves_no_output(tmp_path):
    root = build_layout(tmp_path / "data", n_graphs=1)
    bad = root / "npz/layout/xla/random/valid" / f"{stem('valid', 0)}.npz"
    bad.write_bytes(bad.read_bytes()[:300])                              # truncated file
    with pytest.raises(TpuGraphsFormatError, match=str(bad)):
        prune_collection(root, LAYOUT, tmp_path / "out", params())
    with pytest.raises(TpuGraphsFormatError, match=str(bad)):           # valid graphs are never skipped
        prune_collection(root, LAYOUT, tmp_path / "out", params(skip_invalid_train=True))
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())   # no output, no temp folder


def test_skip_invalid_train_lists_the_graph(tmp_path):
    root = build_layout(tmp_path / "data", n_graphs=2)
    arrays = layout_arrays("train")
    arrays["node_config_feat"][4, 1, 3] = 7                              # found only while streaming configs
    bad = write_npz(root / "npz/layout/xla/random/train" / f"{stem('train', 1)}.npz", arrays)
    with pytest.raises(TpuGraphsFormatError, match=f"{bad}.*node_config_feat"):
        prune_collection(root, LAYOUT, tmp_path / "out", params(chunk_size=2))
    report = prune_collection(root, LAYOUT, tmp_path / "out", params(chunk_size=2, skip_invalid_train=True))
    assert [(s["split"], s["graph_id"]) for s in report["skipped"]] == [("train", stem("train", 1))]
    assert "node_config_feat" in report["skipped"][0]["error"] and report["splits"]["train"]["graphs"] == 1
    folder = tmp_path / "out" / LAYOUT
    assert sorted(p.name for p in (folder / "train").iterdir()) == [stem("train", 0)]   # no partial folder or staged file
    assert stem("train", 1) not in set(pd.read_csv(folder / "index.csv").query("split == 'train'")["graph_id"])


def _spoil_runtimes(root: Path, split: str, graphs: range, how: str) -> None:
    for g in graphs:
        arrays = layout_arrays(split, seed=g)
        if how == "tied":
            arrays["config_runtime"] = np.full(6, 250, np.int64)
        else:       # one configuration: its repeats (rows 3, 4 repeat 0, 1) merge into it
            arrays["node_config_feat"] = np.repeat(arrays["node_config_feat"][:1], 6, axis=0)
        write_npz(root / "npz/layout/xla/random" / split / f"{stem(split, g)}.npz", arrays)


@pytest.mark.parametrize("split, how", [("train", "tied"), ("train", "one config"), ("valid", "tied"),
                                        ("valid", "one config")])
def test_a_split_with_no_two_runtimes_to_order_is_refused_naming_its_folder(tmp_path, split, how):
    root = build_layout(tmp_path / "data", n_graphs=2)
    _spoil_runtimes(root, split, range(1), how)
    prune_collection(root, LAYOUT, tmp_path / "one", params())          # one graph of two: the other teaches
    _spoil_runtimes(root, split, range(2), how)
    folder = root / "npz/layout/xla/random" / split
    with pytest.raises(TpuGraphsFormatError, match=f"^{folder}: expected a {split} graph with two configurations of "
                                                   f"different runtimes .*; found 2 graph\\(s\\), each with one "
                                                   f"configuration \\(repeats merged\\) or all its runtimes equal$"):
        prune_collection(root, LAYOUT, tmp_path / "out", params())
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())   # no output, no temp folder


def test_main_writes_metrics(tmp_path, layout_run, capsys):
    root, _, _ = layout_run
    main(["--collection", "layout:xla:random", "data=programs_ci", f"data.root={root}",
          f"paths.pruned_dir={tmp_path / 'pruned'}", f"paths.metrics_dir={tmp_path / 'metrics'}", "prune.hops=all"])
    metrics = json.loads((tmp_path / "metrics/prune" / f"{LAYOUT}.json").read_text())
    assert metrics["graphs"] == 6 and metrics["nodes_pruned"] == metrics["nodes"] == 48
    assert metrics["configs"] == 36 and metrics["configs_dedup"] == 28 and metrics["skipped"] == 0
    assert not {"wall_s", "peak_rss_mb", "seconds"} & set(metrics)         # an identical rerun: the same file
    timings = json.loads((tmp_path / "metrics/timings/prune" / f"{LAYOUT}.json").read_text())
    assert set(timings) == {"seconds", "peak_rss_mb"} and timings["seconds"] > 0 and timings["peak_rss_mb"] > 0
    assert "48 -> 48" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"setting prune.hops=-2: expected an integer >= 0 or one of \['all'\]"):
        main(["--collection", LAYOUT, "data=programs_ci", f"data.root={root}", "prune.hops=-2"])


@pytest.fixture(scope="module")
def programs_ci(tmp_path_factory):
    """programs_ci generated once, tile-xla and layout-nlp-default pruned with the default conf/prune."""
    tmp = tmp_path_factory.mktemp("programs_ci")
    cfg = compose(["data=programs_ci", f"paths.synthetic_dir={tmp / 'synthetic'}",
                   f"paths.pruned_dir={tmp / 'pruned'}", f"paths.metrics_dir={tmp / 'metrics'}"])
    synthesize(cfg, progress=False)
    for slug in ("tile-xla", "layout-nlp-default"):
        main(["--collection", slug, "data=programs_ci", f"paths.synthetic_dir={tmp / 'synthetic'}",
              f"paths.pruned_dir={tmp / 'pruned'}", f"paths.metrics_dir={tmp / 'metrics'}"])
    return cfg


@pytest.mark.slow
@pytest.mark.parametrize("slug", ["tile-xla", "layout-nlp-default"])
def test_programs_ci_against_the_original_files(programs_ci, slug):
    cfg, checked = programs_ci, 0
    root = Path(cfg.data.root) / "npz"
    index = pd.read_csv(Path(cfg.paths.pruned_dir) / slug / "index.csv")
    for split in SPLITS:
        for g in iter_split(cfg.paths.pruned_dir, slug, split):
            source = index.set_index(["split", "graph_id"]).loc[(split, g.graph_id), "source_file"]
            original = load_graph(root / source, slug.replace("-", ":", 2 if slug != "tile-xla" else 1), split)
            e = original.edge_index
            if original.node_config_ids is None:                               # tile: whole graph
                assert np.array_equal(g.node_ids, np.arange(original.n_nodes))
                configs, kept = original.config_feat, g.config_feat
            else:                                                               # 1 hop around configurable nodes
                assert np.array_equal(g.node_ids[g.node_config_ids], original.node_config_ids)
                seed = np.zeros(original.n_nodes, bool)
                seed[original.node_config_ids] = True
                near = seed.copy()
                near[e[seed[e[:, 0]], 1]] = True                                # inputs of configurable nodes
                near[e[seed[e[:, 1]], 0]] = True                                # their consumers
                assert g.node_ids.tolist() == np.flatnonzero(near).tolist()
                configs, kept = original.read_node_config_feat(), g.node_config_feat
            assert np.array_equal(g.node_ids[g.edge_index], e[np.isin(e, g.node_ids).all(1)])   # induced edges
            assert len(g.config_inverse) == original.n_configs
            if split == "test":                                                 # untouched, same order
                assert g.config_inverse.tolist() == list(range(original.n_configs))
                assert (g.config_runtime == 0).all() and g.config_count.tolist() == [1] * original.n_configs
                if original.node_config_ids is not None:
                    assert np.array_equal(kept, configs)
            else:
                if original.node_config_ids is not None:
                    assert np.array_equal(kept[g.config_inverse], configs)    # every original row restored
                    target = original.config_runtime.astype(float)
                else:
                    target = original.config_runtime / original.config_runtime_normalizers
                assert len(np.unique(configs.reshape(len(configs), -1), axis=0)) == g.n_kept
                for k in range(g.n_kept):
                    assert g.config_runtime[k] == target[g.config_inverse == k].min()
            checked += 1
    assert checked == len(index) > 0
    metrics = json.loads((Path(cfg.paths.metrics_dir) / "prune" / f"{slug}.json").read_text())
    assert metrics["graphs"] == checked and metrics["configs_dedup"] <= metrics["configs"]
