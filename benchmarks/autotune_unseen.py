"""Autotune programs that the built-in zoo never builds, as a user would, and time each pick with the cost model.

    python benchmarks/autotune_unseen.py [--seeds 3] [--model ensemble] [--timing NAME=OVERRIDES ...]
        [overrides, e.g. data=programs]

Lowers a fixed set of small JAX programs (`programs()`: pooling, scans, while loops, conditionals, attention,
gradients, a Cholesky, sorts, FFTs, convolutions of other layouts, strides and ranks, narrow dots, ...) to their
unoptimised and optimised HLO text, runs `python -m pipeline.autotune` on each (its default budget, `autotune.seed`
= 0..seeds-1) with the trained models of the current `data=` (run `dvc repro` first), reads back the JSON's layouts
(`LayoutSpace.from_layouts`) and times the pick, the compiler default and the oracle (`pipeline.tuning.oracle`, the
stage's settings) with the project's noise-free layout cost model. Programs the tool refuses (no configurable node)
are listed with its one-line error; programs whose oracle gains under 1% are listed apart (their share is
undefined). Writes `<out>/autotune_unseen.md` and `.json`. The cost model is the project's own: this checks the tool
on programs it never saw, not the held-out world's timings.

`--timing NAME=OVERRIDES` (repeatable; overrides of `synthesize.layout_cost.*`, separated by spaces) also times every
pick, default and oracle under a cost model of other constants, which the models never trained on: how far the
picks hold where the world that times them is not the one that taught the models (the held-out judge times picks
with a cost model of its own). Each world gets its own oracle, table and summary.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pipeline.config import load_cfg  # noqa: E402
from pipeline.hlo.featurize import layout_program, parse_module  # noqa: E402
from pipeline.settings.sections import layout_cost  # noqa: E402
from pipeline.tuning.oracle import CostModelScorer, oracle_search  # noqa: E402
from pipeline.tuning.report import log_gains, mean_std, share_of_gain  # noqa: E402
from pipeline.tuning.space import LayoutSpace  # noqa: E402
from pipeline.tuning.verify import AutotuneSettings  # noqa: E402


OWN = "own"                                            # the world of the trained models: `synthesize.layout_cost`
COST_PREFIX = "synthesize.layout_cost."


def programs() -> dict:
    """name -> (function, example arguments): each a program shape the zoo does not generate."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def scan_rnn(h, xs, w):
        return lax.scan(lambda c, x: (jnp.tanh(c @ w + x), c.sum()), h, xs)

    def while_loop(x):
        return lax.while_loop(lambda c: c[1] < 5, lambda c: (c[0] @ c[0].T / 10.0, c[1] + 1), (x, 0))[0]

    def attention(q, k, v):
        return jax.nn.softmax(jnp.einsum("bhqd,bhkd->bhqk", q, k), -1) @ v

    def ones(*shape, dtype=jnp.float32):
        return jnp.ones(shape, dtype)

    def conv_nchw(x, w):
        return jnp.tanh(lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")))

    def depthwise(x, w):
        return lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        feature_group_count=x.shape[-1])

    def conv(x, w, stride=1, dims=("NHWC", "HWIO", "NHWC")):
        return jax.nn.relu(lax.conv_general_dilated(x, w, (stride,) * (x.ndim - 2), "SAME", dimension_numbers=dims))

    def conv_pool(x, w):
        return lax.reduce_window(conv(x, w), -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def cnn_head(x, w, d):
        y = conv(x, w)
        return y.reshape(y.shape[0], -1) @ d                        # [batch, H * W * C] @ [H * W * C, classes]

    def heads(x, w):
        y = (x @ w).reshape(x.shape[0], 8, -1)                     # [tokens, heads, head_dim]
        return jnp.einsum("thd,shd->hts", y, y)

    return {
        "conv_pool": (conv_pool, (ones(8, 64, 64, 16), ones(3, 3, 16, 32))),
        "scan_rnn": (scan_rnn, (ones(4, 128), ones(10, 4, 128), ones(128, 128))),
        "while_loop": (while_loop, (ones(64, 64),)),
        "cond": (lambda p, x, y: lax.cond(p > 0, lambda a: a @ y, lambda a: (a * 2.0) @ y, x),
                 (1.0, ones(32, 64), ones(64, 16))),
        "attention": (attention, (ones(2, 4, 128, 32), ones(2, 4, 128, 32), ones(2, 4, 128, 32))),
        "gather_scatter": (lambda t, i, u: t[i].sum() + t.at[i].add(u).sum(), (ones(1000, 64), jnp.arange(32),
                                                                               ones(32, 64))),
        "grad_mlp": (jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)), (ones(64, 32), ones(16, 64))),
        "cholesky": (lambda a: jnp.linalg.cholesky(a @ a.T + jnp.eye(32)), (ones(32, 32),)),
        "bf16_f16_dot": (lambda a, b: (a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16)).astype(jnp.float16),
                         (ones(64, 64), ones(64, 64))),
        "wide_mlp": (lambda x, w1, w2: jax.nn.gelu(x @ w1) @ w2, (ones(4096, 512), ones(512, 2048), ones(2048, 512))),
        "rng_scale": (lambda key, x: x * jax.random.uniform(key, x.shape), (jax.random.PRNGKey(0), ones(128, 128))),
        "conv_nchw": (conv_nchw, (ones(16, 8, 32, 32), ones(16, 8, 3, 3))),
        "depthwise": (depthwise, (ones(4, 56, 56, 24), ones(3, 3, 1, 24))),
        "narrow_dot": (lambda x, w: jnp.tanh(x @ w), (ones(512, 64), ones(64, 4))),
        "batched_small": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (ones(64, 16, 8), ones(64, 8, 16))),
        "heads": (heads, (ones(128, 256), ones(256, 256))),
        "conv_narrow_out": (conv, (ones(8, 32, 32, 64), ones(3, 3, 64, 8))),
        "conv_stride2": (lambda x, w: conv(x, w, 2), (ones(8, 64, 64, 32), ones(3, 3, 32, 64))),
        "conv1d": (lambda x, w: conv(x, w, 1, ("NWC", "WIO", "NWC")), (ones(16, 512, 24), ones(5, 24, 48))),
        "conv_transpose": (lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME",
                                                           dimension_numbers=("NHWC", "HWIO", "NHWC")),
                           (ones(4, 16, 16, 32), ones(3, 3, 32, 16))),
        "cnn_head": (cnn_head, (ones(4, 8, 8, 16), ones(3, 3, 16, 32), ones(8 * 8 * 32, 10))),
        "tall_skinny_dot": (lambda x, w: x @ w, (ones(4096, 8), ones(8, 256))),
        "matvec": (lambda a, v: jnp.tanh(a @ v), (ones(1024, 1024), ones(1024, 1))),
        "bottleneck_mlp": (lambda x, w1, w2: jax.nn.relu(x @ w1) @ w2, (ones(256, 512), ones(512, 16), ones(16, 512))),
        "small_heads": (lambda q, k: jnp.einsum("bhqd,bhkd->bhqk", q, k), (ones(4, 16, 64, 8), ones(4, 16, 64, 8))),
        "sort_topk": (lambda x: (jnp.sort(x, axis=-1), lax.top_k(x, 5)), (ones(16, 1000),)),
        "fft": (lambda x: jnp.abs(jnp.fft.fft(x)), (ones(64, 256, dtype=jnp.complex64),)),
        "transpose5": (lambda x: jnp.transpose(x, (4, 2, 0, 3, 1)) * 2.0, (ones(2, 3, 4, 5, 6),)),
    }


