"""Per-configuration features of a tile graph, vectorised over configurations.

A tile configuration is the 24-vector `config_feat` (docs/tpugraphs-format.md 2d): kernel_bounds 0-7,
output_bounds 8-15, input_bounds 16-23 (six dims, then _sum and _product; 0 past the rank). Feature groups:

- `tile_config`: the 24 values as they are;
- `tile_derived`: how the output tile covers the output shape of the kernel (the graph's root node, see
  `output_shape`): tile count per output dim and in total, the padded/raw element ratio (waste of partial tiles),
  the fraction of the output one tile covers, and the TPU alignment of the two minor dims of the tile (the last
  dim is the most minor in XLA's default layout) against 128 and 8;
- `tile_relative`: the GNN's tile inputs (`pipeline.tpugraphs.tiles.tile_inputs`): the same geometry as logs and
  ratios only (no raw bound or size), so a kernel larger than any in train is described by the tile relative to it.

The geometry (and its assumptions: output_bounds_i tiles shape_dimensions_i; a bound of 0 or -1 = not tiled) is
`pipeline.tpugraphs.tiles`, shared with the GNN's tile inputs.
"""
from __future__ import annotations

import numpy as np

from pipeline.choices import LGBM_TILE_GROUPS
from pipeline.pruned import PrunedGraph
from pipeline.tpugraphs import tiles as tile_meaning
from pipeline.tpugraphs.layouts import TPU_TILE_MINOR, TPU_TILE_SECOND_MINOR
from pipeline.tpugraphs.schema import CONFIG_FEAT_DIM, CONFIG_FEAT_NAMES, MAX_DIMS

TILE_GROUPS = LGBM_TILE_GROUPS


def output_shape(graph: PrunedGraph) -> np.ndarray:
    """float64 [6] output dimension sizes of the kernel, -1 past the rank (`pipeline.tpugraphs.tiles.output_shape`)."""
    return tile_meaning.output_shape(graph.node_feat_raw)


def tile_feature_names(groups: set[str]) -> list[str]:
    """Column names of `tile_features` for the enabled groups, in order."""
    names = []
    if "tile_config" in groups:
        names += list(CONFIG_FEAT_NAMES)
    if "tile_derived" in groups:
        names += [f"tiles_{d}" for d in range(MAX_DIMS)] + [
            "tiles_log2", "pad_ratio", "tile_fraction_log2", "tile_minor", "tile_second_minor",
            "tile_minor_aligned128", "tile_second_minor_aligned8", "tile_elements_log2"]
    if "tile_relative" in groups:
        names += [f"rel_{name}" for name in tile_meaning.TILE_INPUT_NAMES]
    return names


def tile_features(shape: np.ndarray, config_feat: np.ndarray, groups: set[str]) -> np.ndarray:
    """Features of a chunk of tile configurations.

    Args:
        shape: float64 [6] output dimension sizes from `output_shape` (-1 past the rank).
        config_feat: float32 [configs, 24] config rows.
        groups: enabled feature groups (names in TILE_GROUPS; others are ignored).

    Returns:
        float32 [configs, len(tile_feature_names(groups))].
    """
    config_feat = np.asarray(config_feat, dtype=np.float64)
    if config_feat.ndim != 2 or config_feat.shape[1] != CONFIG_FEAT_DIM:
        raise ValueError(f"config_feat: expected [configs, {CONFIG_FEAT_DIM}], found {config_feat.shape}")
    columns = []
    if "tile_config" in groups:
        columns.append(config_feat)
    if "tile_derived" in groups:
        geo = tile_meaning.tile_geometry(shape, config_feat)
        elements, tile = geo.elements, geo.tile_elements
        minor, second = geo.minor, geo.second_minor
        columns.append(np.column_stack([
            geo.tiles, np.log2(geo.tiles).sum(1), geo.padded / elements, np.log2(tile / elements),
            minor, second, minor % TPU_TILE_MINOR == 0, second % TPU_TILE_SECOND_MINOR == 0, np.log2(tile),
        ]))
    if "tile_relative" in groups:
        columns.append(tile_meaning.tile_inputs(shape, config_feat))         # [configs, TILE_INPUT_DIM]
    if not columns:
        return np.zeros((len(config_feat), 0), dtype=np.float32)
    return np.concatenate(columns, axis=1).astype(np.float32)
