"""Stage synthesize: write the built-in synthetic TpuGraphs dataset (official npz layout) to paths.synthetic_dir.

`python -m pipeline.synthesize [overrides] [--stats]`. With data.kind == "tpugraphs" nothing is generated: the
folder gets only a stats.json saying so (the pipeline then reads data.root). `--stats` prints graphs, nodes,
edges and configs per collection and split.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig

from pipeline.config import stage_args
from pipeline.synth import writer
from pipeline.synth.dataset import Settings, synthesize

STATS_FLAG = "--stats"


def run(cfg: DictConfig, progress: bool = True) -> dict:
    """Generate (or, for real data, only describe) the dataset; returns the stats dict written to stats.json."""
    out = Path(cfg.paths.synthetic_dir)
    if cfg.data.kind != "synthetic":
        summary = {"kind": str(cfg.data.kind), "synthesized": False,
                   "note": f"data.kind={cfg.data.kind}: nothing synthesized; the pipeline reads data.root"}
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        writer.write_stats(tmp / writer.STATS_FILE, summary)
        shutil.rmtree(out, ignore_errors=True)   # the stage's own output folder: nothing stale stays behind
        tmp.rename(out)
        return summary
    settings = Settings.from_cfg(cfg.data.generator, cfg.synthesize)
    return synthesize(settings, list(cfg.data.collections), out, progress=progress)


def format_stats(summary: dict) -> str:
    """A fixed-width table: one row per collection and split."""
    if not summary.get("synthesized"):
        return summary.get("note", "nothing synthesized")
    lines = [f"{'collection':<20} {'split':<6} {'graphs':>6} {'nodes':>9} {'edges':>9} {'configs':>10}"]
    for slug, splits in summary["collections"].items():
        for split, row in splits.items():
            lines.append(f"{slug:<20} {split:<6} {row['graphs']:>6} {row['nodes']:>9} {row['edges']:>9} "
                         f"{row['configs']:>10}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, cfg = stage_args(__doc__, argv, collection=False, add_flags=lambda parser: parser.add_argument(
        STATS_FLAG, action="store_true", help="print graphs, nodes and configs per collection and split"))
    show_stats = args.stats
    summary = run(cfg)
    if show_stats:
        print(format_stats(summary))


if __name__ == "__main__":
    main()
