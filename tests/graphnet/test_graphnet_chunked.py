"""The chunked CPU inference path equals the plain forward (old path vs new path) and leaves the stage's
predictions and rankings unchanged; hand-checked chunk sizes, adjacency and operand ranks."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from pruned_graphs import layout_model, long_graph, make_layout_graph

from pipeline.graphnet.chunked import adjacency, chunk_configs, chunked_summary
from pipeline.graphnet.data import graph_tensors, layout_config_batch
from pipeline.graphnet.infer import InferSettings, predict_graphs
from pipeline.tpugraphs.layouts import operand_rank, operand_slots


def test_chunk_configs_by_hand():
    assert chunk_configs(n_nodes=1024, hidden=32, chunk_mb=1.0) == 8      # 1 MiB / (1024 * 32 * 4 B) = 8
    assert chunk_configs(n_nodes=10 ** 6, hidden=256, chunk_mb=1.0) == 1  # never below one config


def test_adjacency_is_the_mean_over_each_direction():
    g = graph_tensors(make_layout_graph(n_nodes=3))        # edges (consumer, producer): 1<-0, 2<-1, 2<-0
    from_producers, from_consumers, has_producer, has_consumer = adjacency(g)
    assert from_producers.to_dense().tolist() == [[0, 0, 0], [1, 0, 0], [0.5, 0.5, 0]]
    assert from_consumers.to_dense().tolist() == [[0, 0.5, 0.5], [0, 0, 1], [0, 0, 0]]
    assert has_producer.tolist() == [0, 1, 1] and has_consumer.tolist() == [1, 1, 0]


def test_operand_rank_and_slots_by_hand():
    consumers = np.array([3, 1, 3, 3, 1])
    assert operand_rank(consumers).tolist() == [0, 0, 1, 2, 1]
    edges = np.stack([consumers, np.array([0, 0, 1, 2, 2])], 1)
    # node 3 configurable: its operands 0, 1 feed blocks 1, 2; the third operand and node 1's edges feed none
    assert operand_slots(edges, np.array([3]), 4).tolist() == [1, -1, 2, -1, -1]


@pytest.mark.parametrize("norm,mixer,residual", [("instance", "center", True), ("instance", "gate", True),
                                                 ("layer", "center", False), ("none", "gate", False)])
@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_chunked_summary_equals_plain_forward(norm, mixer, residual, chunk):
    graph = long_graph(n_nodes=40, n_configs=10)
    model = layout_model(norm=norm, cross_mixer=mixer, residual=residual).eval()
    g = graph_tensors(graph)
    configs = layout_config_batch(graph, np.arange(10))
    own = torch.arange(5, 30)
    with torch.no_grad():
        plain = model.segment_summary(g, configs, own)                     # infer_chunk_mb None: plain path
        fast = chunked_summary(model, g, configs, chunk, own)
    assert fast.shape == plain.shape == (10, model.summary_dim)
    assert plain.abs().max() > 1.0                                          # weights are perturbed: not trivial
    # float32 rounding: sums run in another order (and ConfigGate's exponentials amplify it), so the tolerance is
    # relative to the summary's scale
    torch.testing.assert_close(fast, plain, rtol=1e-4, atol=1e-5 * float(plain.abs().max()))


def test_chunked_summary_refuses_training_mode():
    graph = long_graph()
    with pytest.raises(RuntimeError, match="eval mode"):
        chunked_summary(layout_model().train(), graph_tensors(graph), layout_config_batch(graph, np.arange(3)), 2)


CPU = torch.device("cpu")


def test_stage_predictions_and_rankings_unchanged():
    graphs = [long_graph(n_nodes=60, n_configs=30, seed=s, graph_id=f"g{s}") for s in range(3)]
    model = layout_model(norm="instance")
    plain = predict_graphs(model, "layout", graphs, InferSettings(infer_batch=12, tta=2, amp=False), 0, CPU, False, None)
    model.infer_chunk_mb = 1e-3                                             # 1 KiB: one config per chunk here
    chunked = predict_graphs(model, "layout", graphs, InferSettings(infer_batch=12, tta=2, amp=False), 0, CPU, False, None)
    for graph in graphs:
        a, b = plain[graph.graph_id], chunked[graph.graph_id]
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
        assert np.array_equal(np.argsort(a, kind="stable"), np.argsort(b, kind="stable"))
