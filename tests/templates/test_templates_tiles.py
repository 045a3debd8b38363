"""Tile cost model (hand-computed cases) and the generated tile graphs' normalizers."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.config import compose
from pipeline.settings.templates import template_settings
from pipeline.templates.dataset import tile_example
from pipeline.costmodel.tile import TileCostParams, tile_runtime_ns
from pipeline.hlo.kernel import TileKernel
from pipeline.featurizer.tile_configs import encode_config

# memory-bound probe: 1 byte/ns, vector unit effectively free, 100 ns per tile, no launch cost
PARAMS = TileCostParams(tile=(8, 128), flops_per_ns=1e12, f32_slowdown=1.0, bytes_per_ns=1.0,
                        per_tile_overhead_ns=100.0, launch_overhead_ns=0.0, vmem_bytes=1e12, spill_penalty=4.0,
                        elementwise_flops=1.0, vector_flops_per_ns=1e12)
KERNEL = TileKernel("elementwise", (16, 256), itemsize=4, n_inputs=1)


def runtime(tile, params=PARAMS):
    return tile_runtime_ns(KERNEL, encode_config(KERNEL, tile).reshape(1, 24), params)[0]   # [1, 24]


def test_encode_config_matches_the_extractor():
    row = encode_config(KERNEL, (8, 128))
    assert row[8:16].tolist() == [8, 128, 0, 0, 0, 0, 136, 1024]
    assert row[0:8].tolist() == [0] * 8 and row[16:24].tolist() == [0] * 8   # empty bounds: product 0


def test_tiles_cost_padding_and_per_tile_overhead():
    # (8,128): 4 tiles of 1024 elements; reads + writes 4096 f32 = 32768 bytes, plus 4 x 100 ns
    assert runtime((8, 128)) == pytest.approx(32768 + 400)
    # (16,32): minor tile padded to 128 -> 8 tiles of 2048 padded elements = 16384, 2 x 4 bytes each, 8 x 100 ns
    assert runtime((16, 32)) == pytest.approx(16384 * 8 + 800)


def test_working_set_beyond_on_chip_memory_spills():
    small_vmem = TileCostParams(**{**PARAMS.__dict__, "vmem_bytes": 16 * 256 * 4 * 2})   # exactly (16, 128) fits
    assert runtime((16, 128), small_vmem) == pytest.approx(runtime((16, 128)))
    assert runtime((16, 256), small_vmem) > runtime((16, 256)) * 1.5


@pytest.fixture(scope="module")
def settings():
    cfg = compose(["data=synthetic_full", "data.generator.tile_configs=[8,48]"])   # the template builder
    return template_settings(cfg.data.generator, cfg.synthesize)


def test_normalizers_are_the_default_configs_runtime_with_small_noise(settings):
    for index in range(8):
        ex = tile_example(settings, "train", index)
        default = tile_runtime_ns(ex.kernel, ex.default_row.reshape(1, 24), settings.tile_cost)[0]   # [1, 24]
        assert np.abs(ex.normalizers / default - 1).max() < 0.05
        assert ex.normalizers.std() > 0                          # re-measured per row
        is_default = (ex.config_feat == ex.default_row).all(axis=1)
        if is_default.any():   # the default config's own runtime agrees with its normalizer up to noise
            assert np.abs(ex.runtime[is_default] / ex.normalizers[is_default] - 1).max() < 0.05


def test_tile_graphs_are_small_fused_kernels(settings):
    sizes = [len(tile_example(settings, "valid", i).graph) for i in range(6)]
    assert all(3 <= n <= 80 for n in sizes), sizes


def test_write_tile_graph_writes_a_graph_the_loader_accepts(settings, tmp_path):
    from pipeline.templates.dataset import write_tile_graph
    from pipeline.tpugraphs.dataset import Collection, load_graph
    from pipeline.tpugraphs.schema import NPZ_SUBDIR

    collection = Collection.parse("tile-xla")
    row = write_tile_graph(settings, collection, "train", 0, tmp_path)
    [path] = (tmp_path / NPZ_SUBDIR / collection.subdir / "train").glob("*.npz")
    graph = load_graph(path, collection, "train")
    assert graph.node_feat.shape[0] == len(tile_example(settings, "train", 0).graph)
    assert row is not None
