"""Autotune: the trained cost models pick a faster layout (and tile) configuration for a program.

Tool: `python -m pipeline.autotune PROGRAM.hlo.txt [PROGRAM_OPT.hlo.txt] [--model ensemble|gnn|lgbm] [--budget N]
[--out DIR] [overrides]` featurises the program (layout graph from the unoptimised text, fused kernels from the
optimised one), searches its configuration space from the compiler default with the models of the current
`data=` as the objective (`pipeline.tuning`, settings `autotune`), keeps the default unless the pick is predicted
faster by the noise margin, writes `DIR/<program>.json` (default `autotune.out_dir`) and prints the predicted
speed-up and the changes worth most. docs/autotune.md reads the JSON.

Stage (`python -m pipeline.autotune --builtin`, DVC stage `autotune`): the guard's margin of every collection
measured on the valid split (`<models_dir>/autotune/<slug>.json`, which the tool reads; `pipeline.tuning.guard`),
then every built-in test program autotuned and verified with the cost model: `<metrics_dir>/autotune.json` (per
program and collection the default, pick and oracle runtimes, the share of the oracle's gain, two baselines; per
test kernel the tile pick; see `pipeline.tuning.verify`), its seconds in `<metrics_dir>/timings/autotune.json`.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig

from pipeline import tracking
from pipeline.config import stage_args
from pipeline.errors import run_main, shortened
from pipeline.files import INT64_MAX, given_path, write_json
from pipeline.hlo.featurize import HloParseError
from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.trained import PredictError
from pipeline.timings import TIMINGS_DIR
from pipeline.tuning.guard import guard_file
from pipeline.tuning.report import summary_lines
from pipeline.tuning.scorers import MODELS
from pipeline.tuning.space import SpaceError
from pipeline.tuning.tool import Request, autotune
from pipeline.tuning.verify import run

METRICS_NAME = "autotune.json"


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("programs", nargs="*", type=given_path,
                        help="PROGRAM.hlo.txt (unoptimised HLO text) [PROGRAM_OPT.hlo.txt (optimised)]")
    parser.add_argument("--builtin", action="store_true",
                        help="stage autotune: every built-in test program, verified (writes metrics/autotune.json)")
    parser.add_argument("--model", choices=MODELS, default=None, help="default: autotune.model")
    parser.add_argument("--budget", type=int, default=None, help="model evaluations (default: autotune.budget)")
    parser.add_argument("--collection", default=None, help="layout model's collection (default: autotune.collection)")
    parser.add_argument("--out", type=given_path, default=None, help="JSON folder (default: autotune.out_dir)")


def run_stage(cfg: DictConfig) -> dict:
    """Write the guard file of every collection (`<models_dir>/autotune/<slug>.json`, read by the tool),
    `<metrics_dir>/autotune.json` and its seconds (`<metrics_dir>/timings/autotune.json`); returns the metrics.
    The W&B run (`tracking`) gets the overall figures in its summary and one table row per program x collection."""
    with tracking.start_run(cfg, "autotune") as wandb_run:
        with tempfile.TemporaryDirectory(prefix="autotune-stage-") as work:
            done = run(cfg, Path(work))
        for slug, table in done.guards.items():
            write_json(table, guard_file(cfg.paths.models_dir, slug))
        write_json(done.timings, Path(cfg.paths.metrics_dir) / TIMINGS_DIR / METRICS_NAME)
        write_json(done.metrics, Path(cfg.paths.metrics_dir) / METRICS_NAME)
        overall = done.metrics["all"]
        wandb_run.summary.update({"share": overall["share"]["mean"], "log_share": overall["log_share"]["pick"],
                                  "guarded": overall["guarded"], "min_share": overall["min_share"]})
        if done.metrics["programs"]:
            import pandas as pd

            tracking.log_table(wandb_run, "programs", pd.json_normalize(done.metrics["programs"]))
    return done.metrics


def main(argv: Sequence[str] | None = None) -> None:
    args, cfg = stage_args(__doc__.splitlines()[0], argv, collection=False, add_flags=add_flags,
                           dvc_outputs=False)
    if args.builtin == bool(args.programs) or len(args.programs) > 2:
        raise SystemExit("error: give PROGRAM.hlo.txt [PROGRAM_OPT.hlo.txt], or --builtin for the stage")
    if args.budget is not None and not 1 <= args.budget <= INT64_MAX:    # 400 digits went into the JSON written
        raise SystemExit(f"error: --budget {shortened(args.budget)}: expected an integer >= 1 that fits in 64 bits")
    try:
        if args.builtin:
            metrics = run_stage(cfg)
            share = metrics["all"]["share"]
            print(f"autotune: mean share of the oracle's gain {share['mean']} (± {share['std']}, over "
                  f"{share['n']} program x collection rows); under 1% apart: "
                  f"{metrics['all']['small_gain_programs']}; of the oracle's summed log gain over every row "
                  f"{metrics['all']['log_share']['pick']}")
            return
        request = Request(args.programs[0], args.programs[1] if len(args.programs) > 1 else None, args.model,
                          args.budget, args.collection, args.out)
        result, path = autotune(cfg, request)
    except (PredictError, SpaceError, HloParseError, TpuGraphsFormatError, FileNotFoundError, ValueError) as error:
        raise SystemExit(f"error: {error}") from None
    print("\n".join(summary_lines(result)))
    print(f"wrote {path}")


if __name__ == "__main__":
    run_main(main)
