"""Paired comparison of separate `bench_quality.py` runs: datasets (or code) that one run cannot hold as variants.

    python benchmarks/compare_runs.py --tag NAME RUN[:VARIANT] RUN[:VARIANT] ...

    # the same seeds on two datasets (bench_quality refuses `data.*` in a variant: one run per dataset)
    python benchmarks/bench_quality.py --tag own_valid data=programs ...
    python benchmarks/bench_quality.py --tag valid_like_test data=programs data.generator.programs.xla.train=24 ...
    python benchmarks/compare_runs.py --tag data_x2 own_valid valid_like_test

RUN is a tag of `benchmarks/results/quality/` (or a path to a `<tag>.json`), VARIANT one of its variants (default:
its first). Each column is paired by seed with the first: the Δ of seed k is run B's seed k minus run A's seed k
(mean ± sample std over seeds), exactly as bench_quality pairs its variants. Only the models, collections and seeds
that every run holds are compared. Output: printed and written to `benchmarks/results/quality/<NAME>.md` / `.json`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_quality import RESULTS, aggregate, to_markdown  # noqa: E402


def load_run(spec: str, results: Path = RESULTS) -> tuple[str, dict, dict]:
    """(column name, runs[model][collection][seed] of one variant, the run's json) of `RUN[:VARIANT]`."""
    name, _, variant = spec.partition(":")
    path = Path(name) if name.endswith(".json") else results / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"error: {path}: no such bench_quality result (run benchmarks/bench_quality.py --tag ...)")
    run = json.loads(path.read_text())
    variant = variant or next(iter(run["variants"]))
    if variant not in run["runs"]:
        raise SystemExit(f"error: {path}: no variant {variant!r}; it holds {sorted(run['runs'])}")
    cells = {model: {slug: {int(seed): row for seed, row in per_seed.items()} for slug, per_seed in per_slug.items()}
             for model, per_slug in run["runs"][variant].items()}
    return f"{run['tag']}:{variant}", cells, run


def compare(columns: Sequence[tuple[str, dict]]) -> tuple[list[dict], list[str], list[str], list[int]]:
    """The rows of `aggregate` over the models, collections and seeds every column holds."""
    models = sorted(set.intersection(*(set(cells) for _, cells in columns)))
    if not models:
        raise SystemExit("error: the runs share no model")
    collections = [c for c in columns[0][1][models[0]]
                   if all(c in cells[m] for _, cells in columns for m in models)]
    seeds = sorted(set.intersection(*(set(cells[m][c]) for _, cells in columns for m in models for c in collections)))
    if len(seeds) < 2:
        raise SystemExit(f"error: the runs share {len(seeds)} seed(s); a paired spread needs 2 or more")
    runs = {name: cells for name, cells in columns}
    return aggregate(runs, [name for name, _ in columns], models, collections, seeds), models, collections, seeds


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--tag", required=True, help="name of the result files")
    parser.add_argument("runs", nargs="+", help="RUN[:VARIANT]: the first is the base of every Δ")
    args = parser.parse_args(argv)
    if "/" in args.tag or not args.tag:
        raise SystemExit(f"error: --tag {args.tag!r}: expected a file name without '/'")
    if len(args.runs) < 2:
        raise SystemExit("error: give two runs or more to compare")
    loaded = [load_run(spec) for spec in args.runs]
    rows, models, collections, seeds = compare([(name, cells) for name, cells, _ in loaded])
    sources = "; ".join(f"{name}: data {run.get('data')}, common {' '.join(run.get('common', []))}"
                        for name, _, run in loaded)
    header = (f"# {args.tag}: {' vs '.join(name for name, _, _ in loaded)} (seeds {seeds}, paired by seed)\n\n"
              f"`python benchmarks/compare_runs.py --tag {args.tag} {' '.join(args.runs)}`. Runs: {sources}.")
    markdown = to_markdown(rows, header)
    print(markdown)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.md").write_text(markdown)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({"tag": args.tag, "runs": args.runs, "seeds": seeds,
                                                          "models": models, "collections": collections,
                                                          "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
