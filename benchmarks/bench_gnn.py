"""GNN benchmark: training throughput and peak memory on a pruned vs an unpruned large layout graph, and the time to
rank 1000 configurations of a test graph with the plain forward and the chunked CPU path, measured side by side in
one run, on the wall clock (`--threads`) and on one thread's CPU time, each against the matmul rate measured the same
way.

    .venv/bin/python -m benchmarks.bench_gnn [--nodes 24000] [--configs 16] [--threads 2] [gnn overrides...]

The graph is generated here (a layered DAG shaped like a large XLA graph: every node consumes one or two recent
nodes, a few percent are configurable) so the benchmark needs no dataset; `pipeline.pruning.subgraph.khop_subgraph` prunes
it exactly as stage `prune` does (`prune.hops` from conf). Each case runs in a fresh forked process so that its
peak RSS is its own. Writes benchmarks/results/gnn.md.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from pipeline.errors import run_main  # noqa: E402
from benchmarks.common import (FEATURES, flops_per_config, matmul_gflops, peak_rss_mb, ranking_agreement, run_isolated,
                               swapped_pairs)
from pipeline.config import compose, prune_hops, split_overrides
from pipeline.graphnet.data import config_batch, graph_tensors, runtimes, sample_configs
from pipeline.graphnet.infer import predict_graph
from pipeline.graphnet.losses import ranking_loss
from pipeline.graphnet.model import build_model
from pipeline.pruned import PrunedGraph
from pipeline.settings.gnn import infer_settings, model_spec
from pipeline.pruning.subgraph import khop_subgraph
from pipeline.tpugraphs.dataset import Collection
from pipeline.tpugraphs.schema import NODE_CONFIG_FEAT_DIM, NODE_FEAT_DIM

RESULTS = Path(__file__).parent / "results" / "gnn.md"
HOPS_COLLECTION = "layout:xla:default"   # the benchmark graph is pruned as stage prune prunes this collection
CONFIGURABLE_SHARE = 0.03   # share of configurable nodes in a large XLA layout graph
BENCH_SEARCH = "random"     # the generated configs are random layouts
BENCH_COLLECTION = Collection.parse(f"layout:xla:{BENCH_SEARCH}")   # whose by-search gnn settings the model takes
TIE_TOLERANCE = 1e-5        # scores closer than this (relative to the largest) are float ties between two paths


def make_graph(n_nodes: int, n_configs: int, seed: int) -> PrunedGraph:
    """A whole (unpruned) synthetic layout graph with random layouts and runtimes."""
    rng = np.random.default_rng(seed)
    consumers = np.arange(1, n_nodes)
    producers = consumers - 1 - np.minimum(rng.geometric(0.3, n_nodes - 1) - 1, consumers - 1)
    extra = rng.random(n_nodes - 1) < 0.4                                   # a second operand for 40% of nodes
    second = consumers[extra] - 1 - np.minimum(rng.geometric(0.05, extra.sum()), consumers[extra] - 1)
    edges = np.concatenate([np.stack([consumers, producers], 1), np.stack([consumers[extra], second], 1)])
    ids = np.sort(rng.choice(n_nodes, int(n_nodes * CONFIGURABLE_SHARE), replace=False))
    feat = rng.integers(-1, 6, size=(n_configs, len(ids), NODE_CONFIG_FEAT_DIM)).astype(np.int8)  # [configs, config nodes, 18]
    raw = np.full((n_nodes, NODE_FEAT_DIM), -1.0, np.float32)                          # only shape_dimensions_0..3 are read
    raw[:, 21:25] = rng.choice([1, 8, 16, 64, 128, 256], size=(n_nodes, 4))
    return PrunedGraph(graph_id="bench", split="train", node_feat=rng.normal(size=(n_nodes, FEATURES)).astype(np.float32),
                       node_feat_raw=raw,
                       node_opcode=rng.integers(0, 121, n_nodes), edge_index=edges.astype(np.int64),
                       node_ids=np.arange(n_nodes), config_runtime=rng.random(n_configs) + 1.0,
                       config_count=np.ones(n_configs, np.int64), config_inverse=np.arange(n_configs),
                       node_config_ids=ids, node_config_feat=feat)


def bench_hops(prune_cfg) -> int | None:
    """prune.hops as stage prune resolves it for HOPS_COLLECTION (None = the whole graph)."""
    return prune_hops(prune_cfg.hops, Collection.parse(HOPS_COLLECTION))


def prune(graph: PrunedGraph, hops: int | None) -> PrunedGraph:
    """The k-hop subgraph stage prune keeps (`hops` None: the graph itself)."""
    if hops is None:
        return graph
    sub = khop_subgraph(graph.n_nodes, graph.edge_index, graph.node_config_ids, hops)
    return PrunedGraph(**{**graph.__dict__, "node_feat": graph.node_feat[sub.node_ids],
                          "node_feat_raw": graph.node_feat_raw[sub.node_ids],
                          "node_opcode": graph.node_opcode[sub.node_ids], "edge_index": sub.edge_index,
                          "node_ids": sub.node_ids, "node_config_ids": sub.node_config_ids})


def bench_model(graph: PrunedGraph, gnn, threads: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The layout model of the gnn config (seed 0, settings of a `random` search) and its AdamW, on `threads`
    CPU threads."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model(model_spec(gnn, BENCH_COLLECTION, graph.node_feat.shape[1]))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def train_case(args: tuple) -> dict:
    graph, gnn, configs, steps, threads = args
    model, opt = bench_model(graph, gnn, threads)
    rng, g = np.random.default_rng(0), graph_tensors(graph)
    base = peak_rss_mb()
    times = []
    for step in range(steps + 1):                       # step 0 is warm-up
        rows = sample_configs(graph, configs, rng)
        tic = time.perf_counter()
        opt.zero_grad()
        loss = ranking_loss(str(gnn.loss), model(g, config_batch("layout", graph, rows)), runtimes(graph, rows),
                            float(gnn.margin), float(gnn.min_gap))
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - tic)
    seconds = float(np.median(times[1:]))
    return {"nodes": graph.n_nodes, "edges": len(graph.edge_index), "step_s": seconds,
            "configs_per_s": configs / seconds, "peak_mb": peak_rss_mb() - base}


def _infer_case(args: tuple) -> dict:
    """Rank every config of the graph with the plain forward and with the chunked CPU path (gnn.infer_chunk_mb),
    side by side in one process, `repeats` times each (alternating): on the wall clock with `threads` threads, then
    on this process's CPU time (`time.process_time`) with one thread, which other jobs on a shared machine disturb
    much less. Best time of each; the dense matmul rate measured the same two ways; the two paths' agreement."""
    graph, gnn, threads, repeats = args
    load = os.getloadavg()[0]
    torch.manual_seed(0)
    model = build_model(model_spec(gnn, BENCH_COLLECTION, graph.node_feat.shape[1])).eval()
    with torch.no_grad():   # zero-initialised heads would score every config 0: perturb so rankings mean something
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    out, scores = {}, {}
    for clock, n_threads in (("wall", threads), ("cpu", 1)):
        torch.set_num_threads(n_threads)
        timer = time.perf_counter if clock == "wall" else time.process_time
        seconds = {"plain": [], "chunked": []}
        for _ in range(repeats):
            for name, chunk_mb in (("plain", None), ("chunked", gnn.infer_chunk_mb)):
                model.infer_chunk_mb = chunk_mb
                tic = timer()
                scores[name] = predict_graph(model, "layout", graph, infer_settings(gnn),
                                             np.random.default_rng(0), torch.device("cpu"), None)
                seconds[name].append(timer() - tic)
        out[clock] = {"threads": n_threads, "plain": min(seconds["plain"]), "chunked": min(seconds["chunked"]),
                      "matmul_gflops": matmul_gflops(torch.device("cpu"), clock=timer)}
    plain, chunked = scores["plain"], scores["chunked"]
    configs = config_batch("layout", graph, np.arange(8))
    tolerance = TIE_TOLERANCE * float(np.abs(plain).max())
    return {**out, "configs": len(plain), "flops_per_config": flops_per_config(model, graph_tensors(graph), configs),
            "max_rel_diff": float(np.abs(chunked - plain).max() / np.abs(plain).max()),
            "same_ranking": bool(np.array_equal(np.argsort(plain, kind="stable"), np.argsort(chunked, kind="stable"))),
            "tau": ranking_agreement(plain, chunked), "tie_tolerance": tolerance,
            "swapped_beyond_ties": swapped_pairs(plain, chunked, tolerance),
            "load": (load, os.getloadavg()[0])}


