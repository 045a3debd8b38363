"""Command featurize's settings (a user's HLO programs as TpuGraphs graphs): `featurize_settings(cfg)` reads the
`featurize` group once into a `pipeline.featurizer.dataset.FeaturizeSettings`."""
from __future__ import annotations

from pipeline.featurizer.dataset import FeaturizeSettings
from pipeline.settings.sections import search_params, tile_search
from pipeline.tpugraphs.dataset import Collection


def featurize_settings(cfg) -> FeaturizeSettings:
    """The `featurize` group: collections, configurations per graph, the layout search and the tile candidates."""
    f = cfg.featurize
    cap = f["max_config_nodes"]
    return FeaturizeSettings(int(f["seed"]), tuple(Collection.parse(c) for c in f["collections"]),
                             int(f["layout_configs"]), int(f["tile_configs"]), None if cap is None else int(cap),
                             int(f["chunk_configs"]), search_params(f["search"]),
                             tile_search(f["tile_search"]["min_tile"], f["tile_search"]["cost"]))
