"""The gnn stage end to end on a tiny hand-built collection, single process and DDP (2 CPU processes, gloo)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pruned_graphs import FEAT_DIM, make_layout_graph, make_tile_graph

from pipeline import gnn as gnn_stage
from pipeline.config import compose, repo_root
from pipeline.errors import PipelineError
from pipeline.graphnet.checkpoint import load_checkpoint, load_model
from pipeline.graphnet.train_loop import TrainSettings
from pipeline.predictions import load_predictions, predictions_path
from pipeline.files import write_json
from pipeline.pruned import NORMALIZER_FILE, REPORT_FILE, save_pruned_graph, spread_summary, write_index
from pipeline.pruning.normalize import Normalizer
from pipeline.settings.gnn import gnn_settings, model_spec
from pipeline.tpugraphs.dataset import Collection
from pipeline.settings_types import SettingsError
from pipeline.tpugraphs.schema import NODE_FEAT_DIM
GRAPHS = {"train": 3, "valid": 2, "test": 2}
TINY = ["gnn.hidden=8", "gnn.opcode_dim=4", "gnn.config_value_dim=2", "gnn.attention_heads=2", "gnn.epochs=2",
        "gnn.seeds=[0]", "gnn.tta=2", "gnn.infer_batch=8", "gnn.num_threads=1", "gnn.device=cpu", "wandb.mode=disabled"]


def npz_arrays(graph, kind: str) -> dict[str, np.ndarray]:
    """The official-schema file a pruned graph could have come from (identity pruning)."""
    n = graph.n_nodes
    node_feat = np.zeros((n, NODE_FEAT_DIM), np.float32)
    node_feat[:, :graph.node_feat.shape[1]] = graph.node_feat
    arrays = {"node_feat": node_feat, "node_opcode": graph.node_opcode.astype(np.uint8),
              "edge_index": graph.edge_index}
    if kind == "layout":
        arrays |= {"node_config_ids": graph.node_config_ids, "node_config_feat": graph.node_config_feat.astype(np.float32),
                   "config_runtime": graph.config_runtime[graph.config_inverse].astype(np.int64),
                   "node_splits": graph.node_splits.reshape(1, -1)}
    else:
        arrays |= {"config_feat": graph.config_feat, "config_runtime": np.round(graph.config_runtime * 1000).astype(np.int64),
                   "config_runtime_normalizers": np.full(graph.n_configs, 1000, np.int64)}
    return arrays


def write_collection(root: Path, collection: Collection) -> None:
    """npz tree + hidden test truth under root/syn, pruned graphs under root/pruned."""
    rows = []
    for split, count in GRAPHS.items():
        for i in range(count):
            gid = f"{split}_{i}"
            seed = 100 * list(GRAPHS).index(split) + i
            graph = (make_layout_graph(gid, split, n_nodes=6 + i, n_configs=20, seed=seed) if collection.kind == "layout"
                     else make_tile_graph(gid, split, n_configs=20, seed=seed))
            if collection.kind == "layout":
                graph.node_splits = np.array([0, 2, graph.n_nodes], np.int64)   # 2 HLO computations
            arrays = npz_arrays(graph, collection.kind)
            folder = root / "syn" / "npz" / collection.subdir / split
            folder.mkdir(parents=True, exist_ok=True)
            if split == "test":
                truth = root / "syn" / "truth" / collection.slug
                truth.mkdir(parents=True, exist_ok=True)
                np.savez(truth / f"{gid}.npz", **{k: v for k, v in arrays.items() if k.startswith("config_runtime")})
                arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
                graph.config_runtime = np.zeros_like(graph.config_runtime)
            np.savez(folder / f"{gid}.npz", **arrays)
            save_pruned_graph(graph, root / "pruned" / collection.slug / split / gid)
            rows.append({"split": split, "graph_id": gid, "source_file": f"{gid}.npz", "nodes": graph.n_nodes,
                         "edges": len(graph.edge_index), "nodes_pruned": graph.n_nodes,
                         "edges_pruned": len(graph.edge_index), "configs": graph.n_configs,
                         "configs_dedup": graph.n_kept})
    write_index(rows, root / "pruned" / collection.slug / "index.csv")
    # what stage prune records for the hinge's min_gap (gnn.min_gap_quantile): no repeated train config here
    write_json({"duplicate_spread": spread_summary([])}, root / "pruned" / collection.slug / REPORT_FILE)


def overrides(root: Path) -> list[str]:
    return ["data=programs_ci", f"paths.synthetic_dir={root / 'syn'}", f"paths.pruned_dir={root / 'pruned'}",
            f"paths.models_dir={root / 'models'}", f"paths.predictions_dir={root / 'predictions'}",
            f"paths.metrics_dir={root / 'metrics'}", f"paths.plots_dir={root / 'plots'}",
            f"paths.checkpoints_dir={root / 'checkpoints'}", *TINY]


GST = ["gnn=gst", "gnn.gst.segment_size=3", "gnn.gst.finetune_epochs=1", "gnn.gst.segmentation=node_splits"]


def check_outputs(root: Path, collection: Collection, world_size: int, epochs: int = 2) -> dict:
    metrics = json.loads((root / "metrics" / "gnn" / f"{collection.slug}.json").read_text())
    assert metrics["collection"] == collection.name and metrics["world_size"] == world_size
    for split in ("valid", "test"):
        assert metrics[split]["graphs"] == GRAPHS[split] and -1.0 <= metrics[split]["score"] <= 1.0
        preds = load_predictions(predictions_path(root / "predictions", "gnn", collection.slug, split))
        assert sorted(preds) == [f"{split}_{i}" for i in range(GRAPHS[split])]
        assert all(len(preds[g]) == 20 for g in preds)
    curve = pd.read_csv(root / "plots" / "gnn" / collection.slug / "curve.csv")
    assert curve["epoch"].tolist() == list(range(epochs)) and {"loss", "valid_score", "lr"} <= set(curve.columns)
    per_graph = pd.read_csv(root / "plots" / "gnn" / f"{collection.slug}_per_graph.csv")
    assert len(per_graph) == GRAPHS["valid"] + GRAPHS["test"]
    member = root / "models" / "gnn" / collection.slug / "seed0"
    model, meta = load_model(member / "model.pt")
    assert meta["best_epoch"] in range(epochs) and not (member / "checkpoint.pt").exists()
    assert (root / "checkpoints" / "gnn" / collection.slug / "seed0" / "checkpoint.pt").exists()
    assert meta["last_epoch"] == epochs - 1 and meta["stopped"] == "budget"        # 2 epochs < gnn.patience
    (row,) = metrics["members"]
    assert {k: row[k] for k in ("seed", "best_epoch", "last_epoch", "stopped")} == {
        "seed": 0, "best_epoch": meta["best_epoch"], "last_epoch": epochs - 1, "stopped": "budget"}
    assert (metrics["stopped_at_budget"], metrics["stopped"], metrics["best_epoch"]) == (1, "budget", meta["best_epoch"])
    return metrics


@pytest.mark.parametrize("slug", ["layout-xla-default", "tile-xla"])
def test_stage_writes_every_output(tmp_path, monkeypatch, slug):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    collection = Collection.parse(slug)
    write_collection(tmp_path, collection)
    gnn_stage.main(["--collection", slug, *overrides(tmp_path)])
    check_outputs(tmp_path, collection, world_size=1)
    # no stray temp files among the outputs
    assert not [p for p in tmp_path.rglob("*.tmp*")]


def tracked_bytes(root: Path, slug: str) -> dict[str, bytes]:
    """Every file the stage writes that DVC tracks or another stage reads (the timings file excepted)."""
    folders = [root / d for d in ("models", "predictions", "metrics", "plots", "checkpoints")]
    return {str(p.relative_to(root)): p.read_bytes() for d in folders for p in sorted(d.rglob("*"))
            if p.is_file() and "timings" not in p.parts}


def test_an_identical_rerun_writes_identical_outputs_and_its_seconds_apart(tmp_path, monkeypatch, capsys):
    """No wall-clock time in the model, checkpoint, curve or metrics (so `dvc status` stays clean downstream and
    the run cache can stand in for the stage); the seconds land in <metrics_dir>/timings/gnn/<slug>.json."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    slug = "layout-xla-default"
    write_collection(tmp_path, Collection.parse(slug))
    gnn_stage.main(["--collection", slug, *overrides(tmp_path)])
    first = tracked_bytes(tmp_path, slug)
    gnn_stage.main(["--collection", slug, *overrides(tmp_path)])
    assert tracked_bytes(tmp_path, slug) == first
    assert {f"checkpoints/gnn/{slug}/seed0/checkpoint.pt", f"plots/gnn/{slug}/curve.csv",
            f"metrics/gnn/{slug}.json"} <= set(first)
    timings = json.loads((tmp_path / "metrics" / "timings" / "gnn" / f"{slug}.json").read_text())
    assert timings["seconds"] > 0 and [m["seed"] for m in timings["members"]] == [0]
    assert timings["members"][0]["epoch_seconds"] > 0
    out = capsys.readouterr().out
    assert f"gnn {slug}: valid " in out and "s/epoch, ETA " in out and "(at most " in out


