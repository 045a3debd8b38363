"""Per-configuration features of a tile graph, vectorised over configurations.

A tile configuration is the 24-vector `config_feat` (docs/tpugraphs-format.md 2d): kernel_bounds 0-7,
output_bounds 8-15, input_bounds 16-23 (six dims, then _sum and _product; 0 past the rank). Feature groups:

- `tile_config`: the 24 values as they are;
- `tile_derived`: how the output tile covers the output shape of the kernel (the graph's root node, see
  `output_shape`): tile count per output dim and in total, the padded/raw element ratio (waste of partial tiles),
  the fraction of the output one tile covers, and the TPU alignment of the two minor dims of the tile (the last
  dim is the most minor in XLA's default layout) against 128 and 8.

Assumption: output_bounds_i tiles shape_dimensions_i of the output (same dimension order). A bound of 0 means
"not tiled": the whole dimension is one tile.
"""
from __future__ import annotations

import numpy as np

from pipeline.choices import LGBM_TILE_GROUPS
from pipeline.pruned import PrunedGraph
from pipeline.tpugraphs.layouts import TPU_TILE_MINOR, TPU_TILE_SECOND_MINOR
from pipeline.tpugraphs.schema import (CONFIG_FEAT_COLUMN, CONFIG_FEAT_DIM, CONFIG_FEAT_NAMES, IS_ROOT_COLUMN, MAX_DIMS,
                                       SHAPE_COLUMNS)

OUTPUT_BOUNDS = CONFIG_FEAT_COLUMN["output_bounds_0"]   # first of the output tile's MAX_DIMS bounds
TILE_GROUPS = LGBM_TILE_GROUPS


def output_shape(graph: PrunedGraph) -> np.ndarray:
    """float64 [6] output dimension sizes of the kernel, -1 past the rank.

    The output is the last node flagged is_root (nodes are in topological order), else the last node.
    """
    raw = np.asarray(graph.node_feat_raw)
    roots = np.flatnonzero(raw[:, IS_ROOT_COLUMN] > 0)
    node = roots[-1] if len(roots) else len(raw) - 1
    return raw[node, SHAPE_COLUMNS].astype(np.float64)


def tile_feature_names(groups: set[str]) -> list[str]:
    """Column names of `tile_features` for the enabled groups, in order."""
    names = []
    if "tile_config" in groups:
        names += list(CONFIG_FEAT_NAMES)
    if "tile_derived" in groups:
        names += [f"tiles_{d}" for d in range(MAX_DIMS)] + [
            "tiles_log2", "pad_ratio", "tile_fraction_log2", "tile_minor", "tile_second_minor",
            "tile_minor_aligned128", "tile_second_minor_aligned8", "tile_elements_log2"]
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
        rank = int((shape >= 0).sum())
        dims = np.where(shape > 0, shape, 1.0)[None, :]                           # [1, 6]
        bounds = config_feat[:, OUTPUT_BOUNDS:OUTPUT_BOUNDS + MAX_DIMS]           # [configs, 6]
        bounds = np.where(bounds > 0, np.minimum(bounds, dims), dims)              # untiled dim = one tile
        tiles = np.ceil(dims / bounds)                                             # [configs, 6]
        padded = (tiles * bounds).prod(1)
        elements = dims.prod()
        minor = bounds[:, rank - 1] if rank >= 1 else np.ones(len(bounds))
        second = bounds[:, rank - 2] if rank >= 2 else np.ones(len(bounds))
        columns.append(np.column_stack([
            tiles, np.log2(tiles).sum(1), padded / elements, np.log2(bounds.prod(1) / elements),
            minor, second, minor % TPU_TILE_MINOR == 0, second % TPU_TILE_SECOND_MINOR == 0, np.log2(bounds.prod(1)),
        ]))
    if not columns:
        return np.zeros((len(config_feat), 0), dtype=np.float32)
    return np.concatenate(columns, axis=1).astype(np.float32)
