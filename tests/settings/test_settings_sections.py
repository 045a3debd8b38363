"""pipeline.settings.sections and the builders on them (featurize, programs, templates): each section read once,
lists as tuples, the same section giving the same parameters wherever a group holds it."""
from __future__ import annotations

from omegaconf import OmegaConf

from pipeline.config import compose
from pipeline.costmodel.tile import TileCostParams
from pipeline.settings.featurize import featurize_settings
from pipeline.settings.programs import program_settings
from pipeline.settings.sections import frozen_params, layout_cost, search_params, tile_cost, tile_search
from pipeline.settings.templates import template_settings


def test_sections_read_their_keys_and_freeze_lists():
    cfg = compose(["data=programs_ci"])
    search = search_params(OmegaConf.create({"default_block_prob": [0.2, 0.3], "perturbed_nodes_mean": 2,
                                             "swap_prob": 0.5, "duplicate_fraction": 0.1,
                                             "near_default_share": 0.25}))
    assert search.default_block_prob == (0.2, 0.3) and search.perturbed_nodes_mean == 2.0
    assert search.near_default_share == 0.25
    cost = layout_cost(cfg.synthesize.layout_cost)
    assert isinstance(cost.tile, tuple) and cost.tile == tuple(cfg.synthesize.layout_cost.tile)
    assert tile_cost(cfg.synthesize.tile_cost) == frozen_params(TileCostParams, cfg.synthesize.tile_cost)
    tiles = tile_search([8, 128], cfg.synthesize.tile_cost)
    assert tiles.min_tile == (8, 128) and tiles.cost == tile_cost(cfg.synthesize.tile_cost)


def test_the_builders_share_the_sections():
    cfg = compose(["data=programs_ci"])
    program = program_settings(cfg.data.generator, cfg.synthesize)
    assert program.search == search_params(cfg.synthesize.search)
    assert program.layout_cost == layout_cost(cfg.synthesize.layout_cost)
    featurize = featurize_settings(cfg)
    assert featurize.search == search_params(cfg.featurize.search)
    assert tuple(c.slug for c in featurize.collections) == tuple(cfg.featurize.collections)
    full = compose(["data=synthetic_full"])
    templates = template_settings(full.data.generator, full.synthesize)
    assert templates.tile_cost == tile_cost(full.synthesize.tile_cost)
    assert templates.seed == int(full.data.generator.seed)