def test_stage_in_gst_mode(tmp_path, monkeypatch):
    """gnn=gst: 2 GST epochs + 1 head fine-tuning epoch over 3-node segments, segment-wise inference."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    collection = Collection.parse("layout-nlp-default")
    write_collection(tmp_path, collection)
    gnn_stage.main(["--collection", collection.slug, *overrides(tmp_path), *GST])
    check_outputs(tmp_path, collection, world_size=1, epochs=3)
    state = load_checkpoint(tmp_path / "checkpoints" / "gnn" / collection.slug / "seed0" / "checkpoint.pt")
    assert state["gst"][0]["table"] and state["spec"]["norm"] == "layer"


def test_gst_fine_tuning_is_refused_without_the_pooled_head(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    collection = Collection.parse("layout-nlp-default")
    write_collection(tmp_path, collection)
    with pytest.raises(SystemExit, match=r"setting gnn.pooled_head=False: expected true when gnn.mode=gst fine-tunes"):
        gnn_stage.main(["--collection", collection.slug, *overrides(tmp_path), *GST, "gnn.pooled_head=false"])


def test_gst_mode_is_refused_with_instance_norm(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    collection = Collection.parse("layout-nlp-default")
    write_collection(tmp_path, collection)
    with pytest.raises(SystemExit, match=r"setting gnn.norm='instance': expected layer or none when gnn.mode=gst"):
        gnn_stage.main(["--collection", collection.slug, *overrides(tmp_path), "gnn.mode=gst", "gnn.norm=instance"])


def test_a_min_gap_from_the_data_that_orders_no_train_pair_falls_back_to_gnn_min_gap(tmp_path, capsys):
    collection = Collection.parse("layout:xla:random")
    write_collection(tmp_path, collection)
    cfg = compose(overrides(tmp_path))
    settings = gnn_settings(cfg, collection)
    report = tmp_path / "pruned" / collection.slug / REPORT_FILE
    write_json({"duplicate_spread": spread_summary([np.array([0.01, 0.02])])}, report)      # a usual spread: kept
    assert gnn_stage.train_min_gap(cfg, collection, settings, verbose=True) == pytest.approx(0.015)
    assert "warning" not in capsys.readouterr().err
    write_json({"duplicate_spread": spread_summary([np.array([1e6])])}, report)       # repeats 10^6 times apart
    assert gnn_stage.train_min_gap(cfg, collection, settings, verbose=True) == settings.train.min_gap
    assert f"min_gap 1000000.00000 (quantile 0.5 of the runtime spread of 1 groups of identical train configs) " \
           f"orders no pair of train configurations; using gnn.min_gap={settings.train.min_gap}" in capsys.readouterr().err


def settings_for(cfg, slug: str) -> TrainSettings:
    return gnn_settings(cfg, Collection.parse(slug)).train


def spec_for(gnn, slug: str):
    return model_spec(gnn, Collection.parse(slug), 4)


def test_configs_per_graph_by_search():
    cfg = compose(["gnn.configs_per_graph.random=32", "gnn.configs_per_graph.default=16"])
    assert settings_for(cfg, "layout-nlp-random").configs_per_graph == 32
    assert settings_for(cfg, "layout-nlp-default").configs_per_graph == 16
    assert settings_for(compose(["gnn.configs_per_graph=8"]), "tile-xla").configs_per_graph == 8


def test_node_reduce_and_budget_by_search():
    cfg = compose([])                                  # conf: node_reduce {random: mean, default: sum}, no tile entry
    assert spec_for(cfg.gnn, "layout-xla-random").node_reduce == "mean"
    assert spec_for(cfg.gnn, "layout-xla-default").node_reduce == "sum"
    assert spec_for(cfg.gnn, "tile-xla").node_reduce is None        # tile models have no node reduction
    assert [settings_for(cfg, s).epochs for s in ("tile-xla", "layout-xla-random", "layout-nlp-default")] == [60, 100, 60]
    one = compose(["gnn.node_reduce=sum", "gnn.epochs=7"])         # one value for every collection still works
    assert spec_for(one.gnn, "layout-xla-random").node_reduce == "sum"
    assert settings_for(one, "layout-nlp-random").epochs == settings_for(one, "tile-xla").epochs == 7
    with pytest.raises(SettingsError, match=r"gnn.epochs=.*missing \['tile'\]"):
        compose(["~gnn.epochs.tile"])
    with pytest.raises(SettingsError, match=r"gnn.node_reduce.random='max'"):
        compose(["gnn.node_reduce.random=max"])


def test_learning_rate_and_norm_by_collection_kind_or_one_number():
    cfg = compose(["gnn.lr.tile=0.5", "gnn.lr.default=0.25"])
    assert settings_for(cfg, "tile-xla").lr == 0.5
    assert settings_for(cfg, "layout-xla-default").lr == 0.25
    assert settings_for(compose(["gnn.lr=0.125"]), "tile-xla").lr == 0.125
    gst = compose(["gnn=gst"]).gnn                     # the GST preset: layer norm for layout, tile keeps instance
    assert spec_for(gst, "tile-xla").norm == "instance"
    assert spec_for(gst, "layout-xla-random").norm == "layer"
    assert spec_for(compose([]).gnn, "tile-xla").norm == "instance"
    with pytest.raises(ValueError, match="no entry 'random'"):      # the schema allows it for tile/default-only data
        settings_for(compose(["~gnn.lr.random", "data.collections=[tile-xla,layout-nlp-default]"]),
                     "layout-nlp-random")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["pruned", "gst"])
def test_ddp_two_cpu_processes(tmp_path, mode):
    collection = Collection.parse("layout-xla-random")
    write_collection(tmp_path, collection)
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "pipeline.gnn", "--collection", collection.slug, *overrides(tmp_path),
           *(GST if mode == "gst" else [])]
    done = subprocess.run(cmd, cwd=repo_root(), env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    check_outputs(tmp_path, collection, world_size=2, epochs=3 if mode == "gst" else 2)
    if mode == "gst":                                   # each rank's table and cycles, for an exact resume
        state = load_checkpoint(tmp_path / "checkpoints" / "gnn" / collection.slug / "seed0" / "checkpoint.pt")
        assert len(state["gst"]) == 2 and all(s["table"] for s in state["gst"])


def test_seed_members_are_distinct_and_the_stage_averages_their_ranks(tmp_path, monkeypatch):
    """gnn.seeds=[0,3]: two models under seed0/ and seed3/, different weights; the stage's predictions are the
    rank-normalised mean of what each saved member predicts; metrics report both members and the ensemble."""
    import torch

    from pipeline.graphnet.members import member_seed, rank_mean

    monkeypatch.setenv("WANDB_MODE", "disabled")
    collection = Collection.parse("layout-xla-random")
    write_collection(tmp_path, collection)
    args = [*overrides(tmp_path), "gnn.seeds=[0,3]", "seed=1"]
    gnn_stage.main(["--collection", collection.slug, *args])
    cfg = compose(args)
    folder = tmp_path / "models" / "gnn" / collection.slug
    (a, meta_a), (b, meta_b) = (load_model(folder / f"seed{m}" / "model.pt") for m in (0, 3))
    assert (meta_a["member"], meta_b["member"], meta_a["seed"]) == (0, 3, 1)
    assert any(not torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    for split in ("valid", "test"):
        members = [gnn_stage.predict_split(cfg, collection, gnn_settings(cfg, collection), model, split,
                                           member_seed(1, m))
                   for model, m in ((a, 0), (b, 3))]
        assert any(not np.array_equal(members[0][g], members[1][g]) for g in members[0])
        stage = load_predictions(predictions_path(tmp_path / "predictions", "gnn", collection.slug, split))
        expected = rank_mean(members)
        assert sorted(stage) == sorted(expected)
        for g in stage:
            np.testing.assert_array_equal(stage[g], expected[g])
    metrics = json.loads((tmp_path / "metrics" / "gnn" / f"{collection.slug}.json").read_text())
    assert [m["seed"] for m in metrics["members"]] == [0, 3]
    for split in ("valid", "test"):
        scores = [m[split] for m in metrics["members"]]
        report = metrics[f"seed_ensemble_{split}"]
        assert report["member_mean"] == pytest.approx(np.mean(scores)) and report["best_member"] == max(scores)
        assert report["gain_over_best_member"] == pytest.approx(metrics[split]["score"] - max(scores))
    curve = pd.read_csv(tmp_path / "plots" / "gnn" / collection.slug / "curve.csv")
    assert curve["seed"].tolist() == [0, 0, 3, 3]


def write_normalizer(root: Path, slug: str) -> Normalizer:
    """A hand-set normaliser over node_feat_raw columns 0..FEAT_DIM-1 (column 1 logged) for `slug`."""
    normalizer = Normalizer(columns=list(range(FEAT_DIM)), log=[c == 1 for c in range(FEAT_DIM)],
                            mean=[1.0] * FEAT_DIM, std=[2.0] * FEAT_DIM, pad_value=-1.0, train_nodes=10)
    normalizer.save(root / "pruned" / slug / NORMALIZER_FILE)
    return normalizer


def test_joint_sources_reads_the_sibling_train_graphs_normalised_as_this_collection(tmp_path):
    own, sibling = Collection.parse("layout-xla-random"), Collection.parse("layout-nlp-random")
    cfg = compose(overrides(tmp_path))
    write_collection(tmp_path, own)
    with pytest.raises(PipelineError, match=r"layout-nlp-random/index.csv missing: .*prune@layout-nlp-random"):
        gnn_stage.sibling_train_graphs(cfg, own)      # was a ValueError: a traceback, not one line
    write_collection(tmp_path, sibling)
    write_normalizer(tmp_path, own.slug)
    folder = tmp_path / "pruned" / sibling.slug / "train" / "train_0"
    raw = np.zeros((6, NODE_FEAT_DIM), np.float32)          # train_0 has 6 nodes
    raw[0, :3] = [5.0, np.e - 1, -1.0]                       # column 1 is logged: log1p(e - 1) = 1
    np.save(folder / "node_feat_raw.npy", raw)
    graphs = gnn_stage.sibling_train_graphs(cfg, own)
    assert [g.graph_id for g in graphs] == [f"layout-nlp-random/train_{i}" for i in range(GRAPHS["train"])]
    assert graphs[0].node_feat.shape == (6, FEAT_DIM) and graphs[0].node_feat.dtype == np.float32
    np.testing.assert_allclose(graphs[0].node_feat[0], [2.0, 0.0, -1.0, -0.5, -0.5, -0.5], atol=1e-6)
    np.testing.assert_allclose(graphs[0].node_feat[1:], -0.5)               # (0 - 1) / 2 everywhere else
    assert graphs[0].node_config_feat.shape[1] == 2                          # the sibling's configs unchanged


def test_joint_sources_refuses_a_sibling_pruned_from_other_data_before_training(tmp_path, monkeypatch):
    """gnn.joint_sources with the sibling's pruned folder of other data (data.root changed, prune re-run for this
    collection only): the stage checked its own pruned folder against data.root, not the sibling's, and trained on
    the sibling's old graphs silently. Now one line names the sibling's folder, before any output."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    own, sibling = Collection.parse("layout-xla-random"), Collection.parse("layout-nlp-random")
    for collection in (own, sibling):
        write_collection(tmp_path, collection)
    write_normalizer(tmp_path, own.slug)
    train = tmp_path / "syn" / "npz" / sibling.subdir / "train"
    (train / "train_0.npz").rename(train / "train_9.npz")              # the sibling's data changed since prune
    with pytest.raises(PipelineError, match=rf"^{tmp_path / 'pruned' / sibling.slug}: expected the graphs of "
                                            rf"data.root .*\(train\); found 1 pruned graph\(s\) not there "
                                            rf".*--collection {sibling.slug}"):
        gnn_stage.main(["--collection", own.slug, *overrides(tmp_path), "gnn.joint_sources=true"])
    assert not (tmp_path / "models").exists() and not (tmp_path / "metrics").exists()
    gnn_stage.main(["--collection", own.slug, *overrides(tmp_path)])     # without joint_sources, the sibling is not read


