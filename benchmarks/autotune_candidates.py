"""Autotune benchmark: how much of the oracle's gain a user keeps by timing the k best layout candidates.

    .venv/bin/python -m benchmarks.autotune_candidates [--ks 1 5 10 20] [overrides...]

On every built-in test program of the preset and layout collection of its source, the search of stage autotune
(`pipeline.tuning.verify.verify_program`: its guide, guarded space, rule, seed and budget, so the same candidates)
records every candidate it scores. Two lists of k candidates are then timed by the noise-free layout cost model
with the compiler default, and the fastest is kept, as a user with the hardware at hand would: the k best by the
search's own ranking (`Guard.ranked`: the calibrated prediction plus the margin at the candidate's distance) and the
k best by the calibrated prediction alone, both among the candidates inside the guard's region (a finite rank).
Prints the mean share of the oracle's gain over the rows whose oracle gains >= 1%, beside the stage's guarded pick
(which must equal `metrics/autotune.json`'s row for the same models and seed), and each row; writes
benchmarks/results/autotune_candidates.md and .json.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from pipeline.config import load_cfg, split_overrides
from pipeline.seeds import graph_rng
from pipeline.settings.sections import layout_cost
from pipeline.tpugraphs.dataset import Collection
from pipeline.tuning.chain import guarded_pick
from pipeline.tuning.program import template_graph
from pipeline.tuning.report import share_of_gain
from pipeline.tuning.scorers import load_guide
from pipeline.tuning.search import changed_blocks
from pipeline.tuning.verify import AutotuneSettings, builtin_case, builtin_test_programs

RESULTS = Path(__file__).parent / "results" / "autotune_candidates"
ORDERS = ("ranked", "predicted")          # the search's own ranking; the calibrated prediction alone


def recording(scorer, seen: dict):
    """`scorer`, keeping every scored row: encoded bytes -> (node_config_feat [NC, 18], score)."""
    def score(feat: np.ndarray) -> np.ndarray:
        out = np.asarray(scorer(feat), dtype=np.float64)
        for row, value in zip(feat, out):
            seen[row.tobytes()] = (row, float(value))
        return out
    return score


def row_of(cfg, s: AutotuneSettings, case, c: Collection, guide, work: Path, ks: list[int]) -> dict:
    """One program x collection: the stage's guarded pick and the best of each k-list, timed, as shares."""
    program = case.program
    template = template_graph(cfg, program, c, work)
    rule = guide.rule.for_program(len(template.node_opcode), s.guard.small_program_scale)
    space = case.space.only_kinds(rule.measured_blocks).freeze_beside(s.guard.beside_unmeasured)
    seen: dict = {}
    found = guarded_pick(space, recording(guide.scorer(template), seen), s.search, s.stage_budget,
                         graph_rng(s.seed, "autotune", c.slug, program.name), rule, s.guard.chain,
                         s.guard.step_budget)
    t_default = case.truth.default_ns
    t_pick = float(case.truth.runtime_ns(space.encode(found.candidate[None]))[0])
    feats = np.stack([f for f, _ in seen.values()])                           # [scored, NC, 18]
    scores = np.array([v for _, v in seen.values()])
    changed = np.array([changed_blocks(candidate) for candidate in space.decode(feats)])
    ranks = {"ranked": np.array([rule.ranked(x, int(n)) for x, n in zip(scores, changed)]),
             "predicted": np.array([rule.calibrated(x, int(n)) for x, n in zip(scores, changed)])}
    inside = np.isfinite(ranks["ranked"]) & (changed > 0)
    listed = np.flatnonzero(inside)
    runtimes = np.asarray(case.truth.runtime_ns(feats[listed]), dtype=np.float64) if len(listed) else np.zeros(0)
    row = {"program": program.name, "collection": c.name, "scored": len(scores), "inside": int(inside.sum()),
           "t_default_ns": t_default, "t_oracle_ns": case.oracle_ns, "kept": bool(found.kept),
           "share_pick": share_of_gain(t_default, t_pick, case.oracle_ns)}
    for order in ORDERS:
        by_rank = np.argsort(ranks[order][listed], kind="stable")               # positions in `listed`, best first
        for k in ks:
            best = min([t_default, *runtimes[by_rank[:k]]])
            row[f"share_{order}_{k}"] = share_of_gain(t_default, best, case.oracle_ns)
    return row


def measure(cfg, s: AutotuneSettings, ks: list[int]) -> list[dict]:
    params = layout_cost(cfg.synthesize.layout_cost)
    collections = [c for c in (Collection.parse(x) for x in cfg.data.collections) if c.kind == "layout"]
    guides = {c.slug: load_guide(cfg, s.model, c) for c in collections}           # each loaded once
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-candidates-") as work:
        for zoo_program in builtin_test_programs(cfg):
            case = builtin_case(zoo_program, params, s)
            for c in (c for c in collections if c.source == zoo_program.source):
                rows.append(row_of(cfg, s, case, c, guides[c.slug], Path(work), ks))
                print(f"{case.program.name[:36]:36s} {c.name:20s} pick {rows[-1]['share_pick']} "
                      f"| ranked k={ks[-1]} {rows[-1][f'share_ranked_{ks[-1]}']} "
                      f"| predicted k={ks[-1]} {rows[-1][f'share_predicted_{ks[-1]}']}", flush=True)
    return rows


def mean_share(rows: list[dict], key: str) -> float:
    return float(np.mean([r[key] for r in rows if r[key] is not None]))


def table(rows: list[dict], ks: list[int]) -> str:
    counted = [r for r in rows if r["share_pick"] is not None]
    head = "| timed (with the default) | " + " | ".join(f"k = {k}" for k in ks) + " |"
    lines = [f"Mean share of the oracle's gain over {len(counted)} rows (the stage's guarded pick: "
             f"{mean_share(rows, 'share_pick'):.4f}, {sum(r['kept'] for r in rows)} of {len(rows)} kept)", "",
             head, "|---|" + "---:|" * len(ks)]
    for order, label in zip(ORDERS, ("by the search's ranking", "by the prediction alone")):
        lines.append(f"| {label} | " + " | ".join(f"{mean_share(rows, f'share_{order}_{k}'):.4f}" for k in ks) + " |")
    lines += ["", "| program | collection | scored / inside the region | pick | "
              + " | ".join(f"{o} k={k}" for o in ORDERS for k in (ks[0], ks[-1])) + " |",
              "|---|---|---|---:|" + "---:|" * (2 * len(ORDERS))]
    fmt = lambda x: "-" if x is None else f"{x:.4f}"                                       # noqa: E731
    for r in rows:
        lines.append(f"| {r['program']} | {r['collection']} | {r['scored']} / {r['inside']} | {fmt(r['share_pick'])} | "
                     + " | ".join(fmt(r[f"share_{o}_{k}"]) for o in ORDERS for k in (ks[0], ks[-1])) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    overrides, rest = split_overrides(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 5, 10, 20])
    args = parser.parse_args(rest)
    ks = sorted(set(args.ks))
    cfg = load_cfg(overrides)
    s = AutotuneSettings.from_cfg(cfg.autotune)
    rows = measure(cfg, s, ks)
    text = (f"# Autotune: the best of the k best layout candidates, timed (data={cfg.data.name}, "
            f"autotune.seed={s.seed})\n\n`python -m benchmarks.autotune_candidates "
            f"{' '.join(map(str, [*rest, *overrides]))}`\n\n{table(rows, ks)}")
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.with_suffix(".md").write_text(text)
    RESULTS.with_suffix(".json").write_text(json.dumps({"ks": ks, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
