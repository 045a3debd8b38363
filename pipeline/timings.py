"""Stage timings, kept out of the outputs that other stages depend on.

Wall-clock seconds differ on every run, so a file holding them changes when nothing else did: `dvc status` then
reports the stage's dependants as changed and DVC's run cache cannot stand in for a rerun. Every model stage
therefore writes its timings to their own file, `<metrics_dir>/timings/<stage>/<slug>.json` (a `cache: false`
metric in dvc.yaml that no stage depends on; `dvc metrics show` lists it), and nowhere else: the metrics files,
curves, checkpoints and models a stage writes are byte-identical on an identical rerun.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Mapping

from pipeline.files import write_json

TIMINGS_DIR = "timings"
DIGITS = 3                     # seconds are rounded to milliseconds


def timings_file(metrics_dir: str | Path, stage: str, slug: str) -> Path:
    """`<metrics_dir>/timings/<stage>/<slug>.json`: the stage's seconds for one collection."""
    return Path(metrics_dir) / TIMINGS_DIR / stage / f"{slug}.json"


class Stopwatch:
    """Seconds since it was made (`elapsed()`), rounded to milliseconds."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        return round(time.perf_counter() - self.started, DIGITS)


def write_timings(metrics_dir: str | Path, stage: str, slug: str, timings: Mapping) -> Path:
    """Write a stage's timings of one collection (atomic); returns the file's path."""
    path = timings_file(metrics_dir, stage, slug)
    write_json(dict(timings), path)
    return path
