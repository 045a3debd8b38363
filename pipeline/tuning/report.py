"""What autotune writes: the tool's per-program JSON and summary lines, the stage's share of the oracle's gain.

Tool JSON (`<out>/<program>.json`): program, model, collection, budget, evaluations, seconds,
predicted_runtime_ratio (pick / default, from the calibrated model), guarded (true: the default was kept),
layouts (one object per configurable instruction, `LayoutSpace.layouts`), tiles (per fused kernel: fusion,
computation, tile sizes), changes (the changes worth most, predicted), unmeasured_blocks (the kinds of block kept at
the default because the valid split never changed one: `unmeasured`) and frozen_beside_unmeasured (`frozen_beside`).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from pipeline.tpugraphs.opcodes import OPCODE_NAMES
from pipeline.tuning.space import BLOCKS, LayoutSpace

MIN_ORACLE_GAIN = 0.01          # programs where the oracle gains less are listed apart (share undefined)


def share_of_gain(t_default: float, t_pick: float, t_oracle: float) -> float | None:
    """(1 - t_pick / t_default) / (1 - t_oracle / t_default); None when the oracle gains < MIN_ORACLE_GAIN."""
    oracle_gain = 1.0 - t_oracle / t_default
    if oracle_gain < MIN_ORACLE_GAIN:
        return None
    return (1.0 - t_pick / t_default) / oracle_gain


def changes(space: LayoutSpace, candidate: np.ndarray, scorer: Callable[[np.ndarray], np.ndarray], score: float,
            top: int, batch: int, calibrated: Callable[[float, int], float] | None = None) -> list[dict]:
    """The `top` changed blocks worth most: for each, the predicted log runtime ratio lost by reverting it alone
    to the default (`worth`, larger = more important), with the default and chosen minor-to-major. `score` is the
    pick's prediction as reported; `calibrated(prediction, changed blocks)` (the guard's `Guard.calibrated`) puts
    each reverted candidate's prediction on the same scale first (None: as the scorer gives it)."""
    moved = np.argwhere(np.asarray(candidate) != 0)                                 # [changed blocks, (k, b)]
    if len(moved) == 0:
        return []
    reverted = np.repeat(np.asarray(candidate, dtype=np.int16)[None], len(moved), axis=0)   # [M, NC, 3]
    reverted[np.arange(len(moved)), moved[:, 0], moved[:, 1]] = 0
    worth = np.concatenate([scorer(space.encode(reverted[lo:lo + batch])) for lo in range(0, len(moved), batch)])
    if calibrated is not None:
        worth = np.array([calibrated(float(w), len(moved) - 1) for w in worth])
    worth = worth - score
    rows = []
    for i in np.argsort(-worth, kind="stable")[:top]:
        k, b = (int(v) for v in moved[i])
        node = space.graph.nodes[int(space.node_config_ids[k])]
        rows.append({"computation": node.computation, "instruction": node.name, "block": BLOCKS[b],
                     "default": list(space.defaults[k][b]), "chosen": space.minor_to_major(candidate, k, b),
                     "worth": float(worth[i])})
    return rows