def dump(name: str, fn, args: tuple, folder: Path) -> tuple[Path, Path]:
    """The unoptimised and optimised HLO text of one program."""
    import jax

    lowered = jax.jit(fn).lower(*args)
    text, optimized = folder / f"{name}.hlo.txt", folder / f"{name}_opt.hlo.txt"
    text.write_text(lowered.as_text(dialect="hlo"))
    optimized.write_text(lowered.compile().as_text())
    return text, optimized


def autotune(text: Path, optimized: Path, out: Path, model: str, seed: int, overrides: list[str]) -> dict:
    """Run the tool as a user would; its JSON, or {"error": its one-line message}. A program with fused kernels but
    no configurable node gets a JSON of tiles only (`layouts_not_searched`): no layout pick to time, so it counts as
    refused, {"error": "layouts not searched: ..."}."""
    cmd = [sys.executable, "-m", "pipeline.autotune", str(text), str(optimized), "--model", model, "--out", str(out),
           f"autotune.seed={seed}", *overrides]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        message = lines[-1] if lines else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return {"error": message.replace(str(text.parent), "<dump>"), "rc": done.returncode}
    result = json.loads((out / f"{text.name.removesuffix('.hlo.txt')}.json").read_text())
    if result.get("layouts_not_searched"):
        return {"error": f"layouts not searched: {result['layouts_not_searched']}".replace(str(text.parent), "<dump>"),
                "rc": done.returncode}
    return result


