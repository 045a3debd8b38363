"""The GNN seed ensemble against one seed, from two bench_quality runs that share member 0 (issue #13).

    python benchmarks/bench_quality.py --tag seeds --seeds 3 --models lgbm gnn ensemble --keep \
        --variant 's1=gnn.seeds=[0]' data=programs                      # member 0, with lgbm and the blend
    python benchmarks/bench_quality.py --tag seeds12 --seeds 3 --models gnn --keep \
        --variant 's12=gnn.seeds=[1,2]' data=programs                   # members 1 and 2 of the same runs
    python benchmarks/seed_members.py --one seeds/s1 --rest seeds12/s12 --tag seed_members data=programs

Member m of a run with global seed k is seeded from (k, m) whatever the other members are (graphnet/members.py),
so member 0 of `gnn.seeds=[0,1,2]` is the model of `gnn.seeds=[0]` and members 1, 2 those of `gnn.seeds=[1,2]`.
Stage gnn saves the members' rank mean, and rank normalisation leaves a rank mean's ranks unchanged, so the
3-member prediction is exactly (P_one + 2 P_rest) / 3 per graph (`combine`; tests/test_seed_members.py). This
script writes it beside the runs (`<one>c/seed<k>/`), re-runs stage ensemble on it with the run's lgbm and
heuristic predictions, and tabulates, paired by global seed: the 1- and 3-member GNN and blend, the gain over
member 0 (one seed), over the members' mean (the expected single seed) and over the best member.
Output: `<results>/quality/<tag>.md` and `.json`.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_quality import RESULTS, mean_std, out_paths, run_stage  # noqa: E402
from pipeline.errors import run_main  # noqa: E402
from pipeline.predictions import Predictions, load_predictions, predictions_path, save_predictions  # noqa: E402

SPLITS = ("valid", "test")


def combine(one: Predictions, rest: Predictions, n_rest: int) -> Predictions:
    """The rank mean of 1 + n_rest members from the saved rank means of 1 member and of the other n_rest."""
    if sorted(one) != sorted(rest):
        raise ValueError(f"the two runs scored different graphs: {sorted(one)} vs {sorted(rest)}")
    out = Predictions()
    for graph_id in one:
        out[graph_id] = (one[graph_id] + n_rest * rest[graph_id]) / (1 + n_rest)   # [configs]
    return out


def score(metrics: dict, split: str) -> float:
    value = metrics[split]
    return float(value["score"] if isinstance(value, dict) else value)


def rows_for(one: Path, rest: Path, out: Path, slug: str, k: int) -> dict[str, dict[str, float]]:
    """Per split: the figures of one collection in global seed k (reads the three runs' metrics files)."""
    g1 = json.loads((one / f"seed{k}" / "metrics" / "gnn" / f"{slug}.json").read_text())
    g_rest = json.loads((rest / f"seed{k}" / "metrics" / "gnn" / f"{slug}.json").read_text())
    e1 = json.loads((one / f"seed{k}" / "metrics" / "ensemble" / f"{slug}.json").read_text())
    e3 = json.loads((out / f"seed{k}" / "metrics" / "ensemble" / f"{slug}.json").read_text())
    figures = {}
    for split in SPLITS:
        members = [m[split] for m in g1["members"] + g_rest["members"]]
        gnn = e3[f"member_{split}_scores"]["gnn"]
        figures[split] = {"gnn_one": score(g1, split), "gnn_all": gnn, "member_mean": float(np.mean(members)),
                          "member_best": float(max(members)), "blend_one": score(e1, split),
                          "blend_all": score(e3, split)}
    return figures


COLUMNS = [("gnn, member 0", lambda f: f["gnn_one"]), ("gnn, all members", lambda f: f["gnn_all"]),
           ("Δ over member 0", lambda f: f["gnn_all"] - f["gnn_one"]),
           ("Δ over the members' mean", lambda f: f["gnn_all"] - f["member_mean"]),
           ("Δ over the best member", lambda f: f["gnn_all"] - f["member_best"]),
           ("blend, member 0", lambda f: f["blend_one"]), ("blend, all members", lambda f: f["blend_all"]),
           ("blend Δ", lambda f: f["blend_all"] - f["blend_one"])]


def cell(values: list[float], signed: bool) -> str:
    mean, std = mean_std(values)
    return f"{mean:{'+' if signed else ''}.4f} ± {std:.4f}"


def table(figures: dict[str, list[dict]]) -> list[str]:
    """Markdown rows: per collection (and `overall`, the collections' mean within each seed) and split."""
    slugs = list(figures)
    n_seeds = len(figures[slugs[0]])
    figures = {**figures, "**overall**": [{split: {key: float(np.mean([figures[s][k][split][key] for s in slugs]))
                                                    for key in figures[slugs[0]][0][split]}
                                           for split in SPLITS} for k in range(n_seeds)]}
    lines = ["| collection | split | " + " | ".join(name for name, _ in COLUMNS) + " |",
             "| --- | --- | " + " | ".join("---" for _ in COLUMNS) + " |"]
    for slug, per_seed in figures.items():
        for split in SPLITS:
            cells = [cell([fn(seed[split]) for seed in per_seed], signed="Δ" in name) for name, fn in COLUMNS]
            lines.append(f"| {slug} | {split} | " + " | ".join(cells) + " |")
    return lines


def run_ensemble(one: Path, out: Path, slug: str, k: int, common: list[str]) -> None:
    """Stage ensemble of global seed k on the blend in `out`, reading the run's data and pruned graphs."""
    data = [*common, f"paths.synthetic_dir={one.parent / 'data'}", f"paths.pruned_dir={one / 'pruned'}"]
    folder = out / f"seed{k}"
    run_stage("ensemble", ["--collection", slug, *data, f"seed={k}", *out_paths(folder)], out / "log.txt")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", required=True, help="variant folder of the 1-member runs, under <results>/quality")
    parser.add_argument("--rest", required=True, help="variant folder of the other members' runs")
    parser.add_argument("--n-rest", type=int, default=2, help="members in the --rest runs")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tag", default="seed_members")
    parser.add_argument("common", nargs="*", help="the common overrides the two bench runs were given")
    args = parser.parse_args(argv)
    quality = RESULTS
    one, rest = quality / args.one, quality / args.rest
    out = one.with_name(one.name + "c")
    slugs = sorted(p.stem for p in (one / "seed0" / "metrics" / "gnn").glob("*.json"))
    figures: dict[str, list[dict]] = {slug: [] for slug in slugs}
    for k in range(args.seeds):
        shutil.rmtree(out / f"seed{k}", ignore_errors=True)
        shutil.copytree(one / f"seed{k}" / "predictions", out / f"seed{k}" / "predictions")
        shutil.rmtree(out / f"seed{k}" / "predictions" / "ensemble")
        for slug in slugs:
            for split in SPLITS:
                blended = combine(load_predictions(predictions_path(one / f"seed{k}" / "predictions", "gnn", slug, split)),
                                  load_predictions(predictions_path(rest / f"seed{k}" / "predictions", "gnn", slug, split)),
                                  args.n_rest)
                save_predictions(blended, predictions_path(out / f"seed{k}" / "predictions", "gnn", slug, split))
            run_ensemble(one, out, slug, k, args.common)
            figures[slug].append(rows_for(one, rest, out, slug, k))
    lines = [f"# Seed ensemble vs one seed (`{args.one}` + `{args.rest}`, {args.seeds} global seeds)", "",
             "Mean ± sample std over global seeds; Δ paired by seed. blend = stage ensemble (lgbm + gnn + heuristic).",
             ""] + table(figures)
    print("\n".join(lines))
    (quality / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    (quality / f"{args.tag}.json").write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    run_main(main)
