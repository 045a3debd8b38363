"""The programs builder's pure parts: settings from the presets, which kernels become tile graphs."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np
import pytest

from pipeline.config import compose
from pipeline.hlo.kernel import TileKernel
from pipeline.settings.programs import program_settings
from pipeline.settings_types import SettingsError
from pipeline.synth.programs import build, largest_kernels, tiled_programs
from pipeline.tpugraphs.dataset import graph_paths
from pipeline.zoo.registry import EXTRA_SOURCES, programs


@dataclass(frozen=True)
class Fake:
    name: str
    kernel: TileKernel


def kernel(shape, kind="elementwise") -> TileKernel:
    return TileKernel(kind, shape, 4)


def test_largest_distinct_kernels_in_graph_order():
    kernels = [Fake("a", kernel((8, 128))), Fake("b", kernel((64, 128))), Fake("c", kernel((8, 128))),
               Fake("d", kernel((16, 256), "dot")), Fake("e", kernel((2, 2)))]
    assert [k.name for k in largest_kernels(kernels, 2)] == ["b", "d"]
    assert [k.name for k in largest_kernels(kernels, 3)] == ["a", "b", "d"]   # "c" repeats "a"
    assert [k.name for k in largest_kernels(kernels, 10)] == ["a", "b", "d", "e"]


def test_settings_of_both_presets():
    for preset in ("programs", "programs_ci"):
        cfg = compose([f"data={preset}"])
        s = program_settings(cfg.data.generator, cfg.synthesize)
        assert set(s.programs) == {"xla", "nlp"} and set(s.sizes) == {"train", "test"}
        assert set(s.tile_sizes) <= set(s.sizes)
        for split in ("train", "valid", "test"):
            assert s.tile_programs[split] <= s.programs["xla"][split]
        assert min(s.sizes["test"]["depth"]) > max(s.sizes["train"]["depth"])
        assert np.isclose(s.noise, cfg.synthesize.noise)


def ci_settings(**changes):
    cfg = compose(["data=programs_ci"])
    return dataclasses.replace(program_settings(cfg.data.generator, cfg.synthesize), **changes)


def test_without_tile_sizes_the_tile_programs_are_the_first_xla_programs_of_each_split():
    s = ci_settings()
    assert s.tile_sizes == {}
    drawn = programs(s.programs, s.sizes, s.seed)
    first = [p for split in ("train", "valid", "test") for p in [q for q in drawn if q.source == "xla"
                                                                 and q.split == split][:s.tile_programs[split]]]
    assert tiled_programs(s) == first and len(first) == 2 + 1 + 1


def test_tile_sizes_draw_the_tile_programs_from_their_own_grid():
    """A wider layout grid with the old grid as `tile_sizes` keeps the tile programs of the old grid exactly (the
    same random draws); test programs come from `test`, which `tile_sizes` leaves alone."""
    narrow = ci_settings()
    wide_grid = {**narrow.sizes["train"], "batch": [2, 4, 6], "width": [8, 12, 16]}
    wide = ci_settings(sizes={**narrow.sizes, "train": wide_grid})
    kept = ci_settings(sizes={**narrow.sizes, "train": wide_grid}, tile_sizes={"train": narrow.sizes["train"]})
    assert tiled_programs(kept) == tiled_programs(narrow) != tiled_programs(wide)
    assert all(p.size.width in (8, 16) and p.size.batch in (2, 4) for p in tiled_programs(kept)
               if p.split != "test")
    assert [p for p in tiled_programs(kept) if p.split == "test"] == \
           [p for p in programs(kept.programs, kept.sizes, kept.seed) if p.split == "test" and p.source == "xla"][:1]


def test_the_schema_refuses_bad_size_grids_in_one_line():
    """Checked when the config loads (pipeline/settings_schema.py), before stage synthesize draws a program."""
    with pytest.raises(SettingsError, match=r"^setting data.generator.tile_sizes=\{'valid': \{'batch': \[2\]\}\}: "
                                            r"expected null or a mapping with keys among \['train', 'test'\]"):
        compose(["data=programs_ci", "+data.generator.tile_sizes={valid: {batch: [2]}}"])
    for override, key in (("+data.generator.tile_sizes=[1, 2]", "tile_sizes"),
                          ("+data.generator.tile_sizes={train: 3}", "tile_sizes"),
                          ("data.generator.sizes.train=3", "sizes.train")):    # pipeline/settings_synth.py
        with pytest.raises(SettingsError, match=rf"^setting data.generator.{key}=.*: expected (null or )?a mapping"):
            compose(["data=programs_ci", override])
    compose(["data=programs_ci", "+data.generator.tile_sizes=null"])          # no tile grid: allowed


def test_the_default_preset_widens_the_layout_grid_and_keeps_the_tile_grid():
    cfg = compose(["data=programs"])
    s = program_settings(cfg.data.generator, cfg.synthesize)
    tile = {k: list(v) for k, v in s.tile_sizes["train"].items()}
    assert set(tile["batch"]) < set(s.sizes["train"]["batch"]) and set(tile["width"]) < set(s.sizes["train"]["width"])
    narrow = dataclasses.replace(s, sizes={**s.sizes, "train": tile}, tile_sizes={})
    assert tiled_programs(s) == tiled_programs(narrow)


@pytest.mark.slow
def test_a_tile_only_program_writes_tile_graphs_and_no_layout_graph(tmp_path):
    """One xla train program per grid: the layout program's graphs are layout ones named after it, the tile
    program's are tile kernels named after it; stats.json says which program made which graphs."""
    base = ci_settings()
    s = ci_settings(programs={"xla": {"train": 1}}, tile_programs={"train": 1},
                    sizes={**base.sizes, "train": {**base.sizes["train"], "batch": [2], "width": [8]}},
                    tile_sizes={"train": {**base.sizes["train"], "batch": [4], "width": [16]}})
    collections = ["tile-xla", "layout-xla-random"]
    stats = build(s, collections, tmp_path / "out", progress=False)
    (layout,), (tile,) = [p for p in stats["programs"] if p["graphs"] == ["layout"]], \
                         [p for p in stats["programs"] if p["graphs"] == ["tile"]]
    assert "_b2_w8_" in layout["name"] and "_b4_w16_" in tile["name"]
    assert [p.stem for p in graph_paths(tmp_path / "out" / "npz", "layout-xla-random", "train")] == [layout["name"]]
    kernels = graph_paths(tmp_path / "out" / "npz", "tile-xla", "train")
    assert kernels and all(p.stem.startswith(tile["name"] + "_") for p in kernels)
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["programs"] == stats["programs"]


