"""Graph Segment Training: combination by hand, table updates, equivalence with whole-graph training, fit/resume."""
from __future__ import annotations

import numpy as np
import torch
from omegaconf import OmegaConf
from pruned_graphs import gnn_cfg, layout_model, long_graph, spec_of, train_of

from pipeline.graphnet import checkpoint as ckpt
from pipeline.graphnet.data import config_batch, graph_tensors, runtimes
from pipeline.graphnet.gst import (GSTSettings, SegmentCycles, combine, gst_scores, segmented_scores,
                              summarize_segment, trained_scale)
from pipeline.graphnet.history import HistoricalTable
from pipeline.graphnet.losses import ranking_loss
from pipeline.graphnet.model import build_model
from pipeline.graphnet.segments import build_segments
from pipeline.graphnet.train_loop import fit
from pipeline.settings.gnn import gst_group

CPU = torch.device("cpu")


def settings(**overrides) -> GSTSettings:
    base = dict(segment_size=8, segmentation="contiguous", segments_per_step=1, stale_dropout=0.5, finetune_epochs=1,
                finetune_lr_scale=0.1)
    return GSTSettings(**(base | overrides))


def test_combine_by_hand():
    # hidden = 1: summary = [sum of per-node scores, sum of states, max of states]
    trained = [torch.tensor([[1.0, 2.0, 3.0]])]
    stale = [torch.tensor([[10.0, 20.0, 30.0]]), torch.tensor([[100.0, 200.0, 300.0]])]
    keep = np.array([[True], [False]])                       # the second stale summary is dropped
    assert combine(trained, stale, hidden=1, keep=keep, scale=2.0).tolist() == [[12.0, 24.0, 30.0]]
    assert combine(trained, stale, hidden=1).tolist() == [[111.0, 222.0, 300.0]]


def test_trained_scale_is_the_papers():
    assert trained_scale(0.5, n_stale=3, n_trained=1) == (4 - 1) / 2 + 1     # GST: (num_parts - 1) / 2 + 1
    assert trained_scale(0.0, 5, 1) == 1.0 and trained_scale(0.5, 4, 2) == 2.0


def test_the_gst_group_is_read_whole():
    base = dict(segment_size=8, segmentation="contiguous", segments_per_step=1, stale_dropout=0.5, finetune_epochs=0,
                finetune_lr_scale=0.1)
    assert gst_group(OmegaConf.create(base)) == settings(finetune_epochs=0)
    assert gst_group(OmegaConf.create(base | {"segment_size": 3})) == settings(finetune_epochs=0, segment_size=3)


def test_table_is_updated_only_for_trained_segments():
    graph = long_graph()
    model = layout_model().eval()
    segments = build_segments(graph, 8, model.spec.layers + 1, "contiguous")
    rows = np.array([0, 3, 5, 6])
    configs = config_batch("layout", graph, rows)
    table = HistoricalTable()
    sentinel = {}
    for s in segments:                                        # every segment starts with known values
        sentinel[s.index] = torch.full((len(rows), model.summary_dim), float(s.index))
        table.push(graph.graph_id, s.index, rows if s.config_dependent else None, sentinel[s.index])
    chosen = 2
    scores = gst_scores(model, graph, segments, table, rows, configs, settings(stale_dropout=0.0),
                        np.random.default_rng(0), trained=[chosen])
    with torch.no_grad():
        fresh = summarize_segment(model, segments[chosen], configs)
    for s in segments:
        stored = table.pull(graph.graph_id, s.index, rows if s.config_dependent else None)
        expected = fresh if s.index == chosen else sentinel[s.index]
        torch.testing.assert_close(stored.expand(len(rows), -1), expected.expand(len(rows), -1))
    # the other segments' summaries came from the table, not from a fresh computation
    stale = [sentinel[s.index].expand(len(rows), -1) for s in segments if s.index != chosen]
    with torch.no_grad():
        expected_scores = model.readout(combine([fresh], stale, model.spec.hidden), graph.n_nodes)
    torch.testing.assert_close(scores.detach(), expected_scores)


def test_a_new_batch_initialises_the_table_then_only_trained_segments_change():
    graph = long_graph()
    model = layout_model()
    segments = build_segments(graph, 8, model.spec.layers + 1, "contiguous")
    table = HistoricalTable()
    rows = np.arange(5)
    configs = config_batch("layout", graph, rows)
    gst_scores(model, graph, segments, table, rows, configs, settings(), np.random.default_rng(3), trained=[3])
    assert table.keys() == [(graph.graph_id, s.index) for s in segments]          # initialised for this batch
    first = {s.index: table.pull(graph.graph_id, s.index, rows if s.config_dependent else None) for s in segments}
    with torch.no_grad():
        for p in model.parameters():                                             # the weights move on
            p.add_(0.1)
    gst_scores(model, graph, segments, table, rows, configs, settings(), np.random.default_rng(4), trained=[1])
    for s in segments:
        now = table.pull(graph.graph_id, s.index, rows if s.config_dependent else None)
        assert torch.equal(now, first[s.index]) == (s.index != 1), s.index


