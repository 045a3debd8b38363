"""k-hop subgraphs: exact neighbourhoods on hand-built graphs, re-indexed edges, the id map."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import shortest_path

from pipeline.pruning.subgraph import induced_subgraph, khop_mask, khop_subgraph

# 0 <- 1 <- 2 <- 3 <- 4 <- 5, and 6 consumes 2. Rows are (consumer, producer).
EDGES = np.array([[1, 0], [2, 1], [3, 2], [4, 3], [5, 4], [6, 2]], np.int64)
N = 7


@pytest.mark.parametrize("hops, nodes, edges", [
    (0, [3], []),
    (1, [2, 3, 4], [[1, 0], [2, 1]]),                                 # producer 2 (input) and consumer 4 (output)
    (2, [1, 2, 3, 4, 5, 6], [[1, 0], [2, 1], [3, 2], [4, 3], [5, 1]]),
    (3, list(range(7)), EDGES.tolist()),
])
def test_khop_keeps_exactly_the_neighbourhood(hops, nodes, edges):
    sub = khop_subgraph(N, EDGES, np.array([3]), hops)
    assert sub.node_ids.tolist() == nodes
    assert sub.edge_index.tolist() == edges
    assert sub.node_config_ids.tolist() == [nodes.index(3)]
    # every kept edge maps back to an original edge through node_ids and edge_ids
    assert np.array_equal(sub.node_ids[sub.edge_index], EDGES[sub.edge_ids])


def test_edge_direction_does_not_matter():
    """A seed that only consumes (node 1 consumes 0) and one that is only consumed reach the same sets."""
    assert khop_mask(N, EDGES, np.array([0]), 1).nonzero()[0].tolist() == [0, 1]       # 0's consumer
    assert khop_mask(N, EDGES, np.array([5]), 1).nonzero()[0].tolist() == [4, 5]       # 5's producer
    assert khop_mask(N, EDGES, np.array([6]), 2).nonzero()[0].tolist() == [1, 2, 3, 6]


def test_several_seeds_keep_order_and_whole_graph_option():
    sub = khop_subgraph(N, EDGES, np.array([5, 0]), 0)        # input order of node_config_ids is kept
    assert sub.node_ids.tolist() == [0, 5]
    assert sub.node_config_ids.tolist() == [1, 0]
    assert sub.n_edges == 0
    whole = khop_subgraph(N, EDGES, np.array([3]), None)
    assert whole.node_ids.tolist() == list(range(N)) and np.array_equal(whole.edge_index, EDGES)
    tile = khop_subgraph(N, EDGES, None, 0)                   # no configurable nodes: whole graph
    assert tile.n_nodes == N and tile.node_config_ids.size == 0


def test_matches_breadth_first_distances_on_a_random_graph():
    rng = np.random.default_rng(0)
    n = 200
    edges = rng.integers(0, n, size=(400, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    seeds = rng.choice(n, 5, replace=False)
    adjacency = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    dist = shortest_path(adjacency, directed=False, unweighted=True, indices=seeds).min(axis=0)
    for hops in (0, 1, 2, 4):
        sub = khop_subgraph(n, edges, seeds, hops)
        assert sub.node_ids.tolist() == np.flatnonzero(dist <= hops).tolist()
        inside = (dist[edges[:, 0]] <= hops) & (dist[edges[:, 1]] <= hops)
        assert sub.edge_ids.tolist() == np.flatnonzero(inside).tolist()
        assert sub.edge_index.min(initial=0) >= 0 and sub.edge_index.max(initial=0) < sub.n_nodes


def test_bad_arguments():
    keep = np.zeros(N, bool)
    keep[[2, 3]] = True
    with pytest.raises(ValueError, match="configurable node is not in the kept set"):
        induced_subgraph(keep, EDGES, np.array([3, 5]))
