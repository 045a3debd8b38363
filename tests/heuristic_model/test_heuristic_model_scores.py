"""pipeline.heuristic_model.scores: the layout and tile rules by hand."""
import numpy as np

from pipeline.heuristic_model.scores import default_block_counts, tile_scores


def test_default_block_counts_by_hand():
    feat = np.full((2, 2, 18), -1, dtype=np.int8)   # config 0: all six blocks default
    feat[1, 0, 0:2] = [1, 0]                         # config 1: node 0 output layout set
    feat[1, 1, 6:8] = [0, 1]                         # config 1: node 1 input layout set
    feat[1, 1, 2:6] = -1
    np.testing.assert_array_equal(default_block_counts(feat), [6, 4])


def test_more_default_blocks_rank_first_and_median_tiles_rank_first():
    feat = np.full((3, 1, 18), -1, dtype=np.int8)
    feat[0, 0, :3] = [2, 1, 0]
    feat[2, 0, :12] = [1, 0, -1, -1, -1, -1, 0, 1, -1, -1, -1, -1]
    scores = -default_block_counts(feat)
    assert list(np.argsort(scores, kind="stable")) == [1, 0, 2]
    config_feat = np.zeros((3, 24), dtype=np.float32)
    config_feat[:, 15] = [8.0, 4096.0, 64.0]     # log1p: 2.20, 8.32, 4.17 -> distances 1.98, 4.14, 0
    assert list(np.argsort(tile_scores(config_feat), kind="stable")) == [2, 0, 1]


def test_graph_scores_is_the_rule_of_the_collection_kind(tiny_npz):
    """The conftest graphs by hand: layout configs keep 6, 5, 5, 4 default blocks; tile output tiles 1024, 2048,
    2048 elements, median 2048."""
    from pipeline.heuristic_model.scores import graph_scores
    from pipeline.tpugraphs.dataset import Collection, load_graph

    layout = load_graph(tiny_npz["layout"], Collection.parse("layout:xla:random"), "train")
    np.testing.assert_array_equal(graph_scores(layout, "layout", chunk_size=3), [-6.0, -5.0, -5.0, -4.0])
    tile = load_graph(tiny_npz["tile"], Collection.parse("tile:xla"), "train")
    np.testing.assert_allclose(graph_scores(tile, "tile", chunk_size=3), [np.log(2049 / 1025), 0.0, 0.0])
