"""Validation Kendall tau of GST vs the pruned mode on a synthetic preset, several seeds each, in one run.

    .venv/bin/python -m benchmarks.bench_gst_accuracy [--preset synthetic] [--seeds 0 1 2]
        [--collections layout-xla-default layout-nlp-default]

Synthesizes the preset's chosen collections into a temp folder, prunes each twice (prune.hops from conf for the
pruned mode, prune.hops=all for GST), then runs stage gnn (`python -m pipeline.gnn`, a fresh process
each) for every collection, seed and mode:
- pruned: the default gnn config (instance norm) on the pruned graphs;
- pruned, layer norm: the same with gnn.norm=layer (GST's normalisation), to separate the two effects;
- GST: gnn=gst on the whole graphs.
Reports the valid and test collection scores per run, mean and standard deviation per mode, and the stage's wall
time; writes benchmarks/results/gst_accuracy.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from pipeline.errors import run_main  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "gst_accuracy.md"
MODES = {"pruned": ("hops", []), "pruned, layer norm": ("hops", ["gnn.norm=layer"]), "GST": ("all", ["gnn=gst"])}


def run(cmd: list[str]) -> float:
    """Run a pipeline command in a fresh process; returns its wall seconds."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", WANDB_MODE="disabled", PYTHONPATH=str(REPO))
    tic = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - tic


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="programs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--collections", nargs="+", default=["layout-xla-default", "layout-nlp-default"])
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench_gst_accuracy_"))
    data = [f"data={args.preset}", f"paths.synthetic_dir={work / 'syn'}"]
    py = [sys.executable, "-m"]
    rows = []
    try:
        run([*py, "pipeline.synthesize", *data, f"data.collections=[{','.join(args.collections)}]"])
        for collection in args.collections:
            for hops, folder in (("all", "all"), (None, "hops")):
                run([*py, "pipeline.prune", "--collection", collection, *data, f"paths.pruned_dir={work / folder}",
                     f"paths.metrics_dir={work / 'metrics_prune'}", *([f"prune.hops={hops}"] if hops else [])])
            for mode, (folder, extra) in MODES.items():
                for seed in args.seeds:
                    out = work / "runs" / f"{mode}-{seed}".replace(" ", "_").replace(",", "")
                    seconds = run([*py, "pipeline.gnn", "--collection", collection, *data, f"seed={seed}",
                                   f"paths.pruned_dir={work / folder}", f"paths.models_dir={out / 'models'}",
                                   f"paths.predictions_dir={out / 'predictions'}", f"paths.metrics_dir={out / 'metrics'}",
                                   f"paths.plots_dir={out / 'plots'}", "wandb.mode=disabled", *extra])
                    metrics = json.loads((out / "metrics" / "gnn" / f"{collection}.json").read_text())
                    rows.append({"collection": collection, "mode": mode, "seed": seed, "seconds": seconds,
                                 "valid": metrics["valid"]["score"], "test": metrics["test"]["score"]})
                    print(rows[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [f"GST vs pruned (`benchmarks/bench_gst_accuracy.py`): stage gnn on the `{args.preset}` preset, "
             f"seeds {args.seeds}; collection scores (Kendall tau) on valid and test, mean ± population std over the "
             "seeds; seconds = stage wall time (2 CPU threads).", "",
             "| collection | mode | valid (mean ± std) | test (mean ± std) | seconds (mean) | valid per seed |",
             "|---|---|---|---|---|---|"]
    for collection in args.collections:
        for mode in MODES:
            r = [x for x in rows if x["collection"] == collection and x["mode"] == mode]
            v, t = np.array([x["valid"] for x in r]), np.array([x["test"] for x in r])
            lines.append(f"| {collection} | {mode} | {v.mean():.4f} ± {v.std():.4f} | {t.mean():.4f} ± {t.std():.4f} | "
                         f"{np.mean([x['seconds'] for x in r]):.1f} | {', '.join(f'{x:.4f}' for x in v)} |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    run_main(main)
