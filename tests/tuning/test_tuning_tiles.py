"""Every valid tile size of a fused kernel: the compiler default first, each size once."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pipeline.config import load_cfg
from pipeline.costmodel.tile import OUTPUT_BOUNDS, TileKernel
from pipeline.featurizer.tile_configs import TileSearch, default_config
from pipeline.settings.sections import tile_search
from pipeline.tuning.tiles import tile_candidates


def search() -> TileSearch:
    cfg = load_cfg([])
    return tile_search(cfg.featurize.tile_search.min_tile, cfg.featurize.tile_search.cost)


def test_every_valid_tile_size_once_default_first():
    kernel = TileKernel("dot", (256, 512), 2, contract=256)
    rows = tile_candidates(SimpleNamespace(kernel=kernel), search(), 4096, np.random.default_rng(0))
    assert np.array_equal(rows[0], default_config(kernel, search().cost))
    tiles = {tuple(r[OUTPUT_BOUNDS:OUTPUT_BOUNDS + 2]) for r in rows}
    second, minor = search().min_tile
    expected = {(float(a), float(b)) for a in 2 ** np.arange(10) for b in 2 ** np.arange(10)
                if second <= a <= 256 and minor <= b <= 512}          # powers of two from the minimum tile
    assert len(rows) == len(tiles) and tiles == expected


def test_a_cap_draws_that_many_sizes_and_keeps_the_default():
    kernel = TileKernel("conv", (8, 64, 64, 256), 2, contract=256, window=(3, 3, 1))
    rows = tile_candidates(SimpleNamespace(kernel=kernel), search(), 50, np.random.default_rng(0))
    assert len(rows) <= 50 and len(np.unique(rows, axis=0)) == len(rows)
    assert np.array_equal(rows[0], default_config(kernel, search().cost))


def test_a_tile_pick_is_timed_against_the_default_and_the_best_size_by_the_cost_model():
    from pipeline.costmodel.tile import tile_runtime_ns
    from pipeline.tuning.tiles import TilePick
    from pipeline.tuning.verify_tiles import tile_row

    kernel = TileKernel("dot", (4096, 4096), 2, contract=4096)                # 81 tile sizes
    rows = tile_candidates(SimpleNamespace(kernel=kernel), search(), 4096, np.random.default_rng(0))
    truth = tile_runtime_ns(kernel, rows, search().cost)
    slowest, fastest = int(np.argmax(truth)), int(np.argmin(truth))
    assert fastest != 0 and truth[fastest] < truth[0] < truth[slowest]    # the default is not the best here
    kept = tile_row("k", kernel, TilePick(rows, fastest, -0.2, True), search().cost)
    assert kept["t_default_ns"] == truth[0] and kept["t_pick_ns"] == kept["t_oracle_ns"] == truth[fastest]
    assert kept["share"] == pytest.approx(1.0) and kept["predicted_ratio"] == pytest.approx(np.exp(-0.2))
    assert kept["oracle_gain"] == pytest.approx(1 - truth[fastest] / truth[0])
    wrong = tile_row("k", kernel, TilePick(rows, slowest, -0.2, True), search().cost)   # a kept bad pick
    assert wrong["share"] == pytest.approx((1 - truth[slowest] / truth[0]) / (1 - truth[fastest] / truth[0]))
    assert wrong["share"] < 0
    guarded = tile_row("k", kernel, TilePick(rows, slowest, -0.2, False), search().cost)
    assert guarded["t_pick_ns"] == truth[0] and guarded["share"] == 0.0 and guarded["predicted_ratio"] == 1.0
    assert guarded["unguarded"]["verified_ratio"] == pytest.approx(truth[slowest] / truth[0])
    assert guarded["candidates"] == 0 and guarded["t_candidates_ns"] == truth[0]     # nothing listed: the default
    second = int(np.argsort(truth)[1])                                    # listed: the slowest and the second best
    listed = tile_row("k", kernel, TilePick(rows, slowest, -0.2, False, ((slowest, -0.3), (second, -0.1))),
                      search().cost)
    assert listed["candidates"] == 2 and listed["t_candidates_ns"] == min(truth[second], truth[0])


def test_the_models_best_sizes_are_listed_best_first_with_the_default_where_it_ranks(monkeypatch):
    from pipeline.tuning import tiles

    kernel = TileKernel("dot", (256, 512), 2, contract=256)
    program = SimpleNamespace(kernel=kernel)
    rows = tile_candidates(program, search(), 4096, np.random.default_rng(0))
    scores = np.linspace(-0.5, 0.5, len(rows) - 1)[::-1].copy()           # the last size best, then the one before
    scores[3] = -1e-9                                                     # just below the default's 0
    monkeypatch.setattr(tiles, "tile_template", lambda *args: (None, -1.0))
    guide = SimpleNamespace(collection=None, scorer=lambda template: (lambda padded: scores[:len(padded)]),
                            rule=SimpleNamespace(keeps=lambda score: False))
    found = tiles.pick_tile(None, program, guide, search(), 4096, len(rows), None, np.random.default_rng(0), 4)
    n = len(rows)
    assert [row for row, _ in found.ranked] == [n - 1, n - 2, n - 3, n - 4]          # rows 1.. carry scores[0..]
    assert found.ranked[0][1] == pytest.approx(-0.5) and found.best == n - 1 and not found.kept
    many = tiles.pick_tile(None, program, guide, search(), 4096, len(rows), None, np.random.default_rng(0), n)
    order = [row for row, _ in many.ranked]
    assert len(order) == n and order.index(0) == sum(scores < 0)     # after every size predicted faster than it
    assert order[order.index(0) - 1] == 4                             # row 4 (-1e-9) just before it
    assert tiles.pick_tile(None, program, guide, search(), 4096, len(rows), None, np.random.default_rng(0)).ranked == ()


TWO_ALIKE = """HloModule jit_g.7, is_scheduled=true