def infer_lines(infer: dict, gnn, repeats: int) -> list[str]:
    """The inference paragraph and table of the results: wall clock and one-thread CPU time, each against the matmul
    bound measured the same way in the same run."""
    evals = infer["configs"] * int(gnn.tta)
    flops = infer["flops_per_config"]
    wall, cpu = infer["wall"], infer["cpu"]
    lines = ["", f"Inference: ranking all {infer['configs']} configs of the pruned graph with gnn.tta={gnn.tta}, "
             f"gnn.infer_batch={gnn.infer_batch} (weights perturbed from the initialisation), plain forward vs the "
             f"chunked CPU path (gnn.infer_chunk_mb={gnn.infer_chunk_mb}), best of {repeats} alternating runs each: "
             f"wall clock on {wall['threads']} threads, then CPU time of the process (`time.process_time`) on one "
             f"thread. Load average {infer['load'][0]:.1f} when the runs started, {infer['load'][1]:.1f} when they "
             f"ended. Matmul bound: {flops / 1e6:.1f} MFLOP of matmuls per config evaluation (flop counter, plain "
             f"forward) against the dense fp32 matmul rate measured the same way in the same process "
             f"({wall['matmul_gflops']:.1f} GFLOP/s wall clock on {wall['threads']} threads, "
             f"{cpu['matmul_gflops']:.1f} GFLOP/s per CPU second on one thread).", "",
             "| measure | plain (s) | chunked (s) | chunked / plain | plain / bound | chunked / bound |",
             "|---|---|---|---|---|---|"]
    for label, r in ((f"wall clock, {wall['threads']} threads", wall), ("CPU time, 1 thread", cpu)):
        bound = [evals * flops / r[name] / 1e9 / r["matmul_gflops"] for name in ("plain", "chunked")]
        lines.append(f"| {label} | {r['plain']:.2f} | {r['chunked']:.2f} | **{r['plain'] / r['chunked']:.2f}x** | "
                     f"{bound[0]:.3f} | {bound[1]:.3f} |")
    lines += ["", f"Agreement: max relative difference of the scores {infer['max_rel_diff']:.1e}; identical ranking: "
              f"{infer['same_ranking']}, Kendall tau between the two rankings {infer['tau']:.6f}; pairs swapped whose "
              f"plain scores differ by more than {infer['tie_tolerance']:.1e} ({TIE_TOLERANCE:g} of the largest "
              f"score): **{infer['swapped_beyond_ties']}** (float rounding only swaps near-ties)."]
    return lines


