"""Stage synthesize's settings for the program zoo (builder `programs`): `program_settings` reads the preset's
generator (`data.generator`, whose own keys the zoo checks) and the model constants (`synthesize`) once."""
from __future__ import annotations

from typing import Mapping

from pipeline.settings.sections import layout_cost, search_params, tile_search
from pipeline.synth.programs import ProgramSettings
from pipeline.synth.worlds import world_spread


def grids(sizes: Mapping) -> dict:
    """{grid name: {size key: [values]}} as plain lists (the schema checked them: pipeline/settings_synth.py)."""
    return {k: {kk: list(vv) for kk, vv in v.items()} for k, v in sizes.items()}


def program_settings(generator: Mapping, synthesize: Mapping) -> ProgramSettings:
    """`data.generator` of builder `programs` and the `synthesize` group (`tile_sizes` and `extra_programs` optional:
    none by default)."""
    g, s = generator, synthesize
    return ProgramSettings(int(g["seed"]), {k: dict(v) for k, v in g["programs"].items()},
                           grids(g["sizes"]), grids(g.get("tile_sizes") or {}),
                           tuple(g["layout_configs"]), tuple(g["test_configs"]), int(g["max_config_nodes"]),
                           tuple(g["tile_configs"]), dict(g["tile_programs"]), int(g["tile_kernels_per_program"]),
                           float(s["noise"]), float(s["normalizer_noise"]), int(s["chunk_configs"]),
                           search_params(s["search"]), layout_cost(s["layout_cost"]),
                           tile_search(s["tile_search"]["min_tile"], s["tile_cost"]),
                           {k: dict(v) for k, v in (g.get("extra_programs") or {}).items()},
                           world_spread(s["world"]))
