"""Autotune benchmark: share of the oracle's gain against the search budget, per guide and search algorithm.

    .venv/bin/python -m benchmarks.autotune_budget [--budgets 100 1000 10000] [--seeds 0 1 2]
        [--guides truth ensemble gnn lgbm] [--algorithms evolution random] [overrides...]

On every built-in test program of the preset and layout collection of its source (as stage autotune runs them,
`pipeline.tuning.verify`): the search with each guide (`truth`: the cost model itself, what the search reaches
when the objective is right; the trained `ensemble` / `gnn` / `lgbm` of the current data=), each algorithm, budget
and seed, the pick guarded as the tool guards it (truth: margin 0) and timed by the cost model against the oracle.
Prints, per guide x algorithm x budget, the mean over seeds (± std over seeds) of the mean share over the programs
whose oracle gains >= 1%, the lowest share of any program and seed, the same two of the unguarded picks (what
the guard prevents), the picks slower than the compiler default, evaluations/s, search seconds and the mean
|predicted - verified| log runtime ratio of kept picks; writes benchmarks/results/autotune.md.
"""
from __future__ import annotations

import argparse
import sys
import dataclasses
import tempfile
from pathlib import Path

import numpy as np

from pipeline.config import load_cfg, split_overrides
from pipeline.settings.sections import layout_cost
from pipeline.tpugraphs.dataset import Collection
from pipeline.tuning.program import template_graph
from pipeline.tuning.report import share_of_gain
from pipeline.tuning.scorers import load_guide
from pipeline.tuning.search import Guard, guard, run_search
from pipeline.tuning.verify import AutotuneSettings, builtin_case, builtin_test_programs

RESULTS = Path(__file__).parent / "results" / "autotune.md"
TRUTH = "truth"


def cases(cfg, s: AutotuneSettings, guides: list[str], work: Path):
    """Yield (program name, collection, space, truth scorer, oracle ns, {guide: (scorer, guard rule)})."""
    params = layout_cost(cfg.synthesize.layout_cost)
    collections = [c for c in (Collection.parse(x) for x in cfg.data.collections) if c.kind == "layout"]
    models = [g for g in guides if g != TRUTH]
    loaded = {(c.slug, m): load_guide(cfg, m, c)
              for c in collections for m in models}
    for zoo_program in builtin_test_programs(cfg):
        case = builtin_case(zoo_program, params, s)
        program, space, truth, oracle_ns = case.program, case.space, case.truth, case.oracle_ns
        for i, c in enumerate(c for c in collections if c.source == zoo_program.source):
            template = template_graph(cfg, program, c, work) if models else None
            scorers = {m: (loaded[c.slug, m].scorer(template), loaded[c.slug, m].rule) for m in models}
            if TRUTH in guides and i == 0:                # the cost model is the same for every collection
                scorers[TRUTH] = (truth, Guard(0.0))
            yield program.name, c, space, truth, oracle_ns, scorers


def measure(cfg, s: AutotuneSettings, budgets, seeds, guides, algorithms) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-autotune-") as work:
        for name, c, space, truth, oracle_ns, scorers in cases(cfg, s, guides, Path(work)):
            for (guide, (scorer, rule)), algorithm, budget, seed in (
                    (g, a, b, sd) for g in scorers.items() for a in algorithms for b in budgets for sd in seeds):
                settings = dataclasses.replace(s.search, time_limit_s=float("inf"))
                result = run_search(space, scorer, settings, budget, np.random.default_rng([seed, budget]),
                                    algorithm=algorithm, rule=rule)
                pick, predicted, kept = guard(result, space.default()[0], rule)
                t_pick, t_raw = truth.runtime_ns(space.encode(np.stack([pick, result.candidate])))
                rows.append({"program": name, "collection": c.name, "guide": guide, "algorithm": algorithm,
                             "budget": budget, "seed": seed, "share": share_of_gain(truth.default_ns, t_pick, oracle_ns),
                             "unguarded": share_of_gain(truth.default_ns, t_raw, oracle_ns),
                             "seconds": result.seconds, "evaluations": result.evaluations, "kept": kept,
                             "slower": bool(t_pick > truth.default_ns),
                             "gap": abs(predicted - np.log(t_pick / truth.default_ns)) if kept else None})
                print(f"{name[:32]:32s} {c.name:20s} {guide:9s} {algorithm:10s} {budget:6d} seed {seed}: "
                      f"share {rows[-1]['share']} ({result.seconds:.1f} s)", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| guide | algorithm | budget | mean share (± std over seeds) | lowest share | unguarded pick: mean, lowest "
             "share | picks slower than the default | evaluations/s | search s (mean) | kept picks | "
             "mean pred.-verified gap |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["guide"], r["algorithm"], r["budget"]) for r in rows})
    for guide, algorithm, budget in keys:
        mine = [r for r in rows if (r["guide"], r["algorithm"], r["budget"]) == (guide, algorithm, budget)]
        counted = [r for r in mine if r["share"] is not None]
        per_seed = [np.mean([r["share"] for r in counted if r["seed"] == sd]) for sd in sorted({r["seed"] for r in counted})]
        gaps = [r["gap"] for r in mine if r["gap"] is not None]
        rate = sum(r["evaluations"] for r in mine) / max(sum(r["seconds"] for r in mine), 1e-9)
        lines.append(f"| {guide} | {algorithm} | {budget} | {np.mean(per_seed):.3f} ± {np.std(per_seed):.3f} | "
                     f"{min(r['share'] for r in counted):.3f} | {np.mean([r['unguarded'] for r in counted]):.3f}, "
                     f"{min(r['unguarded'] for r in counted):.3f} | "
                     f"{sum(r['slower'] for r in mine)}/{len(mine)} | {rate:.0f} | "
                     f"{np.mean([r['seconds'] for r in mine]):.2f} | {sum(r['kept'] for r in mine)}/{len(mine)} | "
                     f"{np.mean(gaps) if gaps else float('nan'):.3f} |")
    small = sorted({r["program"] for r in rows if r["share"] is None})
    return "\n".join(lines) + f"\n\nPrograms where the oracle gains < 1% (not averaged): {', '.join(small) or 'none'}\n"


def main() -> None:
    overrides, rest = split_overrides(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--guides", nargs="+", default=[TRUTH, "ensemble", "gnn", "lgbm"])
    parser.add_argument("--algorithms", nargs="+", default=["evolution", "random"])
    args = parser.parse_args(rest)
    cfg = load_cfg(overrides)
    s = AutotuneSettings.from_cfg(cfg.autotune)
    rows = measure(cfg, s, args.budgets, args.seeds, args.guides, args.algorithms)
    text = (f"# Autotune: share of the oracle's gain by budget (data={cfg.data.name})\n\n"
            f"`python -m benchmarks.autotune_budget {' '.join(map(str, [*rest, *overrides]))}`\n\n{table(rows)}")
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
