"""Training step, exact resume from a checkpoint, learning-rate schedule, TTA coverage."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch
from pruned_graphs import make_layout_graph, make_tile_graph, gnn_cfg, spec_of, train_of

from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.data import config_batch, graph_tensors, runtimes
from pipeline.graphnet.distributed import DistInfo
from pipeline.graphnet.infer import InferSettings, predict_graph, predict_rows, tta_batches
from pipeline.graphnet.losses import ranking_loss
from pipeline.graphnet.model import build_model
from pipeline.graphnet.train_loop import fit, valid_rows, validate
from pipeline.scoring import metrics

CPU = torch.device("cpu")


def build(kind: str, gnn, seed: int = 0):
    spec = spec_of(gnn, kind)
    torch.manual_seed(seed)
    return build_model(spec), spec


@pytest.mark.parametrize("kind,loss", [("layout", "pairwise_hinge"), ("layout", "listmle"), ("tile", "listmle")])
def test_one_step_lowers_the_loss(kind, loss):
    gnn = gnn_cfg(dropout=0.0, loss=loss)
    model, _ = build(kind, gnn)
    graph = make_layout_graph(n_configs=16) if kind == "layout" else make_tile_graph(n_configs=16)
    g, rows = graph_tensors(graph), np.arange(16)
    configs, target = config_batch(kind, graph, rows), runtimes(graph, rows)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = ranking_loss(loss, model(g, configs), target, 0.1, 0.0)
    before.backward()
    opt.step()
    with torch.no_grad():
        after = ranking_loss(loss, model(g, configs), target, 0.1, 0.0)
    assert after.item() < before.item()




@pytest.mark.parametrize("valid_metric", ["score", "order"])
def test_validation_reads_the_chosen_metric(valid_metric):
    gnn = gnn_cfg(valid_metric=valid_metric, valid_max_configs=40)
    model, _ = build("tile", gnn)
    with torch.no_grad():
        for p in model.parameters():                 # perturbed: the zero-initialised head would tie every config
            p.add_(0.3 * torch.randn_like(p))
    graph = make_tile_graph("v0", "valid", n_configs=12, seed=3)
    settings = train_of(gnn)
    per_graph = validate(model, "tile", [graph], settings, 5, CPU, DistInfo())
    rows = valid_rows(graph, settings.valid_max_configs, 5)
    model.eval()                                                # as validate scores (it hands the model back training)
    rng = np.random.default_rng([5, zlib.crc32(b"v0")])         # validate's own orderings for this graph
    scores = predict_rows(model, "tile", graph, graph_tensors(graph), rows, settings.valid, rng, CPU, None)
    truth = np.asarray(graph.config_runtime[rows], dtype=np.float64)
    expected = metrics.kendall_tau(scores, truth) if valid_metric == "order" else metrics.tile_score(scores, truth)
    assert per_graph == {"v0": pytest.approx(expected)}
    assert metrics.kendall_tau(scores, truth) != pytest.approx(metrics.tile_score(scores, truth))  # they differ here


def test_a_one_node_tile_kernel_trains_and_validates(tmp_path):
    gnn = gnn_cfg(valid_metric="order")                # instance norm: one node has no spread to normalise
    model, spec = build("tile", gnn)
    train = [make_tile_graph("t1", n_nodes=1, seed=1), make_tile_graph("t5", seed=2)]
    valid = [make_tile_graph("v1", "valid", n_nodes=1, n_configs=9, seed=3)]
    result = fit(model, spec, train, valid, train_of(gnn), None, seed=5, checkpoint_path=tmp_path / "checkpoint.pt",
                 device=CPU)
    assert len(result.curve) == gnn.epochs and np.isfinite([row["loss"] for row in result.curve]).all()
    assert np.isfinite(result.best_score) and set(result.valid_per_graph) == {"v1"}


def _train(tmp_path, gnn, max_epochs=None):
    train = [make_layout_graph(f"g{i}", n_configs=10, seed=i) for i in range(3)]
    valid = [make_layout_graph("v0", "valid", n_configs=9, seed=7)]
    model, spec = build("layout", gnn)
    return fit(model, spec, train, valid, train_of(gnn), None, seed=5,
               checkpoint_path=tmp_path / "checkpoint.pt", device=CPU, max_epochs=max_epochs)


def test_resumed_run_matches_uninterrupted(tmp_path):
    full = _train(tmp_path / "a", gnn_cfg())
    with torch.no_grad():
        final_full = ckpt.load_checkpoint(tmp_path / "a" / "checkpoint.pt")["model"]
    _train(tmp_path / "b", gnn_cfg(), max_epochs=2)                   # "interrupted" after 2 of 4 epochs
    assert ckpt.load_checkpoint(tmp_path / "b" / "checkpoint.pt")["epoch"] == 1
    resumed = _train(tmp_path / "b", gnn_cfg(resume=True))
    final_resumed = ckpt.load_checkpoint(tmp_path / "b" / "checkpoint.pt")["model"]
    assert final_full.keys() == final_resumed.keys()
    for name in final_full:
        assert torch.equal(final_full[name], final_resumed[name]), name
    assert [r["loss"] for r in full.curve] == [r["loss"] for r in resumed.curve]
    assert full.best_epoch == resumed.best_epoch and len(resumed.curve) == 4
    # a fresh run (resume=false) does not pick the checkpoint up: same result as the first uninterrupted run
    again = _train(tmp_path / "b", gnn_cfg())
    assert [r["loss"] for r in again.curve] == [r["loss"] for r in full.curve]


def test_resume_refuses_another_spec(tmp_path):
    _train(tmp_path, gnn_cfg(), max_epochs=1)
    with pytest.raises(ValueError, match="another model spec"):
        _train(tmp_path, gnn_cfg(hidden=12, resume=True))


def test_resume_refuses_a_checkpoint_of_another_run(tmp_path):
    """A checkpoint is continued only by the run that wrote it: another learning rate or budget, or other graphs
    (another dataset or pruning), is refused in one line naming the difference, not taken over as this run's."""
    _train(tmp_path, gnn_cfg(lr=0.3, epochs=3), max_epochs=1)
    with pytest.raises(ckpt.CheckpointError, match=r"checkpoint of another run \(gnn.lr 0.3 -> 0.01; gnn.epochs 3 "
                                                    r"-> 4\); delete it or run with gnn.resume=false$"):
        _train(tmp_path, gnn_cfg(lr=0.01, epochs=4, resume=True))
    _train(tmp_path, gnn_cfg(), max_epochs=1)
    other = [make_layout_graph(f"g{i}", n_configs=10, seed=i) for i in range(2)]
    spec = spec_of(gnn_cfg(), "layout")
    with pytest.raises(ckpt.CheckpointError, match=r"\(the train or valid graphs \(another dataset"):
        fit(build_model(spec), spec, other, [], train_of(gnn_cfg(resume=True)), None, seed=5,
            checkpoint_path=tmp_path / "checkpoint.pt", device=CPU)
    record = ckpt.load_checkpoint(tmp_path / "checkpoint.pt")["record"]
    assert ckpt.record_changes(record, record) == [] and ckpt.record_changes(None, record) == [
        "it records no settings (written before they were recorded)"]


