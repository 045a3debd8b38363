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
