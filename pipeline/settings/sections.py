"""The config sections the graph generators and the featurizer share, each read in one place: the layout search
(`search`), the layout and tile cost models (`layout_cost`, `tile_cost`) and the tile search (`tile_search`),
whichever group holds them (`synthesize`, `featurize`)."""
from __future__ import annotations

from typing import Mapping, Sequence, TypeVar

from pipeline.costmodel.layout import LayoutCostParams
from pipeline.costmodel.tile import TileCostParams
from pipeline.featurizer.tile_configs import TileSearch
from pipeline.hlo.configs import SearchParams

P = TypeVar("P")


def frozen_params(cls: type[P], section: Mapping) -> P:
    """A frozen parameter dataclass from its config section, field by field; lists become tuples."""
    return cls(**{k: tuple(v) if isinstance(v, Sequence) and not isinstance(v, str) else v
                  for k, v in dict(section).items()})


def search_params(section: Mapping) -> SearchParams:
    """The layout `search` section: how `default`-search configurations perturb the compiler's layouts."""
    return SearchParams(tuple(section["default_block_prob"]), float(section["perturbed_nodes_mean"]),
                        float(section["swap_prob"]), float(section["duplicate_fraction"]),
                        float(section["near_default_share"]))


def layout_cost(section: Mapping) -> LayoutCostParams:
    """The layout cost model's constants (`synthesize.layout_cost`)."""
    return frozen_params(LayoutCostParams, section)


def tile_cost(section: Mapping) -> TileCostParams:
    """The tile cost model's constants (`synthesize.tile_cost`, `featurize.tile_search.cost`)."""
    return frozen_params(TileCostParams, section)


def tile_search(min_tile: Sequence[int], cost: Mapping) -> TileSearch:
    """The tile candidates: the smallest tile and the cost model that ranks them."""
    return TileSearch(tuple(min_tile), tile_cost(cost))