def test_tta_batches_cover_every_config_tta_times():
    batches = tta_batches(23, tta=3, infer_batch=5, rng=np.random.default_rng(0))
    counts = np.bincount(np.concatenate(batches), minlength=23)
    assert np.all(counts == 3)
    assert max(len(b) for b in batches) <= 5 and min(len(b) for b in batches) >= 4   # near-equal, no tiny tail


def test_predict_graph_scores_every_original_config():
    graph = make_layout_graph(n_configs=11, duplicate_last=True)     # 12 original configs, 11 kept rows
    model, _ = build("layout", gnn_cfg())
    torch.manual_seed(0)
    for p in model.parameters():                                       # untrained heads start at zero: all ties
        torch.nn.init.normal_(p, std=0.3)
    scores = predict_graph(model.eval(), "layout", graph, InferSettings(infer_batch=4, tta=3, amp=False),
                           rng=np.random.default_rng(0), device=CPU, segments=None)
    assert scores.shape == (12,) and np.all(np.isfinite(scores))
    assert scores[11] == scores[0]                                     # the duplicate shares its kept row's score
    assert len(np.unique(scores[:11])) == 11


def test_model_roundtrip(tmp_path):
    model, spec = build("tile", gnn_cfg())
    ckpt.save_model(model, spec, tmp_path / "model.pt", {"best_epoch": 3})
    loaded, meta = ckpt.load_model(tmp_path / "model.pt")
    assert meta == {"best_epoch": 3}
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(a, b)