def main(argv=None) -> None:
    overrides, rest = split_overrides(list(argv) if argv is not None else os.sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=24000)
    parser.add_argument("--configs", type=int, default=16, help="configs sampled per training step")
    parser.add_argument("--steps", type=int, default=3, help="timed training steps per case (after 1 warm-up)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--infer-repeats", type=int, default=2,
                        help="inference runs of each path and clock (best is kept)")
    parser.add_argument("--skip-train", action="store_true", help="inference only (printed, no results file)")
    args = parser.parse_args(rest)
    cfg = compose(overrides)
    gnn, hops = cfg.gnn, bench_hops(cfg.prune)
    whole = make_graph(args.nodes, 1000, seed=0)
    pruned = prune(whole, hops)
    rows = {}
    infer = run_isolated(_infer_case, (pruned, gnn, args.threads, args.infer_repeats))
    print("inference", infer, flush=True)
    print("\n".join(infer_lines(infer, gnn, args.infer_repeats)), flush=True)
    if args.skip_train:
        return
    for name, graph in (("pruned", pruned), ("unpruned", whole)):
        rows[name] = run_isolated(train_case, (graph, gnn, args.configs, args.steps, args.threads))
        print(name, rows[name], flush=True)
    p, u = rows["pruned"], rows["unpruned"]
    lines = [
        f"GNN benchmark (`benchmarks/bench_gnn.py`): generated layout graph of {whole.n_nodes} nodes / "
        f"{len(whole.edge_index)} edges, {len(whole.node_config_ids)} configurable nodes, pruned with "
        f"prune.hops={hops}; model gnn.hidden={gnn.hidden}, gnn.layers={gnn.layers}, "
        f"cross_attention={gnn.cross_attention}; {args.configs} configs per training step; CPU, "
        f"{args.threads} threads; median of {args.steps} steps after a warm-up; peak = RSS growth of a fresh process.",
        "",
        "| graph | nodes | edges | step (s) | configs x graphs / s | peak memory (MB) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['nodes']} | {r['edges']} | {r['step_s']:.3f} | {r['configs_per_s']:.1f} | "
                     f"{r['peak_mb']:.0f} |")
    lines.append(f"| pruned / unpruned | {p['nodes'] / u['nodes']:.3f} | {p['edges'] / u['edges']:.3f} | "
                 f"{p['step_s'] / u['step_s']:.3f} | {p['configs_per_s'] / u['configs_per_s']:.1f}x | "
                 f"{p['peak_mb'] / max(u['peak_mb'], 1e-9):.3f} |")
    lines += infer_lines(infer, gnn, args.infer_repeats)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    run_main(main)
