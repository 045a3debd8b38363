"""Model quality over several seeds, for every variant of the settings, side by side in one run (issue #13).

    python benchmarks/bench_quality.py [--tag NAME] [--seeds 3] [--first-seed 0] [--models lgbm gnn ensemble]
        [--collections tile-xla layout-xla-random ...] [--variant NAME=OVERRIDES ...] [COMMON OVERRIDES ...]

    # hops 1 vs 2 on the development preset (programs_large), 3 seeds, both model stages and the blend:
    python benchmarks/bench_quality.py --tag hops --variant base= --variant 'hops2=prune.hops=2'
    # the same on the quick default preset, or on real data:
    python benchmarks/bench_quality.py --tag hops --variant base= --variant 'hops2=prune.hops=2' data=programs

Data. Without a `data=` override the benchmark runs on `data=programs_large` (DEV_PRESET: 10 test graphs per layout
collection, where the default preset's 3-4 cannot tell settings apart), whatever preset the pipeline has selected.

Protocol. The dataset is made once per run (`synthesize` into the run's folder when the preset is built in;
`data=tpugraphs` is read where its root says). Each variant (overrides separated by spaces, on top of the common
ones) is pruned once (pruning draws no random numbers), the heuristic runs once, then every model stage runs for
seeds 0..N-1 (`seed=<k>`, each stage a fresh process) into `<results>/quality/<tag>/<variant>/seed<k>/`. Every figure
comes from the stages' own metrics files: valid and test Kaggle score, the dataset ceiling and the stage seconds.

Output (printed and written to `<results>/quality/<tag>.md` and `.json`): per variant, model and collection, the mean
± std over seeds (sample std, ddof=1) of valid and test, the ceiling, the seconds, the mean best epoch or iteration
where the stage reports one, and the difference to the first variant paired by seed (mean ± std). An `overall` row
per variant and model averages the collections within each seed first, so its spread is the spread of that mean.
Variants cannot change the data (`data.*`, `synthesize.*`): compare datasets in separate runs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pipeline.errors import run_main  # noqa: E402
from pipeline.config import MODEL_OUTPUT_PATHS, compose  # noqa: E402
from pipeline.timings import timings_file  # noqa: E402
from pipeline.tpugraphs.schema import PREDICTED_SPLITS  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "quality"
MODEL_STAGES = ("lgbm", "gnn", "ensemble")
DATA_PREFIXES = ("data.", "data=", "synthesize.", "synthesize=", "paths.synthetic_dir")
EPOCH_KEYS = ("best_epoch", "best_iteration")        # the stage's selected epoch / boosting round, when reported
OVERALL = "overall"
DEV_PRESET = "programs_large"                       # the data when no `data=` override is given (conf/data/)


@dataclass(frozen=True)
class Variant:
    """One column of the comparison: a name and the overrides it adds to the common ones."""
    name: str
    overrides: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> "Variant":
        """`NAME=OVERRIDE OVERRIDE ...` (the overrides may be empty: `base=`)."""
        name, sep, rest = text.partition("=")
        if not sep or not name or "/" in name:
            raise SystemExit(f"error: --variant {text!r}: expected NAME=OVERRIDES (NAME without '/'), e.g. 'hops2=prune.hops=2'")
        overrides = tuple(rest.split())
        for override in overrides:
            if override.lstrip("+~").startswith(DATA_PREFIXES):
                raise SystemExit(f"error: --variant {name}: {override!r} changes the data; compare datasets in "
                                 f"separate runs (a common override applies to every variant)")
        return cls(name, overrides)


def with_dev_data(common: Sequence[str]) -> list[str]:
    """The common overrides, led by `data=DEV_PRESET` unless they choose the data themselves (`data=...`)."""
    if any(override.startswith("data=") for override in common):
        return list(common)
    return [f"data={DEV_PRESET}", *common]


def run_stage(module: str, args: Sequence[str], log: Path) -> float:
    """Run `python -m pipeline.<module> ARGS` in a fresh process (log appended to `log`); returns its wall seconds."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", WANDB_MODE="disabled", PYTHONPATH=str(REPO))
    tic = time.perf_counter()
    with log.open("a") as out:
        out.write(f"$ python -m pipeline.{module} {' '.join(args)}\n")
        out.flush()
        done = subprocess.run([sys.executable, "-m", f"pipeline.{module}", *args], cwd=REPO, env=env,
                              stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = log.read_text().splitlines()[-15:]
        raise SystemExit(f"error: pipeline.{module} {' '.join(args)} failed (exit {done.returncode}); "
                         f"log {log}:\n" + "\n".join(tail))
    return time.perf_counter() - tic


def out_paths(folder: Path) -> list[str]:
    """Overrides that send every stage output under `folder`."""
    return [f"paths.{key}={folder / key.removesuffix('_dir')}" for key in MODEL_OUTPUT_PATHS]


def read_result(metrics_dir: Path, stage: str, slug: str, wall: float, plots_dir: Path | None = None) -> dict:
    """The figures of one stage run, from its metrics file and its timings file (pipeline/timings.py), plus the
    worst test graph's score (`test_worst`) from its per-graph plot (`<plots_dir>/<stage>/<slug>_per_graph.csv`)."""
    metrics = json.loads((metrics_dir / stage / f"{slug}.json").read_text())
    timings = timings_file(metrics_dir, stage, slug)
    seconds = json.loads(timings.read_text())["seconds"] if timings.is_file() else round(wall, 2)
    row = {"wall_seconds": round(wall, 2), "seconds": seconds}
    for split in PREDICTED_SPLITS:
        if split in metrics:
            row[split] = metrics[split]["score"]
            row[f"{split}_ceiling"] = metrics.get("ceiling", {}).get(split)
    for key in EPOCH_KEYS:
        if key in metrics:
            row["best_epoch"] = metrics[key]
    if "stopped" in metrics:
        row["stopped"] = metrics["stopped"]
    per_graph = None if plots_dir is None else plots_dir / stage / f"{slug}_per_graph.csv"
    if per_graph is not None and per_graph.is_file():
        import pandas as pd
        scores = pd.read_csv(per_graph)
        test = scores.loc[scores["split"] == "test", "score"]
        if len(test):
            row["test_worst"] = float(test.min())
    return row


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value); NaN-free input expected."""
    array = np.asarray(values, dtype=float)
    return float(array.mean()), float(array.std(ddof=1)) if array.size > 1 else 0.0


def aggregate(runs: dict, variants: Sequence[str], models: Sequence[str], collections: Sequence[str],
              seeds: Sequence[int]) -> list[dict]:
    """Rows of the table from `runs[variant][model][collection][seed]` (dicts from `read_result`).

    Each row: variant, model, collection (or `overall`: the mean over collections within each seed), and for each
    split present `<split>_mean`, `<split>_std`, `<split>_delta_mean`, `<split>_delta_std` (paired by seed, against
    the first variant), plus the ceiling, mean seconds, mean best epoch, how many seeds stopped at the budget and
    the worst test graph's score over the seeds (`test_worst`, per collection, when every run reports it).
    """
    base = variants[0]
    rows = []
    for variant in variants:
        for model in models:
            per_collection = runs[variant][model]
            for collection in [*collections, OVERALL]:
                row: dict = {"variant": variant, "model": model, "collection": collection}
                for split in PREDICTED_SPLITS:
                    def score(v: str, seed: int, c: str = collection) -> float | None:
                        cells = runs[v][model]
                        if c != OVERALL:
                            return cells[c][seed].get(split)
                        values = [cells[x][seed].get(split) for x in collections]
                        return None if None in values else float(np.mean(values))
                    values = [score(variant, s) for s in seeds]
                    if None in values:
                        continue
                    row[f"{split}_mean"], row[f"{split}_std"] = mean_std(values)
                    if variant != base:
                        deltas = [score(variant, s) - score(base, s) for s in seeds]
                        row[f"{split}_delta_mean"], row[f"{split}_delta_std"] = mean_std(deltas)
                    if collection != OVERALL:
                        row[f"{split}_ceiling"] = per_collection[collection][seeds[0]].get(f"{split}_ceiling")
                    else:
                        ceilings = [per_collection[c][seeds[0]].get(f"{split}_ceiling") for c in collections]
                        row[f"{split}_ceiling"] = None if None in ceilings else float(np.mean(ceilings))
                cells = [per_collection[c][s] for c in (collections if collection == OVERALL else [collection])
                         for s in seeds]
                row["seconds"] = float(np.mean([c["seconds"] for c in cells])) * (
                    len(collections) if collection == OVERALL else 1)
                epochs = [c["best_epoch"] for c in cells if "best_epoch" in c]
                if epochs and collection != OVERALL:
                    row["best_epoch"] = float(np.mean(epochs))
                worst = [c["test_worst"] for c in cells if "test_worst" in c]
                if worst and len(worst) == len(cells) and collection != OVERALL:
                    row["test_worst"] = float(min(worst))   # the worst test graph over the seeds
                stops = [c["stopped"] for c in cells if "stopped" in c]
                if stops and collection != OVERALL:
                    row["budget_stops"] = f"{stops.count('budget')}/{len(stops)}"
                rows.append(row)
    return rows


def fmt(row: dict, key: str, signed: bool = False) -> str:
    """`mean ± std` of one column, or an empty cell."""
    if f"{key}_mean" not in row:
        return ""
    sign = "+" if signed else ""
    return f"{row[f'{key}_mean']:{sign}.4f} ± {row[f'{key}_std']:.4f}"


def to_markdown(rows: list[dict], header: str) -> str:
    """The table as Markdown (one line per row)."""
    lines = [header, "",
             "| variant | model | collection | valid | test | Δ valid | Δ test | ceiling valid/test | worst test graph | "
             "seconds | best epoch | budget stops |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ceiling = "/".join("" if r.get(f"{s}_ceiling") is None else f"{r[f'{s}_ceiling']:.4f}"
                           for s in PREDICTED_SPLITS)
        name = f"**{r['collection']}**" if r["collection"] == OVERALL else r["collection"]
        epoch = f"{r['best_epoch']:.1f}" if "best_epoch" in r else ""
        worst = f"{r['test_worst']:.4f}" if "test_worst" in r else ""
        lines.append(f"| {r['variant']} | {r['model']} | {name} | {fmt(r, 'valid')} | {fmt(r, 'test')} | "
                     f"{fmt(r, 'valid_delta', True)} | {fmt(r, 'test_delta', True)} | {ceiling} | {worst} | "
                     f"{r['seconds']:.1f} | {epoch} | {r.get('budget_stops', '')} |")
    return "\n".join(lines) + "\n"


def seed_range(first: int, count: int) -> list[int]:
    """The run's seeds first..first+count-1 (--first-seed, --seeds): a later run adds seeds to an earlier one's."""
    if count < 1:
        raise SystemExit("error: --seeds must be >= 1")
    if first < 0:
        raise SystemExit("error: --first-seed must be >= 0")
    return list(range(first, first + count))


def main(argv: Sequence[str] | None = None) -> list[dict]:
    from tqdm import tqdm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--tag", default="quality", help="name of the result files and the work folder")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per variant (3 or more to decide)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="start the seeds here (K..K+N-1): more seeds for a run that already holds 0..K-1")
    parser.add_argument("--models", nargs="+", default=list(MODEL_STAGES), choices=MODEL_STAGES)
    parser.add_argument("--collections", nargs="+", default=None, help="slugs (default: the preset's)")
    parser.add_argument("--variant", action="append", default=None, help="NAME=OVERRIDES (repeat); default base=")
    parser.add_argument("--keep", action="store_true", help="keep the per-seed folders (models, predictions)")
    args, common = parser.parse_known_args(argv)
    seeds = seed_range(args.first_seed, args.seeds)
    variants = [Variant.parse(v) for v in (args.variant or ["base="])]
    if len({v.name for v in variants}) != len(variants):
        raise SystemExit("error: --variant names must be unique")
    common = with_dev_data(common)
    cfg = compose(common)
    collections = args.collections or list(cfg.data.collections)
    models = list(args.models)
    if "ensemble" in models:
        missing = [m for m in cfg.ensemble.members if m != "heuristic" and m not in models]
        if missing:
            raise SystemExit(f"error: --models ensemble blends {list(cfg.ensemble.members)}; add {missing}")

    work = RESULTS / args.tag
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = work / "log.txt"
    data = list(common)
    if str(cfg.data.kind) == "synthetic":                     # a built-in preset: made fresh, once per run
        data.append(f"paths.synthetic_dir={work / 'data'}")
        print(f"synthesizing data={cfg.data.name} into {work / 'data'} ...", flush=True)
        run_stage("synthesize", [*data, f"data.collections=[{','.join(collections)}]"], log)

    total = len(variants) * len(collections) * (2 + len(seeds) * len(models))
    runs: dict = {v.name: {m: {c: {} for c in collections} for m in models} for v in variants}
    bar = tqdm(total=total, desc="bench_quality", unit="run")
    for variant in variants:                  # every collection pruned first: a variant may read its siblings
        shared = work / variant.name / "shared"
        base = [*data, *variant.overrides, f"paths.pruned_dir={work / variant.name / 'pruned'}"]
        for slug, module in [(slug, module) for slug in collections for module in ("prune", "heuristic")]:
            bar.set_postfix_str(f"{variant.name} {module} {slug}")
            run_stage(module, ["--collection", slug, *base, *out_paths(shared)], log)
            bar.update()
        for slug, seed in [(slug, seed) for slug in collections for seed in seeds]:
            folder = work / variant.name / f"seed{seed}"
            heuristic = folder / "predictions" / "heuristic" / slug
            shutil.copytree(shared / "predictions" / "heuristic" / slug, heuristic, dirs_exist_ok=True)
            for model in models:
                bar.set_postfix_str(f"{variant.name} {model} {slug} seed {seed}")
                wall = run_stage(model, ["--collection", slug, *base, f"seed={seed}", *out_paths(folder)], log)
                runs[variant.name][model][slug][seed] = read_result(folder / "metrics", model, slug, wall,
                                                                    folder / "plots")
                bar.update()
    bar.close()

    rows = aggregate(runs, [v.name for v in variants], models, collections, seeds)
    header = (f"# bench_quality `{args.tag}`: {len(seeds)} seeds, data={cfg.data.name}, common overrides "
              f"`{' '.join(common) or '(none)'}`\n\nVariants: " +
              "; ".join(f"`{v.name}` = `{' '.join(v.overrides) or '(defaults)'}`" for v in variants) +
              f". Mean ± sample std over seeds; Δ = difference to `{variants[0].name}` paired by seed. "
              f"seconds = the stage's own time per collection (overall: summed over collections).")
    table = to_markdown(rows, header)
    (RESULTS / f"{args.tag}.md").write_text(table)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(
        {"tag": args.tag, "seeds": seeds, "common": common, "data": str(cfg.data.name),
         "variants": {v.name: list(v.overrides) for v in variants}, "rows": rows, "runs": runs}, indent=1))
    if not args.keep:
        for variant in variants:
            shutil.rmtree(work / variant.name, ignore_errors=True)
        shutil.rmtree(work / "data", ignore_errors=True)
    print(table)
    return rows


if __name__ == "__main__":
    run_main(main)
