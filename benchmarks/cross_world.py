"""Rank in one world, score in another: this workspace's predictions against the truth of a workspace whose cost
model has other constants (issue 27: the held-out benchmark's runtimes come from a cost model the project never saw).

    python benchmarks/cross_world.py OTHER [--tag NAME] [--models gnn lgbm ensemble] [--out benchmarks/results]

OTHER is a second checkout of the same built-in dataset, synthesized under other `synthesize.layout_cost` (or
`tile_cost`) constants and run there, e.g. a clone with `python -m pipeline.config
synthesize.layout_cost.bytes_per_ns=1350.0 ...` then `dvc repro`: the same programs, graphs and configurations (checked,
file by file), other runtimes. For every collection and split of the current selection it scores
- **home**: each model of this workspace on this workspace's truth (its own stage metrics);
- **away**: the same predictions on OTHER's truth: models of one world ranking the runtimes of another;
- **native**: OTHER's model of the same name on OTHER's truth, trained in that world;
- **worlds agree**: this world's true runtimes as the ranking, scored on OTHER's truth: how far the worlds differ.
The mean over collections is the Kaggle score. Writes `<out>/cross_world_<tag>.md` and `.json` (tag: a name for
the other world).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pipeline.config import PARAMS_FILE  # noqa: E402
from pipeline.predictions import Predictions, load_predictions, predictions_path  # noqa: E402
from pipeline.scoring import metrics  # noqa: E402
from pipeline.scoring.evaluate import load_truth  # noqa: E402
from pipeline.tpugraphs.dataset import Collection, graph_paths  # noqa: E402
from pipeline.tpugraphs.schema import PREDICTED_SPLITS as SPLITS  # noqa: E402   (valid, test)

COST_SECTIONS = ("layout_cost", "tile_cost")               # synthesize.* sections the two worlds may differ in
CONFIG_KEYS = {"tile": ("node_feat", "config_feat"), "layout": ("node_feat", "node_config_ids", "node_config_feat")}


def workspace_cfg(root: Path):
    """The settings `root`'s last `dvc repro` ran with (its params.yaml), every path resolved inside `root`."""
    params = root / PARAMS_FILE
    if not params.is_file():
        raise SystemExit(f"error: {params}: no such file; expected a checkout where `python -m pipeline.config` and "
                         f"`dvc repro` ran")
    cfg = OmegaConf.load(params)
    for key, value in cfg.paths.items():
        cfg.paths[key] = str(root / value)                    # an absolute value stays itself under `/`
    cfg.data.root = str(root / cfg.data.root)
    return cfg


def same_graphs(home_cfg, other_cfg, collection: Collection) -> None:
    """Raise SystemExit (one line) unless both datasets hold the same graphs and configurations of `collection`."""
    for split in ("train", *SPLITS):
        home, other = (graph_paths(cfg.data.root, collection, split) for cfg in (home_cfg, other_cfg))
        if [p.name for p in home] != [p.name for p in other]:
            raise SystemExit(f"error: {collection.slug} {split}: the two workspaces hold different graphs; build OTHER "
                             f"from the same data= and synthesize.generator, changing only the cost constants")
        for a, b in zip(home, other):
            with np.load(a, allow_pickle=False) as x, np.load(b, allow_pickle=False) as y:
                for key in CONFIG_KEYS[collection.kind]:
                    if not np.array_equal(x[key], y[key]):
                        raise SystemExit(f"error: {b}: {key} differs from {a}; the worlds must differ in runtimes only")


def score(kind: str, preds: Predictions, truth: dict) -> float:
    return float(metrics.score_predictions(kind, preds, truth)["score"])


def as_predictions(runtimes: dict) -> Predictions:
    """True runtimes used as a ranking (lower = faster, as predictions are)."""
    preds = Predictions()
    for graph_id, values in runtimes.items():
        preds[graph_id] = values
    return preds


def compare(home_cfg, other_cfg, models: list[str]) -> list[dict]:
    """One row per collection, split and model (and one `worlds agree` row per collection and split)."""
    rows = []
    for name in home_cfg.data.collections:
        collection = Collection.parse(name)
        same_graphs(home_cfg, other_cfg, collection)
        for split in SPLITS:
            home_truth, other_truth = load_truth(home_cfg, collection, split), load_truth(other_cfg, collection, split)
            key = {"collection": collection.slug, "split": split}
            for model in models:
                mine = load_predictions(predictions_path(home_cfg.paths.predictions_dir, model, collection.slug, split))
                theirs = load_predictions(predictions_path(other_cfg.paths.predictions_dir, model, collection.slug,
                                                           split))
                rows.append({**key, "model": model, "home": score(collection.kind, mine, home_truth),
                             "away": score(collection.kind, mine, other_truth),
                             "native": score(collection.kind, theirs, other_truth)})
            rows.append({**key, "model": "worlds agree", "away": score(collection.kind, as_predictions(home_truth),
                                                                       other_truth)})
    return rows


def kaggle(rows: list[dict]) -> list[dict]:
    """Per split and model: the mean over collections of each column."""
    means = []
    for split in SPLITS:
        for model in dict.fromkeys(r["model"] for r in rows):
            picked = [r for r in rows if r["split"] == split and r["model"] == model]
            if not picked:
                continue
            means.append({"collection": "mean", "split": split, "model": model,
                          **{c: float(np.mean([r[c] for r in picked])) for c in ("home", "away", "native")
                             if c in picked[0]}})
    return means


def table(rows: list[dict]) -> list[str]:
    cell = lambda r, c: f"{r[c]:.4f}" if c in r else ""  # noqa: E731
    return ["| collection | split | model | home | away | native |", "|---|---|---|---:|---:|---:|",
            *(f"| {r['collection']} | {r['split']} | {r['model']} | {cell(r, 'home')} | {cell(r, 'away')} | "
              f"{cell(r, 'native')} |" for r in rows)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the other world's checkout (its dvc repro done)")
    parser.add_argument("--tag", default="other", help="the other world's name, in the output's file names")
    parser.add_argument("--models", nargs="+", default=["gnn", "lgbm", "ensemble"])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args()
    home_cfg, other_cfg = workspace_cfg(REPO), workspace_cfg(args.other.resolve())
    if home_cfg.data.kind != "synthetic" or home_cfg.data.name != other_cfg.data.name:
        raise SystemExit(f"error: data= {home_cfg.data.name} here, {other_cfg.data.name} in {args.other}: expected the "
                         f"same built-in preset in both (test truth is hidden only there)")
    rows = compare(home_cfg, other_cfg, args.models)
    means = kaggle(rows)
    home_cost, other_cost = ({s: OmegaConf.to_container(c.synthesize[s]) for s in COST_SECTIONS}
                             for c in (home_cfg, other_cfg))
    changed = {f"{section}.{key}": value for section in COST_SECTIONS for key, value in other_cost[section].items()
               if value != home_cost[section].get(key)}
    lines = [f"# Rank in one world, score in another (`benchmarks/cross_world.py`, data={home_cfg.data.name})", "",
             f"`python benchmarks/cross_world.py OTHER --tag {args.tag}`, OTHER a clone whose data, models and predictions "
             f"were made with these cost constants (the rest as here): `{json.dumps(changed)}`.", "", *table(means), "", *table(rows)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"cross_world_{args.tag}.md").write_text("\n".join(lines) + "\n")
    (args.out / f"cross_world_{args.tag}.json").write_text(json.dumps({"means": means, "rows": rows}, indent=1) + "\n")
    print("\n".join(table(means)))


if __name__ == "__main__":
    main()
