"""How many GNN members: 1, 2 and 3 members of the seed ensemble, paired by global seed, from one bench_quality run.

    python benchmarks/bench_quality.py --tag members --seeds 3 --models gnn --keep \
        --collections layout-xla-random layout-nlp-random \
        --variant 'm01=gnn.seeds=[0,1]' --variant 'm2=gnn.seeds=[2]' data=programs
    python benchmarks/member_count.py --tag members --pair m01 --single m2 data=programs

Member m of a run with global seed k is seeded from (k, m) whatever the other members are (graphnet/members.py), so
the run's `m01` holds the 2-member ensemble {0, 1} of `gnn.seeds=[0,1,2]` and `m2` its member 2 alone. Stage gnn saves
the members' rank mean, and rank normalisation leaves a rank mean's ranks unchanged, so the 3-member prediction is
exactly (P_single + 2 P_pair) / 3 per graph (`seed_members.combine`). This script scores the three per global seed
on the run's own data (valid and the hidden test truth) and tabulates mean ± sample std over seeds and the paired
differences 3 - 2 and 2 - 1 members, plus the stage seconds of the two runs (the pair trains side by side with
gnn.member_workers=2). Output: `<results>/quality/<tag>_count.md` and `.json`.
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
from benchmarks.seed_members import combine  # noqa: E402
from pipeline.config import compose  # noqa: E402
from pipeline.errors import run_main  # noqa: E402
from pipeline.predictions import load_predictions, predictions_path  # noqa: E402
from pipeline.scoring.evaluate import load_truth  # noqa: E402
from pipeline.scoring.metrics import score_predictions  # noqa: E402
from pipeline.tpugraphs.dataset import Collection  # noqa: E402

SPLITS = ("valid", "test")
COUNTS = ("1", "2", "3")


def seed_scores(work: Path, pair: str, single: str, cfg, slug: str, k: int) -> dict[str, dict[str, float]]:
    """{split: {"1": member 2 alone, "2": members {0, 1}, "3": all three}} of collection `slug` in global seed k."""
    collection = Collection.parse(slug)
    out = {}
    for split in SPLITS:
        truth = load_truth(cfg, collection, split)
        one, two = (load_predictions(predictions_path(work / v / f"seed{k}" / "predictions", "gnn", slug, split))
                    for v in (single, pair))
        out[split] = {n: score_predictions(collection.kind, p, truth)["score"]
                      for n, p in zip(COUNTS, (one, two, combine(one, two, 2)))}
    return out


def stage_seconds(work: Path, variant: str, slug: str, k: int) -> float:
    return float(json.loads((work / variant / f"seed{k}" / "metrics" / "timings" / "gnn" / f"{slug}.json")
                            .read_text())["seconds"])


def cell(values: list[float], signed: bool = False) -> str:
    mean, std = mean_std(values)
    return f"{mean:{'+' if signed else ''}.4f} ± {std:.4f}"


def table(figures: dict[str, list[dict]], seconds: dict[str, dict[str, list[float]]]) -> list[str]:
    """Markdown rows per collection (and `overall`: the collections' mean within each seed) and split."""
    slugs = list(figures)
    n = len(figures[slugs[0]])
    figures = {**figures, "**overall**": [{s: {c: float(np.mean([figures[x][k][s][c] for x in slugs])) for c in COUNTS}
                                           for s in SPLITS} for k in range(n)]}
    lines = ["| collection | split | 1 member | 2 members | 3 members | Δ 3 - 2 | Δ 2 - 1 | seconds 1 / 2 (side by side) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for slug, per_seed in figures.items():
        for split in SPLITS:
            v = {c: [seed[split][c] for seed in per_seed] for c in COUNTS}
            secs = "" if slug not in seconds else " / ".join(f"{np.mean(seconds[slug][c]):.0f}" for c in ("1", "2"))
            lines.append(f"| {slug} | {split} | {cell(v['1'])} | {cell(v['2'])} | {cell(v['3'])} | "
                         f"{cell([a - b for a, b in zip(v['3'], v['2'])], True)} | "
                         f"{cell([a - b for a, b in zip(v['2'], v['1'])], True)} | {secs} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", required=True, help="the bench_quality run (--keep) under <results>/quality")
    parser.add_argument("--pair", required=True, help="its variant with gnn.seeds=[0,1]")
    parser.add_argument("--single", required=True, help="its variant with gnn.seeds=[2]")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("common", nargs="*", help="the common overrides the bench run was given")
    args = parser.parse_args(argv)
    work = RESULTS / args.tag
    cfg = compose([*args.common, f"paths.synthetic_dir={work / 'data'}"])
    slugs = sorted(p.stem for p in (work / args.pair / "seed0" / "metrics" / "gnn").glob("*.json"))
    if not slugs:
        raise SystemExit(f"error: {work / args.pair}/seed0/metrics/gnn: no gnn metrics; run bench_quality --keep")
    figures = {slug: [seed_scores(work, args.pair, args.single, cfg, slug, k) for k in range(args.seeds)]
               for slug in slugs}
    seconds = {slug: {"1": [stage_seconds(work, args.single, slug, k) for k in range(args.seeds)],
                      "2": [stage_seconds(work, args.pair, slug, k) for k in range(args.seeds)]} for slug in slugs}
    lines = [f"# GNN members: 1, 2, 3 (`{args.tag}`: `{args.pair}` + `{args.single}`, {args.seeds} global seeds)", "",
             "Mean ± sample std over global seeds; Δ paired by seed. 1 member = member 2 alone, 2 = members 0 and 1, "
             "3 = all three (rank mean).", ""] + table(figures, seconds)
    print("\n".join(lines))
    (RESULTS / f"{args.tag}_count.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{args.tag}_count.json").write_text(json.dumps({"scores": figures, "seconds": seconds}, indent=1) + "\n")


if __name__ == "__main__":
    run_main(main)