def unmeasured(space: LayoutSpace) -> list[dict]:
    """The blocks of `space` frozen by kind (`LayoutSpace.only_kinds`): [{"opcode", "block", "rank", "blocks"}],
    most blocks first."""
    counts = space.frozen_kinds(unmeasured=True)
    return [{"opcode": OPCODE_NAMES.get(opcode, str(opcode)), "block": BLOCKS[block], "rank": rank, "blocks": count}
            for (opcode, block, rank), count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def frozen_beside(space: LayoutSpace) -> int:
    """Blocks of measured kinds frozen because they lie beside an unmeasured one (`LayoutSpace.freeze_beside`)."""
    return 0 if space.frozen is None else int(np.count_nonzero(space.frozen & ~space.unmeasured))


def summary_lines(result: dict) -> list[str]:
    """The tool's printout: predicted speed-up and the top changes."""
    ratio = result["predicted_runtime_ratio"]
    head = (f"{result['program']}: predicted speed-up {1 / ratio:.3f}x (runtime ratio {ratio:.4f}) with "
            f"{result['model']} ({result['collection']}), {result['evaluations']} evaluations in "
            f"{result['seconds']:.1f} s")
    if result["guarded"]:
        head += "; no pick passed the guard (the valid split's error margin and region): the default is kept"
    lines = [head]
    if result.get("layouts_not_searched"):
        lines.append(f"  layouts not searched: {result['layouts_not_searched']}; tiles only")
    if result.get("beyond_max_gain"):
        lines.append(f"  note: {result['beyond_max_gain']} candidates were predicted faster than any valid configuration "
                     f"truly was (the guard's max_gain): the model extrapolates on this program; time a pick before "
                     f"relying on it")
    if result.get("margin_scale", 1.0) != 1.0:
        lines.append(f"  note: the program prunes to {result['pruned_nodes']} nodes, fewer than any valid graph the guard "
                     f"measured ({result['guard']['min_nodes']}): its margins are {result['margin_scale']:g} times "
                     f"theirs (autotune.guard.small_program_scale)")
    frozen = result.get("unmeasured_blocks") or []
    if frozen:
        kinds = ", ".join(f"{u['opcode']} {u['block']} rank {u['rank']} x{u['blocks']}" for u in frozen)
        lines.append(f"  kept at the default, a kind of block no valid configuration changed: {kinds}")
    if result.get("frozen_beside_unmeasured"):
        lines.append(f"  kept at the default beside those: {result['frozen_beside_unmeasured']} blocks of measured kinds")
    for c in result["changes"]:
        lines.append(f"  {c['computation']}/{c['instruction']} {c['block']}: {c['default']} -> {c['chosen']} "
                     f"(worth {c['worth']:+.4f} log runtime)")
    for t in result["tiles"]:
        listed = len(t.get("candidates", []))
        lines.append(f"  tile {t['fusion']}: {t['tile']} (predicted ratio {t['predicted_ratio']:.4f} vs default "
                     f"{t['default_tile']})" + (f"; {listed} candidates to time in the JSON" if listed else ""))
    return lines


def mean_std(values: Sequence[float]) -> dict:
    values = [float(v) for v in values]
    return {"mean": float(np.mean(values)) if values else None,
            "std": float(np.std(values)) if values else None, "n": len(values)}


PICK_RUNTIMES = {"pick": "t_pick_ns"}             # log_gains' default: the pick's runtime key per name
BASELINE_RUNTIMES = {"featurizer_sample": "t_featurizer_sample_ns", "random_search": "t_random_search_ns"}


def log_gains(rows: Sequence[dict], runtimes: Mapping[str, str] = PICK_RUNTIMES) -> dict:
    """What each runtime (name -> row key) captures of the oracle's log gain over every row (keys t_default_ns,
    t_oracle_ns and the runtimes'): {"log_share": {name: sum log(t_default / t) / sum log(t_default / t_oracle)},
    "geomean_ratio": {name, and "oracle": geometric mean of t / t_default}}; None without rows, and a share None
    when the oracle gains nothing in all.

    Unlike the mean share it counts the programs whose oracle gains under 1% and it is not dominated by them: a
    pick 5% slower where the oracle finds 2% costs log(1.05) here, not a share of -2.5."""
    default = np.log([r["t_default_ns"] for r in rows])                              # [rows]
    oracle_gain = float(np.sum(default - np.log([r["t_oracle_ns"] for r in rows])))
    shares, ratios = {}, {}
    for name, key in {**runtimes, "oracle": "t_oracle_ns"}.items():
        gain = default - np.log([r[key] for r in rows])                               # [rows] (+0.0 when equal)
        ratios[name] = float(np.exp(-np.mean(gain))) if len(rows) else None
        if name != "oracle":
            shares[name] = float(np.sum(gain) / oracle_gain) if oracle_gain > 0 else None
    return {"log_share": shares, "geomean_ratio": ratios}


def aggregate(rows: Sequence[dict]) -> dict:
    """Mean share (pick and both baselines) over the rows whose share is defined, the others listed apart; and
    over every row the share of the oracle's summed log gain and the geometric-mean runtime ratios (`log_gains`)."""
    counted = [r for r in rows if r["share"] is not None]
    out = {key: mean_std([r[key] for r in counted if r[key] is not None])
           for key in ("share", "share_featurizer_sample", "share_random_search")}
    out.update(log_gains(rows, {**PICK_RUNTIMES, **BASELINE_RUNTIMES}))
    out["small_gain_programs"] = sorted({r["program"] for r in rows if r["share"] is None})
    out["min_share"] = min((r["share"] for r in counted), default=None)
    out["guarded"] = sum(not r["guard_kept_pick"] for r in rows)
    return out


def aggregate_tiles(rows: Sequence[dict]) -> dict:
    """Mean share of the tile picks over the kernels whose share is defined; the others counted apart. Beside it,
    the default's and the timed candidates' runtime over the oracle's (geometric mean and worst over the kernels)."""
    counted = [r for r in rows if r["share"] is not None]
    return {"share": mean_std([r["share"] for r in counted]),
            "min_share": min((r["share"] for r in counted), default=None),
            "guarded": sum(not r["guard_kept_pick"] for r in rows), "kernels": len(rows),
            "small_gain_kernels": len(rows) - len(counted),
            "vs_oracle": {name: over_oracle([r[key] / r["t_oracle_ns"] for r in rows])
                          for name, key in (("default", "t_default_ns"), ("pick", "t_pick_ns"),
                                            ("timed_candidates", "t_candidates_ns"))}}


def over_oracle(ratios: Sequence[float]) -> dict:
    """{geomean, worst} of runtimes over the oracle's (1 = the oracle; None without kernels)."""
    if not ratios:
        return {"geomean": None, "worst": None}
    return {"geomean": float(np.exp(np.mean(np.log(ratios)))), "worst": float(max(ratios))}
