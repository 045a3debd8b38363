"""How the ensemble should choose its weights: every policy scored on the same members' predictions, paired by seed.

    python benchmarks/bench_quality.py --tag T --seeds 3 --models lgbm gnn ensemble --keep --variant 'V=' data=programs
    python benchmarks/ensemble_policy.py --tag T --variant V data=programs

Stage ensemble scores a weight grid over its members (heuristic, lgbm, gnn) on valid, 3-4 graphs per layout
collection here, and keeps the best (`pipeline.ensembling.blend.choose_weights`). This script reads each seed's kept
member predictions (`<tag>/<V>/seed<k>/predictions`) and the truth of the run's own data, scores every grid blend on
every valid and test graph once, and applies each policy to those scores:

- `stage`: the stage's former choice, `ensemble.tolerance` 0 and no preferred member (`blend.best_candidate` on the
  per-graph scores, checked against `choose_weights` on the whole of valid);
- `tolerance τ, prefer gnn`: blends within τ of the best valid score tie, and ties go to the most weight on the GNN
  (`ensemble.tolerance`, `ensemble.prefer`);
- each member alone.

Three figures per policy: valid (weights chosen and scored on all of valid: a grid's best is never below its
members), leave-one-out valid (for each valid graph, weights chosen on the other valid graphs and scored on it: an
estimate on graphs the choice did not see, which test truth never enters) and test. Kaggle score over the
collections, mean ± sample std over seeds, Δ against `stage` paired by seed. Writes
`<results>/quality/<tag>_policy.md` and `.json`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_quality import RESULTS, mean_std  # noqa: E402
from pipeline.config import compose  # noqa: E402
from pipeline.ensembling.blend import best_candidate, blend_graph, choose_weights, weight_grid  # noqa: E402
from pipeline.errors import run_main  # noqa: E402
from pipeline.predictions import load_predictions, predictions_path  # noqa: E402
from pipeline.scoring import metrics  # noqa: E402
from pipeline.scoring.evaluate import load_truth  # noqa: E402
from pipeline.tpugraphs.dataset import Collection  # noqa: E402

SPLITS = ("valid", "test")
FIGURES = ("valid", "loo", "test")
TOLERANCES = (0.0, 0.001, 0.0025, 0.005, 0.01, 0.02)


def per_graph(kind: str, members: list, truth: dict, grid: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
    """(score [graphs, candidates], Kendall tau [graphs, candidates]) of every grid blend on every graph of `truth`."""
    score = np.zeros((len(truth), len(grid)))
    order = np.zeros_like(score)
    for i, (graph, runtimes) in enumerate(sorted(truth.items())):
        member_scores = {k: m[graph] for k, m in enumerate(members)}
        for c, weights in enumerate(grid):
            blended = blend_graph(member_scores, dict(enumerate(weights)), method)     # [configs], as stage ensemble
            score[i, c] = metrics.graph_score(kind, blended, runtimes)
            order[i, c] = metrics.kendall_tau(blended, runtimes)
    return score, order


def policies(names: list[str]) -> list[tuple[str, object]]:
    """(name, how): how is ("tol", τ, member index or None) or ("single", member index)."""
    gnn = names.index("gnn")
    return ([("stage", ("tol", 0.0, None))] + [(f"{m} alone", ("single", i)) for i, m in enumerate(names)]
            + [(f"tolerance {t}, prefer gnn", ("tol", t, gnn)) for t in TOLERANCES])


def seed_table(work: Path, variant: str, cfg, slug: str, k: int) -> dict[str, dict[str, float]]:
    """{policy: {figure: score, "weights": [...]}} of one collection in global seed k."""
    collection = Collection.parse(slug)
    names, ens = list(cfg.ensemble.members), cfg.ensemble
    folder = work / variant / f"seed{k}" / "predictions"
    members = {split: [load_predictions(predictions_path(folder, m, slug, split)) for m in names] for split in SPLITS}
    truth = {split: load_truth(cfg, collection, split) for split in SPLITS}
    grid = weight_grid(len(names), ens.grid_step)
    scores = {split: per_graph(collection.kind, members[split], truth[split], grid, ens.normalize) for split in SPLITS}
    use_order = ens.tie_break == "order" and collection.kind == "tile"
    stage = choose_weights(collection.kind, members["valid"], truth["valid"], ens.grid_step, ens.normalize,
                           ens.tie_break)[0]
    (valid, valid_order), (test, _) = scores["valid"], scores["test"]
    out = {}
    for name, how in policies(names):
        if how[0] == "single":
            choose = lambda rows, i=how[1]: int(np.flatnonzero(grid[:, i] == 1.0)[0])     # noqa: E731
        else:
            choose = lambda rows, t=how[1], p=how[2]: best_candidate(  # noqa: E731
                grid, valid[rows].mean(0), valid_order[rows].mean(0) if use_order else np.zeros(len(grid)), t, p)
        every = np.arange(len(valid))
        chosen = choose(every)
        if name == "stage" and not np.allclose(grid[chosen], stage):
            raise SystemExit(f"error: {slug} seed {k}: the replayed choice {grid[chosen]} is not the stage's {stage}")
        loo = [valid[g, choose(np.delete(every, g))] for g in every]
        out[name] = {"valid": float(valid[:, chosen].mean()), "loo": float(np.mean(loo)),
                     "test": float(test[:, chosen].mean()), "weights": grid[chosen].tolist()}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", required=True, help="the bench_quality run (--keep) under <results>/quality")
    parser.add_argument("--variant", required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("common", nargs="*", help="the common overrides the bench run was given")
    args = parser.parse_args(argv)
    work = RESULTS / args.tag
    cfg = compose([*args.common, f"paths.synthetic_dir={work / 'data'}"])
    slugs = sorted(p.name for p in (work / args.variant / "seed0" / "predictions" / "gnn").iterdir() if p.is_dir())
    figures = {slug: [seed_table(work, args.variant, cfg, slug, k) for k in range(args.seeds)] for slug in slugs}
    names = [name for name, _ in policies(list(cfg.ensemble.members))]
    overall = {p: {f: [float(np.mean([figures[c][k][p][f] for c in slugs])) for k in range(args.seeds)]
                   for f in FIGURES} for p in names}
    lines = [f"# Ensemble weight policies on `{args.tag}:{args.variant}` ({args.seeds} seeds, {len(slugs)} collections)",
             "", "Kaggle score over the collections, mean ± sample std over seeds; Δ against `stage` paired by seed; "
             "loo = leave-one-valid-graph-out.", "",
             "| policy | valid | loo | test | Δ loo | Δ test | " + " | ".join(f"{c} test" for c in slugs) + " |",
             "|" + " --- |" * (6 + len(slugs))]
    for p in names:
        cells = [f"{m:.4f} ± {s:.4f}" for m, s in (mean_std(overall[p][f]) for f in FIGURES)]
        deltas = [f"{m:+.4f} ± {s:.4f}" for m, s in (mean_std([a - b for a, b in zip(overall[p][f], overall["stage"][f])])
                                                      for f in ("loo", "test"))]
        per = [f"{mean_std([figures[c][k][p]['test'] for k in range(args.seeds)])[0]:.4f}" for c in slugs]
        lines.append(f"| {p} | {' | '.join(cells)} | {' | '.join(deltas)} | {' | '.join(per)} |")
    print("\n".join(lines))
    (RESULTS / f"{args.tag}_policy.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{args.tag}_policy.json").write_text(json.dumps({"per_seed": figures, "overall": overall}, indent=1) + "\n")


if __name__ == "__main__":
    run_main(main)