%fused_a (p.0: f32[64,32]) -> f32[64,32] {
  %p.0 = f32[64,32]{1,0} parameter(0)
  ROOT %t.1 = f32[64,32]{1,0} tanh(%p.0)
}

%fused_b (q.0: f32[64,32]) -> f32[64,32] {
  %q.0 = f32[64,32]{1,0} parameter(0)
  ROOT %t.2 = f32[64,32]{1,0} tanh(%q.0)
}

%fused_c (r.0: f32[64,32]) -> f32[32,64] {
  %r.0 = f32[64,32]{1,0} parameter(0)
  ROOT %t.3 = f32[32,64]{1,0} transpose(%r.0), dimensions={1,0}
}

ENTRY %main.9 (x: f32[64,32]) -> f32[32,64] {
  %x = f32[64,32]{1,0} parameter(0)
  %tanh_fusion = f32[64,32]{1,0} fusion(%x), kind=kLoop, calls=%fused_a
  %tanh_fusion.1 = f32[64,32]{1,0} fusion(%tanh_fusion), kind=kLoop, calls=%fused_b
  ROOT %transpose_fusion = f32[32,64]{1,0} fusion(%tanh_fusion.1), kind=kLoop, calls=%fused_c
}
"""


def test_tiles_name_each_fusion_as_the_text_writes_it_and_every_fusion_of_a_kernel(monkeypatch):
    """The JSON's `fusion` was `<module>.<instruction>` (`jit_g.7.tanh_fusion`: no instruction of the text has that
    name, and a module name with dots cannot be cut off), and a second fusion of an identical kernel was dropped
    without a word: each entry names its instruction and lists the fusions that take the same tile."""
    from pipeline.hlo.featurize import parse_module, tile_programs
    from pipeline.tuning import tiles
    from pipeline.tuning.tiles import TilePick, tune_tiles

    kernels = tile_programs(parse_module(TWO_ALIKE, "g_opt.hlo.txt"))
    assert [k.kernel for k in kernels][0] == kernels[1].kernel != kernels[2].kernel
    picked = []

    def pick(cfg, program, *args):                               # the model's part: the default, not kept
        picked.append(program.fusion)
        rows = tile_candidates(program, search(), 8, np.random.default_rng(0))
        return TilePick(rows, 0, 0.0, False)

    monkeypatch.setattr(tiles, "pick_tile", pick)
    out = tune_tiles(None, kernels, None, search(), 8, 4, None, np.random.default_rng(0))
    assert picked == ["tanh_fusion", "transpose_fusion"]                    # one search per distinct kernel
    assert [(t["fusion"], t["same_kernel"], t["computation"]) for t in out] == [
        ("tanh_fusion", ["tanh_fusion.1"], "fused_a"), ("transpose_fusion", [], "fused_c")]
    assert all(f"%{t['fusion']} = " in TWO_ALIKE for t in out)
    assert all(t["candidates"] == [] for t in out)                          # nothing ranked: nothing listed


def test_the_json_lists_the_candidates_as_tiles(monkeypatch):
    from pipeline.hlo.featurize import parse_module, tile_programs
    from pipeline.tuning import tiles
    from pipeline.tuning.tiles import TilePick, tune_tiles

    kernel = tile_programs(parse_module(TWO_ALIKE, "g_opt.hlo.txt"))[2]          # f32[32,64]
    rows = tile_candidates(kernel, search(), 8, np.random.default_rng(0))

    def pick(cfg, program, *args):
        return TilePick(rows, 2, -0.2, False, ((2, -0.2), (0, 0.0), (1, 0.1)))

    monkeypatch.setattr(tiles, "pick_tile", pick)
    (out,) = tune_tiles(None, [kernel], None, search(), 8, 4, None, np.random.default_rng(0), 3)
    tile = [[int(v) for v in rows[i][OUTPUT_BOUNDS:OUTPUT_BOUNDS + 2]] for i in (2, 0, 1)]
    assert out["tile"] == out["default_tile"] == tile[1]                      # not kept: the default
    assert out["candidates"] == [
        {"tile": tile[0], "input_feature_tile": None, "predicted_ratio": pytest.approx(np.exp(-0.2)), "default": False},
        {"tile": tile[1], "input_feature_tile": None, "predicted_ratio": 1.0, "default": True},
        {"tile": tile[2], "input_feature_tile": None, "predicted_ratio": pytest.approx(np.exp(0.1)), "default": False}]