def test_segment_cycles_train_every_segment_once_per_config_batch():
    cycles, rng, draws = SegmentCycles(), np.random.default_rng(0), iter([np.array([4, 2]), np.array([7, 1])])
    sample = lambda: next(draws)                                  # noqa: E731
    visits = [cycles.next("g", 5, 2, sample, rng) for _ in range(4)]
    assert [v[0].tolist() for v in visits] == [[4, 2], [4, 2], [4, 2], [7, 1]]
    trained = np.concatenate([v[1] for v in visits[:3]])
    assert sorted(trained.tolist()) == [0, 1, 2, 3, 4] and len(visits[2][1]) == 1


def test_all_segments_without_dropout_equal_whole_graph_training():
    """stale_dropout=0 and every segment trained: same loss and gradients as the whole graph at once."""
    graph = long_graph()
    rows = np.arange(graph.n_kept)
    configs, target = config_batch("layout", graph, rows), runtimes(graph, rows)
    whole_model, gst_model = layout_model(), layout_model()
    whole = ranking_loss("pairwise_hinge", whole_model(graph_tensors(graph), configs), target, 0.1, 0.0)
    whole.backward()
    segments = build_segments(graph, 7, gst_model.spec.layers + 1, "contiguous")
    scores = gst_scores(gst_model, graph, segments, HistoricalTable(), rows, configs,
                        settings(stale_dropout=0.0), np.random.default_rng(0), trained=range(len(segments)))
    loss = ranking_loss("pairwise_hinge", scores, target, 0.1, 0.0)
    loss.backward()
    torch.testing.assert_close(loss, whole, rtol=1e-5, atol=1e-6)
    for (name, a), b in zip(whole_model.named_parameters(), gst_model.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_segmented_inference_does_not_depend_on_segment_size():
    graph = long_graph(n_nodes=50)
    model = layout_model().eval()
    configs = config_batch("layout", graph, np.arange(graph.n_kept))
    with torch.no_grad():
        small = segmented_scores(model, build_segments(graph, 4, model.spec.layers + 1, "contiguous"), configs,
                                 graph.n_nodes)
        large = segmented_scores(model, build_segments(graph, 30, model.spec.layers + 1, "contiguous"), configs,
                                 graph.n_nodes)
    torch.testing.assert_close(small, large, rtol=1e-5, atol=1e-4)


def _fit_gst(tmp_path, gnn, max_epochs=None, gst=None):
    train = [long_graph(n_nodes=20 + 3 * i, n_configs=10, seed=i, graph_id=f"g{i}") for i in range(3)]
    valid = [long_graph(n_nodes=25, n_configs=9, seed=7, graph_id="v0", split="valid")]
    spec = spec_of(gnn, "layout", train[0].node_feat.shape[1])
    torch.manual_seed(0)
    model = build_model(spec)
    return fit(model, spec, train, valid, train_of(gnn),
               gst or settings(finetune_epochs=1), seed=5, checkpoint_path=tmp_path / "checkpoint.pt", device=CPU, max_epochs=max_epochs)


def test_gst_fit_resumes_exactly_with_its_table(tmp_path):
    gnn = gnn_cfg(norm="layer", epochs=3)
    full = _fit_gst(tmp_path / "a", gnn)
    assert len(full.curve) == 4                                   # 3 GST epochs + 1 head fine-tuning epoch
    state = ckpt.load_checkpoint(tmp_path / "a" / "checkpoint.pt")
    assert state["gst"][0]["table"] and state["gst"][0]["cycles"]  # rank 0's table and cycles are checkpointed
    _fit_gst(tmp_path / "b", gnn, max_epochs=2)
    resumed = _fit_gst(tmp_path / "b", gnn_cfg(norm="layer", epochs=3, resume=True))
    final = ckpt.load_checkpoint(tmp_path / "b" / "checkpoint.pt")
    for name in state["model"]:
        assert torch.equal(state["model"][name], final["model"][name]), name
    assert [r["loss"] for r in full.curve] == [r["loss"] for r in resumed.curve]


def test_finetuning_changes_only_the_prediction_head(tmp_path):
    gnn = gnn_cfg(norm="layer", epochs=1)
    _fit_gst(tmp_path, gnn, max_epochs=1)
    before = ckpt.load_checkpoint(tmp_path / "checkpoint.pt")["model"]
    _fit_gst(tmp_path, gnn_cfg(norm="layer", epochs=1, resume=True))   # the fine-tuning epoch
    after = ckpt.load_checkpoint(tmp_path / "checkpoint.pt")["model"]
    head = {n for n in after if n.startswith(("head.", "attention."))}
    assert head and all(not torch.equal(before[n], after[n]) for n in head if n.endswith("weight"))
    assert all(torch.equal(before[n], after[n]) for n in after if n not in head)
