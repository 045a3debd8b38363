"""The guard file the tool reads (`<models_dir>/autotune/<slug>.json`, written by stage autotune), checked before use.

Stage autotune writes every key below; a file edited by hand, cut and mended, or written by an older version of the
stage (before `margin_by_distance` or `min_nodes` existed) is refused in one line naming the file, the key, what was
expected and what was found, and the remedy (re-run the stage). Before, such a file ended the tool in a KeyError,
TypeError or AttributeError traceback, or was used silently: a NaN or negative margin kept every pick, a missing
`min_nodes` dropped the small-program margin scale.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pipeline.errors import shortened
from pipeline.files import is_number
from pipeline.trained import PredictError

CALIBRATION_KEYS = ("configs", "correlation", "slope")          # scorers.Calibration's fields
REGION_WRITTEN = ("max_changed", "max_gain", "min_nodes")       # trust_region writes these always (None for tile)
MISSING = object()


def is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_list_of(value: object, check, length: int | None = None) -> bool:
    return isinstance(value, list) and (length is None or len(value) == length) and all(check(v) for v in value)


def refuse(path: Path, key: str, expected: str, found: object) -> None:
    what = "none (a guard file of an older format)" if found is MISSING else shortened(found)
    raise PredictError(f"{path}: key '{key}': expected {expected}; found {what}; run stage autotune again "
                       f"(dvc repro)")


def check_margin_by_distance(path: Path, key: str, steps: object) -> None:
    """None, or {"upto": [counts], "margin": [numbers >= 0], optionally "shrink": [numbers in 0..1]}, one per bin."""
    if steps is None:
        return
    if not isinstance(steps, Mapping) or not is_list_of(steps.get("upto"), is_count) or not steps["upto"]:
        refuse(path, key, "null or an object whose 'upto' lists the bins' block counts", steps)
    bins = len(steps["upto"])
    if not is_list_of(steps.get("margin"), lambda v: is_number(v, 0.0), bins):
        refuse(path, f"{key}.margin", f"{bins} finite margins >= 0 (one per bin)", steps.get("margin", MISSING))
    if "shrink" in steps and not is_list_of(steps["shrink"], lambda v: is_number(v, 0.0, 1.0), bins):
        refuse(path, f"{key}.shrink", f"{bins} slopes within 0..1 (one per bin)", steps["shrink"])


def check_guard(path: Path, table: Mapping, model: str) -> None:
    """PredictError naming `path` and the key unless `table` holds what the tool reads of `model`'s guard: its
    margin, weights and margin by distance, each weighted member's calibration, and the measured region."""
    entry = table["models"][model]
    if not is_number(entry["margin"], 0.0):
        refuse(path, f"models.{model}.margin", "a finite number >= 0", entry["margin"])
    weights = entry.get("weights", MISSING)
    if not isinstance(weights, Mapping) or not weights or not all(is_number(w, 0.0) for w in weights.values()):
        refuse(path, f"models.{model}.weights", "an object of the members' weights (finite numbers >= 0)", weights)
    check_margin_by_distance(path, f"models.{model}.margin_by_distance", entry.get("margin_by_distance", MISSING))
    calibrations = table.get("calibrations", MISSING)
    if not isinstance(calibrations, Mapping):
        refuse(path, "calibrations", "an object of the members' calibrations", calibrations)
    for name in weights:
        cal = calibrations.get(name, MISSING)
        if not isinstance(cal, Mapping) or sorted(cal) != list(CALIBRATION_KEYS) or not is_count(cal["configs"]) \
                or not is_number(cal["slope"]) or not is_number(cal["correlation"]):
            refuse(path, f"calibrations.{name}", "an object of a finite slope and correlation and a count of "
                   "configs", cal)
    for key in REGION_WRITTEN:
        value = table.get(key, MISSING)
        if value is not None and not (is_number(value, 0.0) if key == "max_gain" else is_count(value)):
            refuse(path, key, "null or a finite number >= 0" if key == "max_gain" else "null or a count", value)
    blocks = table.get("measured_blocks")
    if blocks is not None and not is_list_of(blocks, lambda kind: is_list_of(kind, is_count, 3)):
        refuse(path, "measured_blocks", "null or a list of [opcode, block, rank] counts", blocks)
