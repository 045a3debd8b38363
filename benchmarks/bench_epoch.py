"""Where a GNN epoch goes: optimiser steps vs the per-epoch model selection on valid, with 1 or 2 torch threads,
one member alone or two members side by side (issue 27, time budget).

    .venv/bin/python -m benchmarks.bench_epoch [--collections layout-xla-random layout-nlp-random] [--epochs 5]
        [--threads 1 2] [--parallel 2] [gnn overrides...]

Each case trains member 0 of the selected preset's pruned collection (stage prune's outputs must be there: `dvc
checkout` or `dvc repro prune`) for `--epochs` epochs in a fresh process with `gnn.num_threads` set to the case's
threads, through `pipeline.graphnet.train_loop.fit` (a throw-away checkpoint folder; no stage output is written).
`--parallel N` also runs N such processes at once with 1 thread each (members 0..N-1), as `gnn.member_workers`
does. Per case: the mean seconds per epoch, its training steps (train_seconds) and the rest (validation on up to
gnn.valid_max_configs configs per valid graph with gnn.tta orderings, plus the checkpoint), the first epoch left out
(warm-up), and each process's CPU seconds per epoch (all epochs: on a busy machine the wall clock of the side-by-side
case says little, its CPU time says whether a worker computes as fast as one alone). Writes benchmarks/results/epoch.md.
"""
from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.config import compose, split_overrides
from pipeline.errors import run_main

RESULTS = Path(__file__).parent / "results" / "epoch.md"


def profile_member(overrides: list[str], slug: str, member: int, threads: int, epochs: int) -> dict:
    """Train `member` of collection `slug` for `epochs` epochs with `threads` torch threads; per-epoch timings."""
    import torch

    from pipeline.graphnet.members import member_seed
    from pipeline.graphnet.model import build_model
    from pipeline.graphnet.train_loop import fit
    from pipeline.pruned import iter_split
    from pipeline.settings.gnn import gnn_settings
    from pipeline.tpugraphs.dataset import Collection

    cfg = compose(overrides)
    collection = Collection.parse(slug)
    settings = gnn_settings(cfg, collection)
    torch.set_num_threads(threads)
    train, valid = (list(iter_split(cfg.paths.pruned_dir, slug, split)) for split in ("train", "valid"))
    spec = settings.spec(train[0].node_feat.shape[1])
    seed = member_seed(settings.seed, member)
    torch.manual_seed(seed)
    model = build_model(spec, settings.infer_chunk_mb)
    train_with = settings.train                 # the hinge's min_gap as gnn.min_gap says (timing only)
    with tempfile.TemporaryDirectory() as tmp:
        tic, cpu = time.perf_counter(), time.process_time()
        result = fit(model, spec, train, valid, train_with, None, seed, Path(tmp) / "checkpoint.pt",
                     torch.device("cpu"), max_epochs=epochs)
        wall, cpu = time.perf_counter() - tic, time.process_time() - cpu
    rows = result.timing[1:] or result.timing                  # the first epoch warms caches up
    return {"epoch": float(np.mean([t["seconds"] for t in rows])),
            "train": float(np.mean([t["train_seconds"] for t in rows])),
            "wall": wall, "cpu": cpu / max(len(result.timing), 1), "train_graphs": len(train), "valid_graphs": len(valid),
            "valid_configs": int(sum(min(g.n_kept, train_with.valid_max_configs) for g in valid))}


def run_case(overrides: list[str], slug: str, threads: int, parallel: int, epochs: int) -> dict:
    """One case: `parallel` members trained at once (separate processes), each with `threads` threads."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(parallel) as pool:
        tic = time.perf_counter()
        parts = pool.starmap(profile_member, [(overrides, slug, m, threads, epochs) for m in range(parallel)])
        wall = time.perf_counter() - tic
    return {"collection": slug, "threads": threads, "parallel": parallel, "wall": wall,
            **{k: float(np.mean([p[k] for p in parts])) for k in ("epoch", "train", "cpu")},
            **{k: parts[0][k] for k in ("train_graphs", "valid_graphs", "valid_configs")}}


def table(cases: list[dict]) -> str:
    """Markdown: per case the epoch seconds split into training and the rest (validation + checkpoint)."""
    lines = ["| collection | processes x threads | s/epoch (per member) | train s | valid+ckpt s | valid share | "
             "CPU s/epoch | members per s/epoch |", "|---|---|---|---|---|---|---|---|"]
    for c in cases:
        rest = c["epoch"] - c["train"]
        lines.append(f"| {c['collection']} | {c['parallel']} x {c['threads']} | {c['epoch']:.2f} | {c['train']:.2f} | "
                     f"{rest:.2f} | {rest / c['epoch']:.0%} | {c['cpu']:.2f} | {c['parallel'] / c['epoch']:.2f} |")
    c = cases[0]
    lines.append(f"\n{c['collection']}: {c['train_graphs']} train graphs, {c['valid_graphs']} valid graphs "
                 f"({c['valid_configs']} valid configs scored per epoch)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collections", nargs="+", default=["layout-xla-random", "layout-nlp-random"])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--parallel", type=int, default=2, help="also N members at once, 1 thread each (0: skip)")
    args, rest = parser.parse_known_args()
    overrides, _ = split_overrides(rest)
    out = []
    for slug in args.collections:
        cases = [run_case(overrides, slug, t, 1, args.epochs) for t in args.threads]
        if args.parallel > 1:
            cases.append(run_case(overrides, slug, 1, args.parallel, args.epochs))
        text = table(cases)
        print(text, flush=True)
        out.append(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("# GNN epoch profile (benchmarks/bench_epoch.py)\n\n" + "\n\n".join(out) + "\n")


if __name__ == "__main__":
    run_main(main)