def test_joint_sources_trains_on_both_sources_and_tile_ignores_it(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    own, sibling = Collection.parse("layout-xla-random"), Collection.parse("layout-nlp-random")
    for collection in (own, sibling):
        write_collection(tmp_path, collection)
    write_normalizer(tmp_path, own.slug)
    seen = []
    real_fit = gnn_stage.fit

    def spy(model, spec, train, *args, **kwargs):
        seen.append(sorted(g.graph_id for g in train))
        return real_fit(model, spec, train, *args, **kwargs)

    monkeypatch.setattr(gnn_stage, "fit", spy)
    gnn_stage.main(["--collection", own.slug, *overrides(tmp_path),
                    "gnn.joint_sources={random: true, default: false}"])
    own_ids = [f"train_{i}" for i in range(GRAPHS["train"])]
    assert seen == [sorted(own_ids + [f"layout-nlp-random/{g}" for g in own_ids])]
    check_outputs(tmp_path, own, world_size=1)
    cfg = compose([*overrides(tmp_path), "gnn.joint_sources=true"])
    assert [gnn_settings(cfg, Collection.parse(s)).joint_sources
            for s in ("tile-xla", "layout-xla-default", "layout-nlp-random")] == [False, True, True]
    assert gnn_settings(compose(overrides(tmp_path)), own).joint_sources is False        # the default
    assert (own.sibling, sibling.sibling, Collection.parse("tile-xla").sibling) == (sibling, own, None)
    with pytest.raises(SettingsError, match=r"gnn.joint_sources.default=True: .*lacks layout-xla-default"):
        compose(["data.collections=[layout-nlp-default]", "gnn.joint_sources={random: false, default: true}"])
    compose(["data.collections=[layout-nlp-default]", "gnn.joint_sources={random: true, default: false}"])
