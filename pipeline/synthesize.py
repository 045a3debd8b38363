"""Stage synthesize: write the built-in TpuGraphs dataset (official npz layout) to paths.synthetic_dir.

`data.generator.builder` picks how: `programs` (the default presets) lowers the JAX program zoo (`pipeline.zoo`)
and costs it with the TPU cost model (`pipeline.synth.programs`); `templates` draws template graphs at real
sizes (`pipeline.templates`, only for memory benchmarks: data=synthetic_full).
`python -m pipeline.synthesize [overrides] [--stats]`. Real data (data.kind == "tpugraphs") has no synthesize
stage (dvc.yaml runs it once per `data.synthesized_by`, [] there): generating is refused in one line and
paths.synthetic_dir is never touched, so the built-in dataset a user's own root links its train and valid splits
from (`python -m pipeline.featurize --train-from`) survives `dvc repro` on that root. `--stats` only reads: it
prints the graphs, nodes, edges, configs and ceilings per collection and split from the stats.json of the dataset
already in paths.synthetic_dir, and writes nothing (the dataset is a DVC output).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig

from pipeline.errors import PipelineError, run_main, shortened
from pipeline.choices import SYNTH_BUILDERS
from pipeline.files import is_number, read_json
from pipeline.config import stage_args
from pipeline.synth import programs
from pipeline.settings.programs import program_settings
from pipeline.settings.templates import template_settings
from pipeline.templates.dataset import synthesize
from pipeline.tpugraphs.schema import STATS_FILE

STATS_FLAG = "--stats"
COUNTS = ("graphs", "nodes", "edges", "configs")           # stats.json's counts per collection and split
PROGRAMS, TEMPLATES = BUILDERS = SYNTH_BUILDERS          # data.generator.builder


def not_generated(cfg: DictConfig) -> str:
    """Why real data (data.kind != synthetic) has nothing to synthesize, and what to run instead."""
    return (f"data.kind={cfg.data.kind}: nothing to synthesize (the pipeline reads data.root={cfg.data.root}); "
            f"build the built-in dataset with a generated preset: python -m pipeline.synthesize data=programs")


def run(cfg: DictConfig, progress: bool = True) -> dict:
    """Generate the dataset into paths.synthetic_dir; returns the stats dict written to its stats.json. ValueError
    (nothing written) for real data."""
    out = Path(cfg.paths.synthetic_dir)
    if cfg.data.kind != "synthetic":
        raise ValueError(not_generated(cfg))
    check_replaceable(out)
    generator, collections = cfg.data.generator, list(cfg.data.collections)
    builders = {      # BUILDERS (the schema checked data.generator.builder through data.synthesized_by)
        PROGRAMS: lambda: programs.build(program_settings(generator, cfg.synthesize), collections,
                                         out, progress=progress, workers=int(cfg.synthesize.workers)),
        TEMPLATES: lambda: synthesize(template_settings(generator, cfg.synthesize), collections, out,
                                      progress=progress)}
    return builders[generator.builder]()


def check_replaceable(out: Path) -> None:
    """The dataset replaces paths.synthetic_dir whole: a file there, or a folder holding anything but a dataset this
    stage built (its stats.json), is refused in one line before any work (`paths.synthetic_dir=pipeline` would have
    deleted the source code once the dataset was built)."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / STATS_FILE).is_file())):
        raise PipelineError(f"paths.synthetic_dir={out}: a file, or a folder holding files this stage did not "
                            f"write, and it replaces that path whole; expected an absent or empty folder, or a "
                            f"dataset it built ({STATS_FILE})")


def format_stats(summary: dict) -> str:
    """A fixed-width table: one row per collection and split."""
    if not summary.get("synthesized"):
        return summary.get("note", "nothing synthesized")
    ceilings = summary.get("ceiling", {})
    lines = [f"{'collection':<20} {'split':<6} {'graphs':>6} {'nodes':>9} {'edges':>9} {'configs':>10} "
             f"{'ceiling':>8}"]
    for slug, splits in summary["collections"].items():
        for split, row in splits.items():
            ceiling = ceilings.get(slug, {}).get(split)
            lines.append(f"{slug:<20} {split:<6} {row['graphs']:>6} {row['nodes']:>9} {row['edges']:>9} "
                         f"{row['configs']:>10} {'' if ceiling is None else f'{ceiling:.4f}':>8}")
    return "\n".join(lines)


def read_stats(synthetic_dir: str | Path) -> dict:
    """The stats.json of the dataset in synthetic_dir; SystemExit (one line) when it has not been built."""
    path = Path(synthetic_dir) / STATS_FILE
    if not path.is_file():
        raise SystemExit(f"error: {path}: no dataset stats there; build the dataset first (`dvc repro synthesize`)")
    return check_stats(path, read_json(path))


def check_stats(path: Path, stats: dict) -> dict:
    """`stats` when format_stats can show it: collections {slug: {split: {graphs, nodes, edges, configs}}} counts
    >= 0, ceilings {slug: {split: finite number or null}}; else PipelineError naming the file and key (a cut-short or
    edited file was a KeyError / AttributeError traceback, a ceiling of text or 400 digits a format traceback)."""
    def refuse(key: str, value, expected: str) -> PipelineError:
        return PipelineError(f"{path}: key {key!r}: expected {expected}, found {shortened(value)}; rebuild the "
                             f"dataset (`dvc repro synthesize`)")
    if not stats.get("synthesized"):
        return stats
    counts = f"counts >= 0 of {', '.join(COUNTS)}"
    for key, table in (("collections", stats.get("collections")), ("ceiling", stats.get("ceiling", {}))):
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise refuse(key, table, "an object {collection: {split: " + (counts if key == "collections" else
                                                                          "ceiling") + "}}")
        for slug, splits in table.items():
            for split, row in splits.items():
                if key == "collections" and not (isinstance(row, dict) and all(is_number(row.get(c), low=0)
                                                                                for c in COUNTS)):
                    raise refuse(f"{key}.{slug}.{split}", row, counts)
                if key == "ceiling" and not (row is None or is_number(row)):
                    raise refuse(f"{key}.{slug}.{split}", row, "a finite number or null")
    return stats


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, cfg = stage_args(__doc__, argv, collection=False, add_flags=lambda parser: parser.add_argument(
        STATS_FLAG, action="store_true", help="print graphs, nodes and configs per collection and split of the built dataset (writes nothing)"))
    if args.stats:                          # read-only: never rewrites the DVC-tracked dataset
        print(format_stats(read_stats(cfg.paths.synthetic_dir)))
        return
    if cfg.data.kind != "synthetic":        # real data: one line, paths.synthetic_dir untouched
        raise SystemExit(f"error: {not_generated(cfg)}")
    run(cfg)


if __name__ == "__main__":
    run_main(main)
