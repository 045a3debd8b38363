"""Train on what the search visits (issue 26): does a layout model trained also on the configurations its own search
visits guide the search better?

    python benchmarks/search_visits.py [--seeds 3] [--collection layout-xla-random] [--budget 1000] [--top 100]
        [--extra 50] [--tag search_visits] [--keep] [overrides, default data=programs]

Protocol (a built-in preset only: the visited configurations are timed by the project's cost model).
1. `base`: synthesize the preset's `source` layout collections into the run's folder, prune `--collection`, train its
   GNN for seeds 0..N-1 (stages in fresh processes, as `bench_quality.py` runs them).
2. Visits: with base seed 0's GNN and its guard, search every train program of the collection twice from the
   compiler default at `--budget` evaluations (once as the tool searches, ranked by the guard, once without the
   guard, both over the kinds of block the valid split measured); of each search's scored candidates keep the `--top`
   predicted fastest and `--extra` drawn from the rest, time them with the layout cost model times the dataset's
   measurement noise, and append them to the program's train file (a copy of the data: `aug`).
3. `aug`: prune and train on that copy, seeds 0..N-1.
4. Per variant and seed, on the collection's built-in test programs: the GNN's Kaggle score (valid, test), the
   stage's guarded pick (the share of the oracle's gain, `autotune.stage_budget`) and the unguarded pick of a search
   at 100 and at 1000 evaluations (over the measured kinds, no guard), each timed by the cost model against the
   default and the oracle. The guard is the GNN's alone (`measure_guard(models=["gnn"])`).

Writes `benchmarks/results/search_visits.md` and `.json` (mean ± sample std over seeds, Δ paired by seed).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_quality import mean_std, out_paths, run_stage  # noqa: E402
from pipeline.config import compose  # noqa: E402
from pipeline.costmodel.noise import measure  # noqa: E402
from pipeline.errors import run_main  # noqa: E402
from pipeline.seeds import graph_rng  # noqa: E402
from pipeline.settings.programs import program_settings  # noqa: E402
from pipeline.settings.sections import layout_cost, search_params  # noqa: E402
from pipeline.synth.programs import layout_programs  # noqa: E402
from pipeline.tpugraphs.dataset import Collection  # noqa: E402
from pipeline.tuning.oracle import CostModelScorer  # noqa: E402
from pipeline.tuning.program import Program, template_graph  # noqa: E402
from pipeline.tuning.report import share_of_gain  # noqa: E402
from pipeline.tuning.scorers import guide_of, measure_guard  # noqa: E402
from pipeline.tuning.search import run_search  # noqa: E402
from pipeline.tuning.space import LayoutSpace  # noqa: E402
from pipeline.tuning.verify import (AutotuneSettings, builtin_case, builtin_program,  # noqa: E402
                                    builtin_test_programs, verify_program)

RESULTS = Path(__file__).parent / "results"
FREE_BUDGETS = (100, 1000)          # evaluations of the unguarded searches reported beside the guarded pick
VARIANTS = ("base", "aug")
NPZ = "npz"                         # the official layout's folder under a synthesized root


def gnn_guide(cfg, collection: Collection, s: AutotuneSettings):
    """The GNN's guide of `collection`, its guard measured on the valid split as stage autotune measures it."""
    table, members = measure_guard(cfg, collection, s.calibration_configs, s.search.batch, s.seed, s.guard,
                                   models=["gnn"])
    return guide_of(table, "gnn", collection, members, s.guard.by_distance)


def visited(space: LayoutSpace, scorer, s: AutotuneSettings, rule, budget: int, top: int, extra: int,
            rng: np.random.Generator) -> np.ndarray:
    """int16 [V, NC, 3]: of one search's scored candidates, the `top` predicted fastest and `extra` of the rest."""
    predicted: dict[bytes, float] = {}
    run_search(space, scorer, s.search, budget, rng, rule=rule, predicted=predicted)
    keys = list(predicted)
    scores = np.array([predicted[k] for k in keys])
    order = np.argsort(scores, kind="stable")
    rest = order[top:]
    chosen = np.concatenate([order[:top], rng.choice(rest, size=min(extra, len(rest)), replace=False)])
    return np.stack([np.frombuffer(keys[i], dtype=np.int16).reshape(space.n_nodes, 3) for i in chosen])