def parse_timing(text: str) -> tuple[str, list[str]]:
    """`NAME=OVERRIDE OVERRIDE ...` -> (name, overrides), each override of `synthesize.layout_cost.*`."""
    name, sep, rest = text.partition("=")
    overrides = rest.split()
    if not sep or not name or name == OWN or not overrides:
        raise SystemExit(f"error: --timing {text!r}: expected NAME=OVERRIDES (NAME not {OWN!r}), e.g. "
                         f"'fastmem={COST_PREFIX}bytes_per_ns=1350'")
    for override in overrides:
        if not override.startswith(COST_PREFIX):
            raise SystemExit(f"error: --timing {name}: {override!r} is not a {COST_PREFIX}* override")
    return name, overrides


def verify(text: Path, result: dict, truth_cache: dict, world: str, cfg) -> dict:
    """Runtimes of the default, the pick and the oracle under `cfg`'s layout cost model (the world `world`; its
    oracle is searched once per program)."""
    name = text.name.removesuffix(".hlo.txt")
    if name not in truth_cache:                                    # the program's space, shared by every world
        layout = layout_program(parse_module(text.read_text(), str(text)))
        truth_cache[name] = LayoutSpace.of(layout.graph, layout.config_node_ids, str(text))
    if (world, name) not in truth_cache:
        space = truth_cache[name]
        truth = CostModelScorer(space, layout_cost(cfg.synthesize.layout_cost))
        s = AutotuneSettings.from_cfg(cfg.autotune)                # the stage's oracle settings
        oracle = oracle_search(space, truth, s.search, s.oracle_budget, s.oracle_random, s.oracle_batch,
                               np.random.default_rng(0))
        truth_cache[world, name] = (space, truth, truth.default_ns * float(np.exp(oracle.score)))
    space, truth, t_oracle = truth_cache[world, name]
    pick = space.from_layouts(result["layouts"], name)
    t_pick = float(truth.runtime_ns(space.encode(pick[None]))[0])
    return {"t_default_ns": truth.default_ns, "t_pick_ns": t_pick, "t_oracle_ns": t_oracle,
            "predicted_ratio": float(result["predicted_runtime_ratio"]), "verified_ratio": t_pick / truth.default_ns,
            "oracle_ratio": t_oracle / truth.default_ns, "guarded": bool(result["guarded"]),
            "beyond_max_gain": int(result["beyond_max_gain"]), "evaluations": int(result["evaluations"]),
            "share": share_of_gain(truth.default_ns, t_pick, t_oracle)}


