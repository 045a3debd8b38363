"""Stage synthesize's settings for the template generator (builder `templates`, data=synthetic_full and the
benchmarks): `template_settings` reads the preset's generator (`data.generator`) and the model constants
(`synthesize`) once."""
from __future__ import annotations

from typing import Mapping

from pipeline.settings.sections import layout_cost, search_params, tile_cost
from pipeline.templates.dataset import Settings


def template_settings(generator: Mapping, synthesize: Mapping) -> Settings:
    """`data.generator` of builder `templates` and the `synthesize` group."""
    g, s = generator, synthesize
    return Settings(int(g["seed"]), {k: dict(v) for k, v in g["graphs"].items()}, tuple(g["layout_nodes"]),
                    tuple(g["layout_configs"]), tuple(g["test_configs"]), int(g["max_config_nodes"]),
                    tuple(g["tile_configs"]), float(s["noise"]), float(s["normalizer_noise"]),
                    int(s["chunk_configs"]), search_params(s["search"]), layout_cost(s["layout_cost"]),
                    tile_cost(s["tile_cost"]), tuple(s["tile_search"]["min_tile"]),
                    float(s["tile_search"]["default_share"]))