def augment(cfg, collection: Collection, root: Path, work: Path, args) -> list[dict]:
    """Append the visited configurations of every train program of `collection` to its file under `root`."""
    s = AutotuneSettings.from_cfg(cfg.autotune)
    guide = gnn_guide(cfg, collection, s)
    params = layout_cost(cfg.synthesize.layout_cost)
    zoo = [p for p in layout_programs(program_settings(cfg.data.generator, cfg.synthesize))
           if p.split == "train" and p.source == collection.source]
    report = []
    for zoo_program in zoo:
        path = root / NPZ / collection.subdir / "train" / f"{zoo_program.name}.npz"
        with np.load(path) as npz:
            arrays = dict(npz)
        built = builtin_program(zoo_program, params)
        layout = dataclasses.replace(built.layout, config_node_ids=arrays["node_config_ids"])   # the file's nodes
        program = Program(built.name, layout, arrays["node_feat"], ())
        space = LayoutSpace.of(layout.graph, layout.config_node_ids, program.name)
        scorer = guide.scorer(template_graph(cfg, program, collection, work))
        rng = graph_rng(s.seed, "search-visits", collection.slug, program.name)
        searched = space.only_kinds(guide.rule.measured_blocks)
        found = np.concatenate([visited(searched, scorer, s, rule, args.budget, args.top, args.extra, rng)
                                for rule in (guide.rule, None)])                     # [V, NC, 3]
        found = np.unique(found.reshape(len(found), -1), axis=0).reshape(-1, space.n_nodes, 3)
        feat = space.encode(found).astype(np.float32)                                  # [V, NC, 18]
        truth = CostModelScorer(space, params)
        clean = truth.runtime_ns(feat)
        arrays["node_config_feat"] = np.concatenate([arrays["node_config_feat"], feat])
        arrays["config_runtime"] = np.concatenate(
            [arrays["config_runtime"], np.rint(measure(clean, cfg.synthesize.noise, rng)).astype(np.int64)])
        np.savez(path, **arrays)
        ratio = clean / truth.default_ns
        report.append({"program": program.name, "added": len(found), "configs": len(arrays["config_runtime"]),
                       "faster_share": float(np.mean(ratio < 1)), "median_ratio": float(np.median(ratio))})
    return report


def evaluate(cfg, collection: Collection, work: Path) -> list[dict]:
    """Per test program of `collection`'s source: the guarded pick's and the unguarded searches' verified ratios."""
    s = AutotuneSettings.from_cfg(cfg.autotune)
    guide = gnn_guide(cfg, collection, s)
    params = layout_cost(cfg.synthesize.layout_cost)
    rows = []
    for zoo_program in [p for p in builtin_test_programs(cfg) if p.source == collection.source]:
        case = builtin_case(zoo_program, params, s)
        program, space, truth, oracle_ns = case.program, case.space, case.truth, case.oracle_ns
        template = template_graph(cfg, program, collection, work)
        row, _ = verify_program(program, space, truth, oracle_ns, collection, guide, template, s,
                                search_params(cfg.featurize.search))
        out = {"program": program.name, "oracle_ratio": oracle_ns / truth.default_ns,
               "guarded": {"verified_ratio": row["verified_ratio"], "share": row["share"],
                           "changed_blocks": row["changed_blocks"]}}
        scorer, searched = guide.scorer(template), space.only_kinds(guide.rule.measured_blocks)
        for budget in FREE_BUDGETS:
            found = run_search(searched, scorer, s.search, budget, graph_rng(s.seed, "free", program.name))
            t = float(truth.runtime_ns(space.encode(found.candidate[None]))[0])
            out[f"free{budget}"] = {"predicted_ratio": float(np.exp(found.score)),
                                    "verified_ratio": t / truth.default_ns,
                                    "share": share_of_gain(truth.default_ns, t, oracle_ns),
                                    "changed_blocks": int(np.count_nonzero(found.candidate))}
        rows.append(out)
    return rows


PICKS = ("guarded", *(f"free{b}" for b in FREE_BUDGETS))


def summarize(runs: dict, seeds: list[int]) -> list[dict]:
    """Per variant: Kaggle valid/test and each pick's mean share over the programs, mean ± std over seeds, Δ paired."""
    def value(variant: str, seed: int, key: str) -> float:
        run = runs[variant][seed]
        if key in ("valid", "test"):
            return run["kaggle"][key]
        shares = [r[key]["share"] for r in run["rows"] if r[key]["share"] is not None]
        return float(np.mean(shares))

    table = []
    for variant in VARIANTS:
        row = {"variant": variant}
        for key in ("valid", "test", *PICKS):
            row[key] = mean_std([value(variant, k, key) for k in seeds])
            if variant != VARIANTS[0]:
                row[f"{key}_delta"] = mean_std([value(variant, k, key) - value(VARIANTS[0], k, key) for k in seeds])
        row["slower"] = {pick: sum(r[pick]["verified_ratio"] > 1 for k in seeds for r in runs[variant][k]["rows"])
                         for pick in PICKS}
        table.append(row)
    return table


