"""The settings schema of the synthetic data: the `synthesize` group (the cost models' constants, the layout and tile
searches), the sections `featurize` shares with it, and `data.generator` per builder (pipeline/settings_schema.py
checks the rest).

Every key the generators read (pipeline/settings/programs.py, templates.py, sections.py) is checked here when the
config loads, so a bad constant is refused in one line by `python -m pipeline.config` and every stage, instead of a
traceback (or a silently odd dataset) halfway through stage synthesize. Which programs a grid can hold (a split
asking for more than its grid has, an unknown source) is still the zoo's to say (pipeline/zoo/registry.py).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from pipeline.choices import SYNTH_BUILDERS, WORLD_SPREAD_CONSTANTS, ZOO_DTYPES
from pipeline.settings_types import (COUNT, FRACTION, NON_NEGATIVE, POSITIVE, Entries, Float, Group, Int, List,
                                     Optional, SettingsError, Str)
from pipeline.tpugraphs.schema import SPLITS

PAIR = 2                                  # [low, high] ranges, (second-minor, minor) tiles
PLACEMENTS = 3                            # layout_cost.placement: feature dim minor / second-minor / further out


def pair(item) -> List:
    """Two values (equal ones allowed): a tile, or a [low, high] range (`check_ranges` orders it)."""
    return List(item, min_len=PAIR, max_len=PAIR, unique=False)


SEARCH = Group({                          # pipeline.hlo.configs.SearchParams
    "default_block_prob": pair(FRACTION), "perturbed_nodes_mean": NON_NEGATIVE, "swap_prob": FRACTION,
    "duplicate_fraction": FRACTION, "near_default_share": FRACTION})
LAYOUT_COST = Group({                     # pipeline.costmodel.layout.LayoutCostParams
    "tile": pair(COUNT), "flops_per_ns": POSITIVE, "f32_slowdown": POSITIVE, "bytes_per_ns": POSITIVE,
    "op_overhead_ns": NON_NEGATIVE, "copy_overhead_ns": NON_NEGATIVE, "launch_overhead_ns": NON_NEGATIVE,
    "placement": List(POSITIVE, min_len=PLACEMENTS, max_len=PLACEMENTS, unique=False),
    "offpair_penalty": POSITIVE})
TILE_COST = Group({                       # pipeline.costmodel.tile.TileCostParams
    "tile": pair(COUNT), "flops_per_ns": POSITIVE, "f32_slowdown": POSITIVE, "bytes_per_ns": POSITIVE,
    "per_tile_overhead_ns": NON_NEGATIVE, "launch_overhead_ns": NON_NEGATIVE, "vmem_bytes": POSITIVE,
    "spill_penalty": NON_NEGATIVE, "elementwise_flops": NON_NEGATIVE, "vector_flops_per_ns": POSITIVE})

SYNTHESIZE = Group({
    "noise": NON_NEGATIVE, "normalizer_noise": NON_NEGATIVE, "chunk_configs": COUNT,
    "workers": COUNT,                     # processes building the programs (builder programs)
    "search": SEARCH, "layout_cost": LAYOUT_COST, "tile_cost": TILE_COST,
    "tile_search": Group({"min_tile": pair(COUNT), "default_share": FRACTION}),
    "world": Group({                      # constants drawn per program (pipeline/synth/worlds.py)
        "splits": List(Str(SPLITS)),
        "spread": Group({name: Float(low=1.0) for name in WORLD_SPREAD_CONSTANTS}),
        "placement_power": pair(POSITIVE),   # [low, high]
    })})
FEATURIZE_SEARCH = SEARCH
FEATURIZE_TILE_SEARCH = Group({"min_tile": pair(COUNT), "cost": TILE_COST})

PER_SPLIT = Entries(Int(low=0), SPLITS)   # {split: count}, splits left out: none
SIZE_GRID = Group({"batch": List(COUNT, min_len=1), "width": List(COUNT, min_len=1),
                   "depth": List(Int(low=0), min_len=1), "extent": List(COUNT, min_len=1),
                   "dtype": List(Str(ZOO_DTYPES), min_len=1)})
GRID_NAMES = ("train", "test")            # the zoo's size grids (pipeline/zoo/registry.SPLIT_GRID's values)
GRIDS = Entries(SIZE_GRID, GRID_NAMES)    # {grid name: grid}
COMMON = {"builder": Str(SYNTH_BUILDERS), "seed": Int(low=0), "layout_configs": pair(COUNT),
          "test_configs": pair(COUNT), "max_config_nodes": COUNT, "tile_configs": pair(COUNT)}
GENERATORS = {
    "programs": Group({**COMMON, "programs": Entries(PER_SPLIT), "sizes": GRIDS, "tile_sizes": Optional(GRIDS),
                       "tile_programs": PER_SPLIT, "tile_kernels_per_program": COUNT,
                       "extra_programs": Optional(Entries(PER_SPLIT))},
                      optional=frozenset({"tile_sizes", "extra_programs"})),
    "templates": Group({**COMMON, "graphs": Entries(PER_SPLIT, ("tile", "layout")), "layout_nodes": pair(COUNT)}),
}
RANGES = {"synthesize.search.default_block_prob": ("search", "default_block_prob"),
          "synthesize.world.placement_power": ("world", "placement_power")}
GENERATOR_RANGES = ("layout_configs", "test_configs", "tile_configs", "layout_nodes")


def check_range(key: str, value: Sequence) -> None:
    """A [low, high] range (the type checked it is a pair) with low <= high."""
    if value[0] > value[1]:
        raise SettingsError(key, list(value), "[low, high] with low <= high")


def check_synthesize(synthesize: Mapping) -> None:
    """The ranges of the `synthesize` group (its types: SYNTHESIZE)."""
    for key, (section, name) in RANGES.items():
        check_range(key, synthesize[section][name])


def check_generator(generator: Mapping | None) -> None:
    """`data.generator` against its builder's keys (GENERATORS; null: real data, which check_synthesized_by ties to
    data.kind), its [low, high] ranges, and `sizes` holding every grid the zoo draws from (`tile_sizes` updates
    some of them)."""
    if generator is None:
        return
    builder = generator.get("builder")
    if builder not in GENERATORS:
        raise SettingsError("data.generator.builder", builder, f"one of {list(GENERATORS)}")
    GENERATORS[builder].check(generator, "data.generator")
    for name in GENERATOR_RANGES:
        if name in generator:
            check_range(f"data.generator.{name}", generator[name])
    if builder != "programs":
        return
    sizes = generator["sizes"]
    missing = [g for g in GRID_NAMES if g not in sizes]
    if missing:
        raise SettingsError("data.generator.sizes", dict(sizes), f"a grid for each of {list(GRID_NAMES)}: missing "
                                                                 f"{missing}")
