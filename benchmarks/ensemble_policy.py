"""How the ensemble should choose its weights: every policy scored on the same members' predictions, paired by seed.

    python benchmarks/bench_quality.py --tag T --seeds 3 --models lgbm gnn ensemble --keep --variant 'V=' data=programs
    python benchmarks/ensemble_policy.py --tag T --variant V data=programs

Stage ensemble scores a weight grid over [heuristic, lgbm, gnn] on valid (3-4 graphs per layout collection here) and
keeps the best, ties broken by `ensemble.tie_break`. A blend that beats the GNN by less than valid's noise is then
chosen by that noise. This script reads each seed's kept member predictions (`<tag>/<V>/seed<k>/predictions`) and
the truth of the run's own data, scores every grid blend on valid and test once, and applies each policy:

- `stage`: the stage's own choice (`pipeline.ensembling.blend.choose_weights` with the current settings);
- `tolerance τ, prefer M`: among the blends within τ of the best valid score, the one with the most weight on
  member M (then the best valid score); τ = 0 with M = the stage's tie-break is the stage's choice up to ties;
- single members and equal weights, for reference.

Prints and writes `<results>/quality/<tag>_policy.md` and `.json`: per policy, the Kaggle score over the collections
(mean ± sample std over seeds) on valid and test, and Δ against `stage` paired by seed.
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
from pipeline.ensembling.blend import blend, choose_weights, weight_grid  # noqa: E402
from pipeline.errors import run_main  # noqa: E402
from pipeline.predictions import load_predictions, predictions_path  # noqa: E402
from pipeline.scoring.evaluate import load_truth  # noqa: E402
from pipeline.scoring.metrics import score_predictions  # noqa: E402
from pipeline.tpugraphs.dataset import Collection  # noqa: E402

SPLITS = ("valid", "test")
TOLERANCES = (0.0, 0.001, 0.0025, 0.005, 0.01, 0.02)


def grid_scores(kind: str, members: dict, truth: dict, grid: np.ndarray, method: str) -> dict[str, np.ndarray]:
    """{split: [candidates]} the score of every grid blend."""
    return {split: np.array([score_predictions(kind, blend(members[split], w, method), truth[split])["score"]
                             for w in grid]) for split in SPLITS}


def tolerance_pick(valid: np.ndarray, grid: np.ndarray, tolerance: float, prefer: int) -> int:
    """Index of the blend within `tolerance` of the best valid score with the most weight on member `prefer`, then the
    best valid score."""
    near = np.flatnonzero(valid >= valid.max() - tolerance)
    return int(max(near, key=lambda i: (grid[i, prefer], valid[i])))


def policies(names: list[str]) -> list[tuple[str, object]]:
    """(name, how) pairs: how is "stage", ("tol", τ, member index), ("single", index) or "equal"."""
    gnn = names.index("gnn")
    out = [("stage", "stage"), ("equal", "equal")]
    out += [(f"{m} alone", ("single", i)) for i, m in enumerate(names)]
    out += [(f"tolerance {t}, prefer gnn", ("tol", t, gnn)) for t in TOLERANCES]
    return out


def seed_table(work: Path, variant: str, cfg, slug: str, k: int) -> dict[str, dict[str, float]]:
    """{policy: {split: score}} of one collection in global seed k."""
    collection = Collection.parse(slug)
    names = list(cfg.ensemble.members)
    folder = work / variant / f"seed{k}" / "predictions"
    members = {split: [load_predictions(predictions_path(folder, m, slug, split)) for m in names] for split in SPLITS}
    truth = {split: load_truth(cfg, collection, split) for split in SPLITS}
    ens = cfg.ensemble
    grid = weight_grid(len(names), ens.grid_step)
    scores = grid_scores(collection.kind, members, truth, grid, ens.normalize)
    out = {}
    for name, how in policies(names):
        if how == "stage":
            weights = choose_weights(collection.kind, members["valid"], truth["valid"], ens.grid_step, ens.normalize,
                                     ens.tie_break)[0]
            pick = int(np.flatnonzero(np.all(np.isclose(grid, weights), axis=1))[0])
        elif how == "equal":
            out[name] = {split: score_predictions(collection.kind, blend(members[split], np.full(len(names),
                         1 / len(names)), ens.normalize), truth[split])["score"] for split in SPLITS}
            continue
        elif how[0] == "single":
            pick = int(np.flatnonzero(grid[:, how[1]] == 1.0)[0])
        else:
            pick = tolerance_pick(scores["valid"], grid, how[1], how[2])
        out[name] = {split: float(scores[split][pick]) for split in SPLITS}
        out[name]["weights"] = grid[pick].tolist()
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
    overall = {p: {s: [float(np.mean([figures[c][k][p][s] for c in slugs])) for k in range(args.seeds)]
                   for s in SPLITS} for p in names}
    lines = [f"# Ensemble weight policies on `{args.tag}:{args.variant}` ({args.seeds} seeds, {len(slugs)} collections)",
             "", "Kaggle score over the collections, mean ± sample std over seeds; Δ against `stage` paired by seed.", "",
             "| policy | valid | test | Δ valid | Δ test | " + " | ".join(f"{c} test" for c in slugs) + " |",
             "|" + " --- |" * (5 + len(slugs))]
    for p in names:
        cells = [f"{m:.4f} ± {s:.4f}" for m, s in (mean_std(overall[p][x]) for x in SPLITS)]
        deltas = [f"{m:+.4f} ± {s:.4f}" for m, s in (mean_std([a - b for a, b in zip(overall[p][x], overall["stage"][x])])
                                                      for x in SPLITS)]
        per = [f"{mean_std([figures[c][k][p]['test'] for k in range(args.seeds)])[0]:.4f}" for c in slugs]
        lines.append(f"| {p} | {' | '.join(cells)} | {' | '.join(deltas)} | {' | '.join(per)} |")
    print("\n".join(lines))
    (RESULTS / f"{args.tag}_policy.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{args.tag}_policy.json").write_text(json.dumps({"per_seed": figures, "overall": overall}, indent=1) + "\n")


if __name__ == "__main__":
    run_main(main)
