"""benchmarks/tile_regimes.py: which kernels are fastest with a tile smaller than their largest, hand-checked."""
import numpy as np

from benchmarks.tile_regimes import regime_row
from pipeline.tpugraphs.schema import SHAPE_COLUMNS


def kernel(shape, tiles, runtimes):
    """One output node of `shape`; configs tiling its first dim by `tiles`."""
    node_feat = np.zeros((1, 140), np.float32)
    node_feat[0, SHAPE_COLUMNS.start:SHAPE_COLUMNS.start + len(shape)] = shape
    config_feat = np.zeros((len(tiles), 24), np.float32)
    config_feat[:, 8] = tiles
    config_feat[:, 9] = shape[1]
    return node_feat, config_feat, np.asarray(runtimes, np.float64)


def test_regime_row_counts_kernels_whose_best_tile_is_smaller():
    small = kernel([64, 128], [16, 32, 64], [3.0, 2.0, 1.0])        # whole output fastest
    large = kernel([4096, 128], [512, 1024, 4096], [1.0, 2.0, 9.0])  # 512 rows fastest: spills beyond
    untiled = kernel([256, 128], [0, 128], [1.0, 2.0])               # 0 = untiled = the largest tile, fastest
    row = regime_row([small, large, untiled])
    assert row == {"kernels": 3, "smaller_tile_best": 1, "max_output_elements": 4096 * 128}
    assert regime_row([])["kernels"] == 0
