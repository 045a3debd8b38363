"""Full-dataset cost model of `dvc repro` (prune, lgbm, gnn with gnn=kaggle) from measured unit rates.

`rates(measured)` takes the unit rates of the largest graph of a bench_scale run; `extrapolate` multiplies them
by the work each stage does on the official dataset (benchmarks/dataset_sizes.yaml, with sources) under the conf:
- prune: GB of node_config_feat (every graph, every split) / GB/s (tile: config_feat, 24 float32 per config);
- lgbm: configs featurised (sampled train rows, valid rows, every valid + test config predicted) / features rate,
  plus train rows x lgbm.num_boost_round / training rate;
- gnn: gnn.epochs x train graphs x gnn.configs_per_graph x pruned nodes / training rate (configs x nodes / s),
  plus per epoch gnn.valid_max_configs per valid graph, plus the final predictions (every valid + test config,
  gnn.tta orderings), both at the inference rate (configs x nodes / s).
Pruned nodes per graph = the collection's mean nodes x the pruned share measured on the generated graph; tile
graphs are not pruned; the tile GNN is timed on its own (bench_scale's tile case: seconds per training step of
gnn.configs_per_graph.tile configs, configs/s at inference), since the tile model encodes a graph once per batch.
"""
from __future__ import annotations

from pipeline.settings.gnn import infer_settings, train_settings
from pipeline.tpugraphs.dataset import Collection
from pipeline.tpugraphs.schema import CONFIG_FEAT_DIM, NODE_CONFIG_FEAT_DIM

HOUR = 3600.0
TILE_CONFIG_BYTES = CONFIG_FEAT_DIM * 8      # config_feat: 24 values (float64 in the files, an upper bound)


def rates(measured: dict) -> dict:
    """Unit rates of the largest measured size (pruned graph)."""
    r = measured["sizes"][-1]
    return {"prune_gb_per_s": r["prune"]["gb_per_s"], "pruned_share": r["pruned_nodes"] / r["nodes"],
            "lgbm_features_per_s": r["lgbm"]["features_configs_per_s"],
            "lgbm_train_per_s": r["lgbm"]["train_rows_rounds_per_s"],
            "train_config_nodes_per_s": r["train"]["config_nodes_per_s"],
            "infer_config_nodes_per_s": r["infer"]["chunked_configs_per_s"] * r["pruned_nodes"],
            "tile_step_s": measured["tile"]["step_s"], "tile_infer_configs_per_s": measured["tile"]["infer_configs_per_s"]}


def _collection_cost(name: str, c: dict, unit: dict, cfg, feat_bytes: int) -> dict:
    gnn, lgbm = cfg.gnn, cfg.lgbm
    collection = Collection.parse(name)
    kind = collection.kind
    graphs, configs = c["graphs"], c["configs"]
    nodes = c["nodes"] * (unit["pruned_share"] if kind == "layout" else 1.0)
    per_config = TILE_CONFIG_BYTES if kind == "tile" else c["configurable"] * NODE_CONFIG_FEAT_DIM * feat_bytes
    gb = sum(graphs[s] * configs[s] for s in graphs) * per_config / 1e9
    settings = lgbm[kind]
    train_rows = graphs["train"] * min(configs["train"], int(settings.configs_per_graph) or configs["train"])
    valid_rows = graphs["valid"] * min(configs["valid"], int(settings.valid_configs_per_graph) or configs["valid"])
    predicted = graphs["valid"] * configs["valid"] + graphs["test"] * configs["test"]
    train = train_settings(gnn, collection, infer_settings(gnn))     # the by-search values training itself reads
    k, epochs = train.configs_per_graph, train.epochs
    valid_configs = epochs * graphs["valid"] * min(int(gnn.valid_max_configs), configs["valid"])
    if kind == "tile":       # measured per step and per config (the graph is encoded once per batch)
        gnn_train = epochs * graphs["train"] * unit["tile_step_s"]
        gnn_valid = valid_configs / unit["tile_infer_configs_per_s"]
        gnn_predict = predicted * int(gnn.tta) / unit["tile_infer_configs_per_s"]
    else:
        gnn_train = epochs * graphs["train"] * k * nodes / unit["train_config_nodes_per_s"]
        gnn_valid = valid_configs * nodes / unit["infer_config_nodes_per_s"]
        gnn_predict = predicted * int(gnn.tta) * nodes / unit["infer_config_nodes_per_s"]
    return {"prune": gb / unit["prune_gb_per_s"],
            "lgbm": ((train_rows + valid_rows + predicted) / unit["lgbm_features_per_s"]
                     + train_rows * int(lgbm.num_boost_round) / unit["lgbm_train_per_s"]),
            "gnn train": gnn_train, "gnn valid": gnn_valid, "gnn predict": gnn_predict,
            "gb": gb}


def extrapolate(unit: dict, sizes: dict, cfg) -> dict:
    """Seconds per stage and collection for the official dataset: {collection: {stage: seconds, "gb": GB}}."""
    feat_bytes = int(sizes["node_config_feat_bytes"])
    return {name: _collection_cost(name, c, unit, cfg, feat_bytes) for name, c in sizes["collections"].items()}


def extrapolation_table(cost: dict, title: str) -> list[str]:
    """Markdown rows: hours per stage and collection, and the totals."""
    stages = ["prune", "lgbm", "gnn train", "gnn valid", "gnn predict"]
    lines = [f"Extrapolated full-dataset cost, {title} (hours):", "",
             "| collection | node_config_feat GB | " + " | ".join(stages) + " | total |",
             "|---|---" + "|---" * (len(stages) + 1) + "|"]
    totals = dict.fromkeys(stages, 0.0)
    for name, c in cost.items():
        for s in stages:
            totals[s] += c[s]
        lines.append(f"| {name} | {c['gb']:.1f} | " + " | ".join(f"{c[s] / HOUR:.2f}" for s in stages)
                     + f" | {sum(c[s] for s in stages) / HOUR:.1f} |")
    lines.append(f"| **all** | {sum(c['gb'] for c in cost.values()):.1f} | "
                 + " | ".join(f"{totals[s] / HOUR:.1f}" for s in stages) + f" | **{sum(totals.values()) / HOUR:.1f}** |")
    return lines
