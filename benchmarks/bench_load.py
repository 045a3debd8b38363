"""Benchmark: peak memory of reading a subset of configurations from a real-size layout npz.

Writes (streamed, with NpzWriter.write_chunks) a layout file whose node_config_feat is [configs, nodes, 18]
float32 (defaults: 100000 x 1000 x 18 = 7.2 GB, the largest real graphs) into a temp folder, then measures in
separate subprocesses, one after the other, the peak RSS (VmHWM) and wall time of
  (a) load_graph + Graph.read_node_config_feat(<sample> random configs)   (positioned reads of the STORED member),
  (a') the same configs by fancy-indexing np.memmap of the member          (for contrast),
  (b) np.load(path)["node_config_feat"]                                   (what a naive loader does),
  (c) validate_node_config_feat: every value checked, streamed in chunks,
prints a markdown table with the ratios and writes it to --out. The temp folder is deleted afterwards.

    .venv/bin/python benchmarks/bench_load.py                      # full size, a few minutes, ~7.2 GB of disk
    .venv/bin/python benchmarks/bench_load.py --configs 2000 --nodes 100 --out /tmp/load.md   # quick check
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pipeline.errors import run_main  # noqa: E402
from pipeline.tpugraphs.npz import NpzWriter, member_memmap  # noqa: E402
from pipeline.tpugraphs.dataset import load_graph, validate_node_config_feat  # noqa: E402
from pipeline.tpugraphs.schema import NODE_CONFIG_FEAT_DIM, NODE_FEAT_DIM  # noqa: E402

COLLECTION = "layout:xla:random"
WRITE_CHUNK_CONFIGS = 500


def _status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmHWM = peak resident set, VmRSS = current)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def write_layout_file(path: Path, configs: int, nodes: int, seed: int) -> float:
    """A valid layout npz: 2*nodes nodes, every other one configurable; returns seconds taken."""
    rng = np.random.default_rng(seed)
    n_nodes = 2 * nodes
    start = time.perf_counter()
    with NpzWriter(path) as npz:
        npz.write("node_feat", rng.random((n_nodes, NODE_FEAT_DIM), dtype=np.float32))
        npz.write("node_opcode", rng.integers(1, 121, n_nodes).astype(np.uint8))
        npz.write("edge_index", np.stack([np.arange(1, n_nodes), np.arange(n_nodes - 1)], axis=1))  # [edges, 2]
        npz.write("node_config_ids", np.arange(0, n_nodes, 2))
        npz.write("config_runtime", rng.integers(1, 10**9, configs))
        npz.write("node_splits", np.array([[0, n_nodes]]))                                         # (1, S)

        def chunks():
            for lo in tqdm(range(0, configs, WRITE_CHUNK_CONFIGS), desc="write node_config_feat", unit="chunk"):
                rows = min(WRITE_CHUNK_CONFIGS, configs - lo)
                yield rng.integers(-1, 6, (rows, nodes, NODE_CONFIG_FEAT_DIM), dtype=np.int8).astype(np.float32)

        npz.write_chunks("node_config_feat", (configs, nodes, NODE_CONFIG_FEAT_DIM), np.float32, chunks())
    return time.perf_counter() - start


def measure(method: str, path: Path, sample: int, seed: int) -> dict:
    """Run one method in this process; report its time, peak RSS and a checksum of the sampled configs.

    The peak is read right after the method, before the checksum (which sums in float64 without copies).
    """
    baseline_kib = _status_kib("VmRSS")
    start = time.perf_counter()
    if method in ("subset", "subset_mmap"):
        graph = load_graph(path, COLLECTION, "train")
        index = np.random.default_rng(seed).choice(graph.n_configs, sample, replace=False)
        if method == "subset":
            rows = graph.read_node_config_feat(index)
        else:                                    # the same rows by fancy-indexing a memory map, for contrast
            rows = np.take(member_memmap(graph.node_config_feat_source), np.sort(index), axis=0)
    elif method == "np_load":
        with np.load(path) as npz:
            rows = npz["node_config_feat"]
        index = np.random.default_rng(seed).choice(len(rows), sample, replace=False)
    else:
        validate_node_config_feat(load_graph(path, COLLECTION, "train"))
        rows, index = None, None
    seconds, peak_kib = time.perf_counter() - start, _status_kib("VmHWM")
    ru_maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if method == "np_load":
        checksum = sum(float(rows[i].sum(dtype=np.float64)) for i in index)
    else:
        checksum = 0.0 if rows is None else float(rows.sum(dtype=np.float64))
    return {"method": method, "seconds": seconds, "peak_kib": peak_kib, "ru_maxrss_kib": ru_maxrss_kib,
            "baseline_kib": baseline_kib, "checksum": int(checksum), "shape": [] if rows is None else list(rows.shape)}


def run_child(method: str, path: Path, sample: int, seed: int) -> dict:
    cmd = [sys.executable, __file__, "--measure", method, "--path", str(path), "--sample", str(sample),
           "--seed", str(seed)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(results: dict, args, file_bytes: int, write_s: float) -> str:
    mib = 1024.0
    sub, full, stream = results["subset"], results["np_load"], results.get("stream")
    lines = [
        "# Loading a real-size layout file: subset read vs `np.load`",
        "",
        f"File: layout npz, `node_config_feat` ({args.configs}, {args.nodes}, {NODE_CONFIG_FEAT_DIM}) float32, "
        f"STORED member, {file_bytes / 1e9:.2f} GB on disk, written streamed by `NpzWriter.write_chunks` "
        f"in {write_s:.0f} s. Reading {args.sample} random configurations. Each method ran alone in a fresh "
        f"subprocess (peak RSS = the child's VmHWM read right after the method; baseline = its RSS after "
        f"imports; ru_maxrss is not used, it also counts the forked parent before exec). "
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {args.loadavg:.2f} when the run "
        f"started (shared: wall times are noisy); the file was just written (warm page cache).",
        "",
        "| method | wall time (s) | peak RSS (MiB) | peak RSS above baseline (MiB) |",
        "|---|---:|---:|---:|",
    ]
    named = [(f"(a) `load_graph` + `Graph.read_node_config_feat({args.sample} configs)` (positioned reads)", sub),
             (f"(a') the same {args.sample} configs by fancy-indexing `member_memmap` (memory map)",
              results["subset_mmap"]),
             ("(b) `np.load(path)[\"node_config_feat\"]`", full)]
    if stream:
        named.append(("(c) `validate_node_config_feat` (all configs, streamed)", stream))
    for name, r in named:
        lines.append(f"| {name} | {r['seconds']:.2f} | {r['peak_kib'] / mib:.0f} | "
                     f"{(r['peak_kib'] - r['baseline_kib']) / mib:.0f} |")
    lines += ["", "(a') reads the same bytes as (a) but its RSS also counts every page-cache page the kernel maps "
                  "around each touched row of the memory map; this is why `read_rows` uses positioned reads for "
                  "STORED members.",
              "", f"Ratio (b)/(a): peak RSS {full['peak_kib'] / sub['peak_kib']:.1f}x, "
                  f"above baseline {(full['peak_kib'] - full['baseline_kib']) / max(1, sub['peak_kib'] - sub['baseline_kib']):.1f}x, "
                  f"wall time {full['seconds'] / sub['seconds']:.1f}x.",
              f"Checksums of the sampled configurations agree: "
              f"{sub['checksum'] == full['checksum'] == results['subset_mmap']['checksum']} "
              f"({sub['checksum']})."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=1000, help="configurable nodes (NC)")
    parser.add_argument("--sample", type=int, default=1000, help="configurations read by (a)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmpdir", default=tempfile.gettempdir())
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "load.md"))
    parser.add_argument("--no-stream", action="store_true", help="skip (c), the full streamed validation")
    parser.add_argument("--measure", choices=["subset", "subset_mmap", "np_load", "stream"], help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, Path(args.path), args.sample, args.seed)))
        return
    args.loadavg = os.getloadavg()[0]
    folder = Path(tempfile.mkdtemp(prefix="bench_load_", dir=args.tmpdir))
    try:
        path = folder / "layout.npz"
        write_s = write_layout_file(path, args.configs, args.nodes, args.seed)
        methods = ["subset", "subset_mmap", "np_load"] + ([] if args.no_stream else ["stream"])
        results = {}
        for method in methods:
            results[method] = run_child(method, path, args.sample, args.seed)
            print(method, json.dumps(results[method]), flush=True)
        text = report(results, args, path.stat().st_size, write_s)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


if __name__ == "__main__":
    run_main(main)