def test_extra_programs_are_read_from_the_generator_and_leave_the_tile_programs_alone():
    cfg = compose(["data=programs_ci", "+data.generator.extra_programs={xla: {train: 2}}"])
    s = program_settings(cfg.data.generator, cfg.synthesize)
    assert s.extra_programs == {"xla": {"train": 2}} and ci_settings().extra_programs == {}
    assert tiled_programs(s) == tiled_programs(ci_settings())


@pytest.mark.slow
def test_an_extra_program_writes_layout_graphs_in_its_split_only(tmp_path):
    """One core xla train program and one extra: both layout train graphs, no tile graph from the extra, and
    stats.json names the extra's family."""
    base = ci_settings()
    s = ci_settings(programs={"xla": {"train": 1}}, tile_programs={}, extra_programs={"xla": {"train": 1}},
                    sizes={**base.sizes, "train": {**base.sizes["train"], "batch": [2], "width": [8]}})
    stats = build(s, ["layout-xla-random"], tmp_path / "out", progress=False)
    (extra,) = [p for p in stats["programs"] if p["family"] in EXTRA_SOURCES["xla"]]
    assert extra["split"] == "train" and extra["graphs"] == ["layout"] and len(stats["programs"]) == 2
    stems = [p.stem for p in graph_paths(tmp_path / "out" / "npz", "layout-xla-random", "train")]
    assert extra["name"] in stems and len(stems) == 2