def to_markdown(table: list[dict], header: str) -> str:
    cell = lambda pair, sign="": f"{pair[0]:{sign}.4f} ± {pair[1]:.4f}"       # noqa: E731
    lines = [header, "", "| variant | valid | test | " + " | ".join(f"share: {p}" for p in PICKS) + " | slower picks |",
             "|---|---|---|" + "---|" * len(PICKS) + "---|"]
    for row in table:
        lines.append(f"| {row['variant']} | " + " | ".join(cell(row[k]) for k in ("valid", "test", *PICKS)) +
                     " | " + ", ".join(f"{p} {n}" for p, n in row["slower"].items()) + " |")
        if f"{PICKS[0]}_delta" in row:
            lines.append("| Δ (paired) | " + " | ".join(cell(row[f"{k}_delta"], "+") for k in ("valid", "test", *PICKS))
                         + " | |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--tag", default="search_visits")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--collection", default="layout-xla-random")
    parser.add_argument("--budget", type=int, default=1000, help="evaluations of each search on a train program")
    parser.add_argument("--top", type=int, default=100, help="the predicted fastest kept of each search")
    parser.add_argument("--extra", type=int, default=50, help="more of each search's candidates, drawn at random")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (data, models)")
    args, common = parser.parse_known_args(argv)
    if args.seeds < 1 or min(args.budget, args.top) < 1 or args.extra < 0:
        raise SystemExit("error: --seeds, --budget and --top must be >= 1, --extra >= 0")
    collection = Collection.parse(args.collection)
    if collection.kind != "layout":
        raise SystemExit(f"error: --collection {args.collection}: expected a layout collection")
    common = common or ["data=programs"]
    work = RESULTS / args.tag
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = work / "log.txt"
    siblings = [c for c in compose(common).data.collections if Collection.parse(c).source == collection.source]
    data = {variant: work / variant / "data" for variant in VARIANTS}
    base_common = [*common, f"data.collections=[{','.join(siblings)}]", "wandb.mode=disabled"]
    run_stage("synthesize", [*base_common, f"paths.synthetic_dir={data['base']}"], log)
    seeds = list(range(args.seeds))
    runs: dict = {variant: {} for variant in VARIANTS}
    report = []
    for variant in VARIANTS:
        paths = [*base_common, f"paths.synthetic_dir={data[variant]}", f"paths.pruned_dir={work / variant / 'pruned'}"]
        if variant == "aug":
            shutil.copytree(data["base"], data["aug"])
            guide_cfg = compose([*base_common, f"paths.synthetic_dir={data['base']}",    # base seed 0 as the guide
                                 f"paths.pruned_dir={work / 'base' / 'pruned'}", *out_paths(work / "base" / "seed0")])
            report = augment(guide_cfg, collection, data["aug"], work, args)
            print(f"visits: {sum(r['added'] for r in report)} configurations added to {len(report)} train graphs",
                  flush=True)
        run_stage("prune", ["--collection", collection.slug, *paths, *out_paths(work / variant / "shared")], log)
        for seed in seeds:
            folder = work / variant / f"seed{seed}"
            run_stage("gnn", ["--collection", collection.slug, *paths, f"seed={seed}", *out_paths(folder)], log)
            metrics = json.loads((folder / "metrics" / "gnn" / f"{collection.slug}.json").read_text())
            cfg = compose([*paths, *out_paths(folder)])
            runs[variant][seed] = {"kaggle": {split: metrics[split]["score"] for split in ("valid", "test")},
                                   "best_epoch": metrics.get("best_epoch"), "rows": evaluate(cfg, collection, work)}
            print(f"{variant} seed {seed}: {json.dumps(runs[variant][seed]['kaggle'])}", flush=True)
    table = summarize(runs, seeds)
    header = (f"# search_visits `{args.tag}`: {collection.name}, {len(seeds)} GNN seeds, `{' '.join(common)}`, "
              f"searches of {args.budget} evaluations on each train program, top {args.top} + {args.extra} kept "
              f"per search\n\nShares: the mean over the collection's built-in test programs of the share of the "
              f"oracle's gain; mean ± sample std over seeds; Δ paired by seed. Slower picks: over every seed.")
    text = to_markdown(table, header)
    (RESULTS / f"{args.tag}.md").write_text(text)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({"args": vars(args), "common": common, "table": table,
                                                          "visits": report, "runs": runs}, indent=1))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(text)
    return table


if __name__ == "__main__":
    run_main(main)
