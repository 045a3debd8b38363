"""Which tile regimes the splits of a dataset cover: is the fastest configuration of a kernel its largest tile?

    python benchmarks/tile_regimes.py [OVERRIDES ...]          # the selected data, e.g. data=programs_large

A model can only learn what its train split shows. On small kernels the whole output in one tile is fastest (no
per-tile overhead, no padding); on large ones that tile no longer fits on-chip memory and a smaller one wins. Per
split, this prints the kernels, how many of them are fastest with a tile smaller than their largest candidate
(`smaller_tile_best`), and the largest output (elements). A split whose kernels never have a smaller best tile cannot
teach a model when to stop preferring larger tiles, whatever its inputs (docs/decisions.md, issue 27).

Reads the official-format files (`node_feat`, `config_feat`, runtimes / normalizers) and, for a built-in preset's
test split, its hidden truth; real test data has no labels and is skipped.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pipeline.config import compose  # noqa: E402
from pipeline.errors import run_main  # noqa: E402
from pipeline.scoring.evaluate import load_truth  # noqa: E402
from pipeline.tpugraphs.dataset import Collection, graph_paths, load_graph, npz_root  # noqa: E402
from pipeline.tpugraphs.schema import SPLITS  # noqa: E402
from pipeline.tpugraphs.tiles import output_shape, tile_geometry  # noqa: E402

TILE = "tile-xla"


def regime_row(kernels: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> dict:
    """Counts over (node_feat [nodes, 140], config_feat [configs, 24], runtimes [configs]) of each kernel.

    Returns {"kernels", "smaller_tile_best" (the fastest config's tile has fewer elements than the largest tile
    sampled), "max_output_elements"}.
    """
    row = {"kernels": 0, "smaller_tile_best": 0, "max_output_elements": 0.0}
    for node_feat, config_feat, runtimes in kernels:
        shape = output_shape(node_feat)
        geometry = tile_geometry(np.where(shape > 0, shape, -1), config_feat)
        tile = geometry.tile_elements                                   # [configs]
        row["kernels"] += 1
        row["smaller_tile_best"] += int(tile[int(np.argmin(runtimes))] < tile.max())
        row["max_output_elements"] = max(row["max_output_elements"], geometry.elements)
    return row


def split_kernels(cfg, split: str):
    """(node_feat, config_feat, runtimes) of every tile kernel of a split; None when the split has no labels."""
    collection = Collection.parse(TILE)
    truth = load_truth(cfg, collection, split)
    if truth is None:
        return None
    graphs = (load_graph(path, collection, split) for path in graph_paths(npz_root(cfg.data.root), collection, split))
    return ((g.node_feat, g.config_feat, truth[g.graph_id]) for g in graphs)


def main(argv: Sequence[str] | None = None) -> dict:
    overrides = list(sys.argv[1:] if argv is None else argv)
    cfg = compose(overrides)
    rows = {}
    print(f"| data={cfg.data.name} split | kernels | smaller tile best | largest output (elements) |")
    print("| --- | --- | --- | --- |")
    for split in SPLITS:
        kernels = split_kernels(cfg, split)
        if kernels is None:
            continue
        rows[split] = row = regime_row(kernels)
        print(f"| {split} | {row['kernels']} | {row['smaller_tile_best']} | {row['max_output_elements']:.0f} |")
    return rows


if __name__ == "__main__":
    run_main(main)