def summarise(rows: list[dict], listed: dict) -> dict:
    """Shares, slower rows and log gains of one world's rows (a refused program's row holds its error)."""
    tuned = [r for r in rows if "error" not in r]
    shares = [r["share"] for r in tuned if r["share"] is not None]
    return {"programs": len(listed), "refused": sorted({r["program"] for r in rows if "error" in r}),
            "oracle_under_1pct": sorted({r["program"] for r in tuned if r["share"] is None}),
            "share": mean_std(shares), "slower_than_default": sum(r["verified_ratio"] > 1.0 for r in tuned),
            "slower": sorted({r["program"] for r in tuned if r["verified_ratio"] > 1.0}),
            "min_share": min(shares) if shares else None,
            "worst_ratio": max((r["verified_ratio"] for r in tuned), default=None), **log_gains(tuned)}


def table(rows: list[dict]) -> list[str]:
    """The markdown table of rows (a refused program's row holds its one-line error)."""
    lines = ["| program | seed | predicted ratio | verified ratio | oracle ratio | share | guarded | beyond max_gain |",
             "|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['program']} | {r['seed']} | refused: `{r['error']}` | | | | | |")
            continue
        share = "oracle < 1%" if r["share"] is None else f"{r['share']:.4f}"
        lines.append(f"| {r['program']} | {r['seed']} | {r['predicted_ratio']:.4f} | {r['verified_ratio']:.4f} | "
                     f"{r['oracle_ratio']:.4f} | {share} | {r['guarded']} | "
                     f"{r['beyond_max_gain']} of {r['evaluations']} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="autotune.seed 0..seeds-1")
    parser.add_argument("--model", default="ensemble", choices=["ensemble", "gnn", "lgbm"])
    parser.add_argument("--timing", action="append", default=[], metavar="NAME=OVERRIDES",
                        help=f"also time every pick under {COST_PREFIX}* overrides (repeatable)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args, overrides = parser.parse_known_args()
    timings = dict(parse_timing(text) for text in args.timing)
    worlds = {OWN: load_cfg(overrides), **{name: load_cfg([*overrides, *extra]) for name, extra in timings.items()}}
    rows, truth_cache, listed = {world: [] for world in worlds}, {}, programs()
    with tempfile.TemporaryDirectory(prefix="autotune-unseen-") as tmp:
        folder = Path(tmp)
        for name, (fn, example) in listed.items():
            text, optimized = dump(name, fn, example, folder)
            for seed in range(args.seeds):
                result = autotune(text, optimized, folder / f"seed{seed}", args.model, seed, overrides)
                for world, cfg in worlds.items():
                    row = {"program": name, "seed": seed}
                    row.update(result if "error" in result else verify(text, result, truth_cache, world, cfg))
                    rows[world].append(row)
                    print(f"{world}: {table([row])[-1]}", flush=True)
    summary = {"model": args.model, "seeds": args.seeds, "overrides": overrides, **summarise(rows[OWN], listed),
               "timing": {world: {"overrides": extra, **summarise(rows[world], listed)}
                          for world, extra in timings.items()}}
    timing_flags = "".join(f" --timing '{world}={' '.join(extra)}'" for world, extra in timings.items())
    lines = [f"# autotune on programs the zoo never builds (`benchmarks/autotune_unseen.py`, model {args.model})", "",
             f"`python benchmarks/autotune_unseen.py --seeds {args.seeds} --model {args.model}{timing_flags} "
             f"{' '.join(overrides)}`. Ratios are runtimes over the compiler default's under the project's layout "
             "cost model.", "", *table(rows[OWN]), "",
             f"Summary: `{json.dumps({k: v for k, v in summary.items() if k != 'timing'})}`"]
    for world, extra in timings.items():
        lines += ["", f"## Timed by another cost model: `{world}` ({' '.join(extra)})", "",
                  "The same picks; the default, the pick and this world's own oracle under its constants.", "",
                  *table(rows[world]), "", f"Summary: `{json.dumps(summary['timing'][world])}`"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "autotune_unseen.md").write_text("\n".join(lines) + "\n")
    (args.out / "autotune_unseen.json").write_text(json.dumps({"summary": summary, "rows": rows[OWN],
                                                               "timing_rows": {w: rows[w] for w in timings}},
                                                              indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
