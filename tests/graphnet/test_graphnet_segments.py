"""GST segments: boundaries by hand, every node in exactly one segment, halos that make segment outputs exact."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from pruned_graphs import layout_model, long_graph

from pipeline.graphnet.data import config_batch, graph_tensors
from pipeline.graphnet.gst import segmented_scores
from pipeline.graphnet.segments import build_segments, segment_bounds, segment_configs


def test_contiguous_bounds_are_near_equal_and_bounded():
    assert segment_bounds(10, 4, "contiguous").tolist() == [0, 3, 7, 10]     # 3 parts of 10/3 nodes, rounded
    assert segment_bounds(8, 4, "contiguous").tolist() == [0, 4, 8]
    assert segment_bounds(3, 10, "contiguous").tolist() == [0, 3]
    bounds = segment_bounds(1001, 100, "contiguous")
    assert np.all(np.diff(bounds) <= 100) and len(bounds) - 1 == 11 and bounds[0] == 0 and bounds[-1] == 1001


def test_node_splits_bounds_by_hand():
    # computations start at 0, 3, 4, 9: [0,3) and [3,4) merge; [4,9) is cut into [4,6) + [6,9); [9,10) joins [6,9)
    bounds = segment_bounds(10, 4, "node_splits", node_splits=np.array([0, 3, 4, 9]), node_ids=np.arange(10))
    assert bounds.tolist() == [0, 4, 6, 10]
    # pruned graph: original ids 0,2,5,7,8; the computation starting at original 4 starts at kept node 2 (id 5)
    bounds = segment_bounds(5, 2, "node_splits", node_splits=np.array([[0, 4]]), node_ids=np.array([0, 2, 5, 7, 8]))
    assert bounds.tolist() == [0, 2, 4, 5]


def test_node_splits_need_the_graphs_splits():
    with pytest.raises(ValueError, match="node_splits"):
        segment_bounds(10, 4, "node_splits")


@pytest.mark.parametrize("size", [1, 5, 13, 40])
def test_segments_cover_every_node_exactly_once(size):
    graph = long_graph()
    segments = build_segments(graph, size, halo_hops=3, segmentation="contiguous")
    own = np.concatenate([s.nodes for s in segments])
    assert np.array_equal(np.sort(own), np.arange(graph.n_nodes)) and len(own) == graph.n_nodes
    for s in segments:
        assert len(s.nodes) <= size and int(s.own.sum()) == len(s.nodes)
        # the own nodes are the flagged rows of the segment's subgraph
        assert s.graph.n_nodes >= len(s.nodes)


def test_segment_sees_only_its_configurable_columns():
    graph = long_graph()
    segments = build_segments(graph, 5, halo_hops=1, segmentation="contiguous")
    configs = config_batch("layout", graph, np.arange(4))                      # [4, 7, 18]
    first = segments[0]                                                         # nodes 0..4 + 1 hop: 0..5, and 7
    assert first.config_columns.tolist() == [0] and first.config_dependent
    assert torch.equal(segment_configs(configs, first), configs[:, :1])
    free = build_segments(long_graph(n_nodes=40), 1, halo_hops=0, segmentation="contiguous")[0]   # node 0 alone: not configurable
    assert not free.config_dependent and segment_configs(configs, free).shape == (1, 0, 18)


@pytest.mark.parametrize("segmentation", ["contiguous", "node_splits"])
def test_segmented_scores_match_the_whole_graph_for_any_segment_size(segmentation):
    graph = long_graph()
    graph.node_splits = np.array([0, 7, 20, 31])
    model = layout_model().eval()
    configs = config_batch("layout", graph, np.arange(graph.n_kept))
    with torch.no_grad():
        whole = model(graph_tensors(graph), configs)
        for size in (3, 8, 17, 40):
            scores = segmented_scores(model, build_segments(graph, size, model.spec.layers + 1, segmentation), configs,
                                      graph.n_nodes)
            torch.testing.assert_close(scores, whole, rtol=1e-5, atol=1e-4)


def test_a_halo_one_hop_short_is_not_exact():
    """layers + 1 hops are needed (the outermost nodes' inputs depend on their edges): the check can fail."""
    graph = long_graph()
    model = layout_model().eval()
    configs = config_batch("layout", graph, np.arange(graph.n_kept))
    with torch.no_grad():
        whole = model(graph_tensors(graph), configs)
        short = segmented_scores(model, build_segments(graph, 5, model.spec.layers, "contiguous"), configs, graph.n_nodes)
    assert (short - whole).abs().max() > 1e-3
