"""The GPU path in one shot (run by benchmarks/gpu_check.sh): gnn=kaggle training with bf16 autocast, GST, DDP over
nccl, inference, CPU/GPU agreement and determinism, with figures written to benchmarks/results/gpu.md.

    python -m benchmarks.gpu_check [--cpu-only] [--tiny] [--steps 300] [--out benchmarks/results/gpu.md]

Graphs: one layout graph generated in memory at real size (benchmarks/bench_gnn.make_graph: --nodes nodes,
--graph-configs configs), its k-hop pruned version (prune.hops from conf) for gnn.mode=pruned, the whole graph for
GST (conf gnn=gst's segments), and a tile kernel graph (bench_scale's tile case). Every case reports configs/s
(and configs x nodes / s) and peak memory; the CPU reference runs the same model for a few steps so that the
GPU/CPU ratio is measured in the same run.
Checks (each a line of the report, and a non-zero exit when one fails):
- CPU vs GPU: the same weights score the same configs in fp32 within a relative tolerance, same ranking order
  (Kendall tau >= 0.99);
- determinism: two CUDA inference runs of the same batch (fp32) agree within 1e-5 relative (index_add on CUDA
  uses atomics, so not bitwise), and bitwise with torch.use_deterministic_algorithms(True);
- DDP: `torchrun --nproc_per_node=1` runs a few DDP training steps with the nccl backend (gloo with --cpu-only).
With --cpu-only every CUDA part is skipped (what the test runs, with --tiny sizes).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from pipeline.errors import run_main  # noqa: E402
from benchmarks.bench_gnn import bench_hops, make_graph, prune
from benchmarks.bench_scale import TILE_NODES, tile_graph, tile_rates
from benchmarks.common import ranking_agreement, sync
from pipeline.config import compose
from pipeline.graphnet.data import config_batch, graph_tensors, runtimes, sample_configs
from pipeline.graphnet.gst import GSTSettings, GSTTrainer, SegmentCache
from pipeline.graphnet.infer import autocast
from pipeline.graphnet.losses import ranking_loss
from pipeline.graphnet.model import build_model
from pipeline.settings.gnn import gst_group, model_spec
from pipeline.tpugraphs.dataset import Collection

RESULTS = Path(__file__).parent / "results" / "gpu.md"
SEARCH = "random"
LAYOUT_COLLECTION = Collection.parse(f"layout:xla:{SEARCH}")   # whose by-search gnn settings the model takes
AGREE_RTOL = 1e-3          # fp32 CPU vs GPU (different reduction orders, TF32 off)
REPEAT_RTOL = 1e-5         # two CUDA runs without deterministic algorithms
MIN_TAU = 0.99


def model_for(graph, gnn, device: torch.device, seed: int = 0):
    torch.manual_seed(seed)
    model = build_model(model_spec(gnn, LAYOUT_COLLECTION, graph.node_feat.shape[1]), gnn.infer_chunk_mb)
    with torch.no_grad():   # zero-initialised heads would score every config 0: perturb so scores differ
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model.to(device)


def peak_reset(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2 ** 20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def train_rate(graph, gnn, k: int, steps: int, device: torch.device, amp: bool, gst: GSTSettings | None = None) -> dict:
    """Training steps (forward, backward, AdamW) of `k` configs; median of the steps after one warm-up."""
    model = model_for(graph, gnn, device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng, tensors = np.random.default_rng(0), graph_tensors(graph).to(device)
    trainer = None if gst is None else GSTTrainer(model, gst, SegmentCache(gst, model.spec.layers + 1, device))
    peak_reset(device)
    times = []
    for _ in range(steps + 1):
        visit = trainer.sample(graph, k, rng) if trainer else None
        rows = visit.rows if trainer else sample_configs(graph, k, rng)
        configs, target = config_batch("layout", graph, rows).to(device), runtimes(graph, rows).to(device)
        sync(device)
        tic = time.perf_counter()
        opt.zero_grad()
        with autocast(device, amp):
            scores = trainer.scores(graph, visit, configs, rng) if trainer else model(tensors, configs)
        loss = ranking_loss(str(gnn.loss), scores.float(), target, float(gnn.margin), float(gnn.min_gap))
        loss.backward()
        opt.step()
        sync(device)
        times.append(time.perf_counter() - tic)
    step = float(np.median(times[1:]))
    return {"nodes": graph.n_nodes, "configs": k, "steps": steps, "step_s": step, "configs_per_s": k / step,
            "config_nodes_per_s": k * graph.n_nodes / step, "peak_mb": peak_mb(device),
            "loss_finite": bool(np.isfinite(loss.item()))}


def scores_of(model, graph, rows: np.ndarray, device: torch.device, amp: bool) -> np.ndarray:
    with torch.no_grad(), autocast(device, amp):
        return model(graph_tensors(graph).to(device), config_batch("layout", graph, rows).to(device)).float().cpu().numpy()


def infer_rate(graph, gnn, n: int, device: torch.device, amp: bool) -> dict:
    model = model_for(graph, gnn, device).eval()
    rows = np.arange(min(n, graph.n_kept))
    batches = np.array_split(rows, max(1, -(-len(rows) // int(gnn.infer_batch))))
    scores_of(model, graph, batches[0][:2], device, amp)                      # warm-up
    peak_reset(device)
    sync(device)
    tic = time.perf_counter()
    for b in batches:
        scores_of(model, graph, b, device, amp)
    sync(device)
    seconds = time.perf_counter() - tic
    return {"configs": len(rows), "configs_per_s": len(rows) / seconds, "peak_mb": peak_mb(device)}


def agreement(graph, gnn, n: int) -> dict:
    """fp32 scores of the same weights on CPU and CUDA, and two CUDA runs (plain, then deterministic algorithms)."""
    cuda = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = np.arange(min(n, graph.n_kept))
    cpu_scores = scores_of(model_for(graph, gnn, torch.device("cpu")).eval(), graph, rows, torch.device("cpu"), False)
    model = model_for(graph, gnn, cuda).eval()
    first, second = (scores_of(model, graph, rows, cuda, False) for _ in range(2))
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    # warn_only: an op without a deterministic CUDA kernel warns instead of failing; the bitwise check then says
    # whether the run is deterministic in fact
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        det = [scores_of(model, graph, rows, cuda, False) for _ in range(2)]
    finally:
        torch.use_deterministic_algorithms(False)
    scale = float(np.abs(cpu_scores).max())
    return {"cpu_gpu_max_rel": float(np.abs(first - cpu_scores).max() / scale),
            "cpu_gpu_tau": ranking_agreement(cpu_scores, first),
            "repeat_max_rel": float(np.abs(first - second).max() / scale),
            "deterministic_bitwise": bool(np.array_equal(det[0], det[1]))}


def ddp_worker(args) -> None:
    """Run under torchrun: a few DDP training steps on the pruned tiny graph; rank 0 prints a JSON line."""
    import torch.distributed as dist
    device = torch.device("cpu" if args.cpu_only else f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
    dist.init_process_group(backend="gloo" if args.cpu_only else "nccl")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    cfg = compose(["gnn=kaggle", "gnn.hidden=32"])
    graph = make_graph(300 if args.tiny else 2000, 64, seed=1)
    model = torch.nn.parallel.DistributedDataParallel(
        model_for(graph, cfg.gnn, device), device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng, tensors = np.random.default_rng(0), graph_tensors(graph).to(device)
    for _ in range(2 if args.tiny else 5):
        rows = sample_configs(graph, 16, rng)
        opt.zero_grad()
        with autocast(device, not args.cpu_only):
            scores = model(tensors, config_batch("layout", graph, rows).to(device))
        loss = ranking_loss("pairwise_hinge", scores.float(), runtimes(graph, rows).to(device), 0.1, 0.0)
        loss.backward()
        opt.step()
    world = torch.tensor([1.0], device=device)
    dist.all_reduce(world)
    if dist.get_rank() == 0:
        print(json.dumps({"backend": dist.get_backend(), "world": int(world.item()), "loss": loss.item()}))
    dist.destroy_process_group()


def run_ddp(cpu_only: bool, tiny: bool) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
           "-m", "benchmarks.gpu_check", "--ddp-worker", *(["--cpu-only"] if cpu_only else []),
           *(["--tiny"] if tiny else [])]
    tic = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return {"ok": False, "error": done.stderr[-800:]}
    line = [x for x in done.stdout.splitlines() if x.startswith("{")][-1]
    return {"ok": True, **json.loads(line), "seconds": time.perf_counter() - tic}


def checks(result: dict) -> list[tuple[str, bool]]:
    """(description, passed) of every check that ran."""
    out = [("DDP ran (" + str(result["ddp"].get("backend", "failed")) + ")", result["ddp"]["ok"]),
           ("training losses finite", all(r["loss_finite"] for r in result["train"].values()))]
    agree = result.get("agreement")
    if agree:
        out += [(f"CPU vs GPU fp32 scores within {AGREE_RTOL:g} relative", agree["cpu_gpu_max_rel"] <= AGREE_RTOL),
                (f"CPU vs GPU ranking Kendall tau >= {MIN_TAU}", agree["cpu_gpu_tau"] >= MIN_TAU),
                (f"two CUDA runs within {REPEAT_RTOL:g} relative", agree["repeat_max_rel"] <= REPEAT_RTOL),
                ("CUDA runs bitwise equal with deterministic algorithms", agree["deterministic_bitwise"])]
    return out


def gpu_extrapolation(result: dict) -> list[str]:
    """The full-dataset table of bench_scale with the CUDA training / inference rates (CPU stages keep theirs)."""
    from omegaconf import OmegaConf

    from benchmarks.scale_model import extrapolate, extrapolation_table
    scale = Path(__file__).parent / "results" / "scale.json"
    if "cuda train" not in result["train"] or not scale.exists():
        return ["GPU extrapolation: not computed (needs a CUDA run and benchmarks/results/scale.json)."]
    unit = dict(json.loads(scale.read_text())["rates"])
    unit["train_config_nodes_per_s"] = result["train"]["cuda train"]["config_nodes_per_s"]
    unit["infer_config_nodes_per_s"] = result["infer"]["cuda"]["configs_per_s"] * result["pruned_nodes"]
    unit["tile_step_s"] = result["tile"]["cuda"]["step_s"]
    unit["tile_infer_configs_per_s"] = result["tile"]["cuda"]["infer_configs_per_s"]
    sizes = OmegaConf.to_container(OmegaConf.load(Path(__file__).parent / "dataset_sizes.yaml"))
    return extrapolation_table(extrapolate(unit, sizes, compose(["gnn=kaggle"])),
                               "one GPU for gnn (rates above, the tile model's too), "
                               "prune and lgbm at the CPU rates of scale.md")


def markdown(result: dict, args) -> str:
    device = result["device"]
    lines = ["# GPU check (`benchmarks/gpu_check.sh`)", "",
             f"Device: {device}. Graph: generated layout graph of {result['nodes']} nodes, {args.graph_configs} "
             f"configs; pruned to {result['pruned_nodes']} nodes (gnn.mode=pruned) and whole for GST. Model gnn=kaggle "
             f"(hidden {result['hidden']}); bf16 autocast on CUDA. Wall time of the check: {result['seconds']:.0f} s.",
             "", "| case | nodes | configs / step | steps | configs / s | configs x nodes / s | peak memory (MB) |",
             "|---|---|---|---|---|---|---|"]
    for name, r in result["train"].items():
        lines.append(f"| train, {name} | {r['nodes']} | {r['configs']} | {r['steps']} | {r['configs_per_s']:.1f} | "
                     f"{r['config_nodes_per_s']:.0f} | {r['peak_mb']:.0f} |")
    for name, r in result["infer"].items():
        lines.append(f"| inference, {name} | {result['pruned_nodes']} | - | - | {r['configs_per_s']:.1f} | "
                     f"{r['configs_per_s'] * result['pruned_nodes']:.0f} | {r['peak_mb']:.0f} |")
    tile = [f"{name} training step of {r['configs']} configs {r['step_s']:.4f} s, inference "
            f"{r['infer_configs_per_s']:.0f} configs/s" for name, r in result["tile"].items()]
    lines += ["", f"Tile model (gnn=kaggle) on a generated kernel graph of {result['tile']['cpu']['nodes']} nodes: "
              + "; ".join(tile) + "."]
    if "cuda train" in result["train"]:
        lines += ["", f"GPU / CPU (same run): training "
                  f"{result['train']['cuda train']['config_nodes_per_s'] / result['train']['cpu']['config_nodes_per_s']:.1f}x, "
                  f"inference {result['infer']['cuda']['configs_per_s'] / result['infer']['cpu']['configs_per_s']:.1f}x."]
    else:
        lines += ["", "CUDA parts skipped (--cpu-only): GPU figures not measured in this run."]
    agree = result.get("agreement")
    if agree:
        lines += ["", f"CPU vs GPU (fp32, same weights): max relative difference {agree['cpu_gpu_max_rel']:.2e}, "
                  f"Kendall tau {agree['cpu_gpu_tau']:.6f}; two CUDA runs: {agree['repeat_max_rel']:.2e}; "
                  f"bitwise equal with deterministic algorithms: {agree['deterministic_bitwise']}."]
    lines += ["", f"DDP (torchrun --nproc_per_node=1): {json.dumps(result['ddp'])}", "", "Checks:", ""]
    lines += [f"- [{'x' if ok else ' '}] {name}" for name, ok in checks(result)]
    lines += [""] + gpu_extrapolation(result)
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cpu-only", action="store_true", help="skip every CUDA part")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (the test)")
    parser.add_argument("--nodes", type=int, default=40000)
    parser.add_argument("--graph-configs", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=300, help="CUDA training steps (gnn.mode=pruned)")
    parser.add_argument("--gst-steps", type=int, default=100, help="CUDA GST training steps")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--ddp-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ddp_worker:
        return ddp_worker(args)
    start = time.perf_counter()
    torch.set_num_threads(args.threads)
    hidden = ["gnn.hidden=32"] if args.tiny else []
    if args.tiny:
        args.nodes, args.graph_configs, args.steps, args.gst_steps = 1500, 64, 2, 2
    cfg, gst_cfg = compose(["gnn=kaggle", *hidden]), compose(["gnn=gst", *hidden])
    if not args.tiny:
        gst_cfg.gnn.hidden = cfg.gnn.hidden
    whole = make_graph(args.nodes, args.graph_configs, seed=0)
    pruned = prune(whole, bench_hops(cfg.prune))
    kernel = tile_graph(TILE_NODES, 1000)                 # the tile model's graph, as bench_scale's tile case
    k = int(cfg.gnn.configs_per_graph[SEARCH]) if not args.tiny else 8
    cpu = torch.device("cpu")
    result = {"device": "CPU only" if args.cpu_only else torch.cuda.get_device_name(0), "nodes": whole.n_nodes,
              "pruned_nodes": pruned.n_nodes, "hidden": int(cfg.gnn.hidden),
              "train": {"cpu": train_rate(pruned, cfg.gnn, min(k, 16), 2, cpu, False)},
              "infer": {"cpu": infer_rate(pruned, cfg.gnn, int(cfg.gnn.infer_batch), cpu, False)},
              "tile": {"cpu": tile_rates(kernel, cfg.gnn, 2, cpu)}}
    print(json.dumps(result), flush=True)
    if not args.cpu_only:
        cuda = torch.device("cuda")
        gst = dataclasses.replace(gst_group(gst_cfg.gnn.gst))
        result["train"]["cuda train"] = train_rate(pruned, cfg.gnn, k, args.steps, cuda, True)
        result["train"]["cuda GST (whole graph)"] = train_rate(whole, gst_cfg.gnn, k, args.gst_steps, cuda, True, gst)
        result["infer"]["cuda"] = infer_rate(pruned, cfg.gnn, args.graph_configs, cuda, True)
        result["tile"]["cuda"] = tile_rates(kernel, cfg.gnn, args.steps, cuda, True)
        result["agreement"] = agreement(pruned, cfg.gnn, int(cfg.gnn.infer_batch))
        print(json.dumps(result), flush=True)
    result["ddp"] = run_ddp(args.cpu_only, args.tiny)
    result["seconds"] = time.perf_counter() - start
    text = markdown(result, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    failed = [name for name, ok in checks(result) if not ok]
    if failed:
        raise SystemExit(f"gpu_check: failed: {failed}")


if __name__ == "__main__":
    run_main(main)
