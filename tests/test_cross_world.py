"""benchmarks/cross_world.py: two worlds must hold the same graphs; scores are per split, model and collection."""
import numpy as np
import pytest
from omegaconf import OmegaConf

from benchmarks.cross_world import as_predictions, kaggle, same_graphs, table, workspace_cfg
from pipeline.scoring import metrics
from pipeline.tpugraphs.dataset import Collection

XLA_RANDOM = Collection.parse("layout-xla-random")


def world(root, config_feat: np.ndarray, names=("a", "b")):
    """A dataset root holding layout:xla:random graphs `names` in every split, all with `config_feat`."""
    for split in ("train", "valid", "test"):
        folder = root / "npz" / "layout" / "xla" / "random" / split
        folder.mkdir(parents=True)
        for name in names:
            np.savez(folder / f"{name}.npz", node_feat=np.ones((3, 140), np.float32),
                     node_config_ids=np.array([1]), node_config_feat=config_feat)
    return OmegaConf.create({"data": {"root": str(root)}})


def test_the_worlds_must_hold_the_same_graphs_and_configurations(tmp_path):
    configs = np.zeros((4, 1, 18), np.float32)                  # [configs, configurable nodes, 18]
    home = world(tmp_path / "home", configs)
    same_graphs(home, world(tmp_path / "same", configs.copy()), XLA_RANDOM)      # runtimes may differ: passes
    moved = configs.copy()
    moved[2, 0, 5] = 1.0
    with pytest.raises(SystemExit, match=r"moved/npz/layout/xla/random/train/a\.npz: node_config_feat differs"):
        same_graphs(home, world(tmp_path / "moved", moved), XLA_RANDOM)
    with pytest.raises(SystemExit, match="different graphs"):
        same_graphs(home, world(tmp_path / "fewer", configs, names=("a",)), XLA_RANDOM)


def test_a_workspace_is_read_from_its_params_file_with_paths_inside_it(tmp_path):
    with pytest.raises(SystemExit, match="params.yaml: no such file"):
        workspace_cfg(tmp_path)
    (tmp_path / "params.yaml").write_text("paths: {predictions_dir: predictions, synthetic_dir: /abs/synthetic}\n"
                                          "data: {root: data/synthetic}\n")
    cfg = workspace_cfg(tmp_path)
    assert cfg.paths.predictions_dir == str(tmp_path / "predictions")
    assert cfg.paths.synthetic_dir == "/abs/synthetic" and cfg.data.root == str(tmp_path / "data/synthetic")


def test_true_runtimes_as_a_ranking_score_one_and_means_are_per_split_and_model():
    runtimes = {"g": np.array([3.0, 1.0, 2.0, 5.0])}
    assert metrics.score_predictions("layout", as_predictions(runtimes), runtimes)["score"] == pytest.approx(1.0)
    rows = [{"collection": c, "split": "test", "model": "gnn", "home": h, "away": a, "native": n}
            for c, h, a, n in (("tile-xla", 0.9, 0.8, 1.0), ("layout-xla-random", 0.5, 0.2, 0.4))]
    rows.append({"collection": "tile-xla", "split": "test", "model": "worlds agree", "away": 0.7})
    means = [m for m in kaggle(rows) if m["split"] == "test"]
    assert means[0] == pytest.approx({"collection": "mean", "split": "test", "model": "gnn", "home": 0.7,
                                      "away": 0.5, "native": 0.7})
    assert means[1] == {"collection": "mean", "split": "test", "model": "worlds agree", "away": 0.7}
    lines = table(means)
    assert lines[2] == "| mean | test | gnn | 0.7000 | 0.5000 | 0.7000 |" and lines[3].endswith("| 0.7000 |  |")
