"""The programs builder's pure parts: settings from the presets, which kernels become tile graphs."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.config import compose
from pipeline.hlo.kernel import TileKernel
from pipeline.settings.programs import program_settings
from pipeline.synth.programs import largest_kernels


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
        for split in ("train", "valid", "test"):
            assert s.tile_programs[split] <= s.programs["xla"][split]
        assert min(s.sizes["test"]["depth"]) > max(s.sizes["train"]["depth"])
        assert np.isclose(s.noise, cfg.synthesize.noise)
