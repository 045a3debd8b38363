"""Stage prune: the npz files of one collection -> `<paths.pruned_dir>/<slug>/` pruned graphs (pipeline.pruned).

`python -m pipeline.prune --collection layout-xla-random [overrides]` processes train, valid and test:
k-hop subgraphs (pipeline.pruning.subgraph), -1 re-padding (pipeline.pruning.repad), config de-duplication streamed in chunks
(pipeline.pruning.dedup), and a node_feat normaliser fitted on train only (pipeline.pruning.normalize). Writes, all inside a
temporary folder renamed into place at the end (a crash leaves no folder DVC could take as complete):
- `index.csv` (pruned.INDEX_COLUMNS), `normalizer.json`, `report.json` (totals per split, skipped graphs, the
  relative runtime spread of identical train configs, `duplicate_spread`, which sets the GNN hinge's min_gap)
  and `<split>/<graph_id>/*.npy`, all byte-identical across runs (any `workers`);
and `<paths.metrics_dir>/prune/<slug>.json`, the summary for `dvc metrics show`, with the run's wall time and peak
RSS apart in `<paths.metrics_dir>/timings/prune/<slug>.json` (pipeline.timings).
"""
from __future__ import annotations

import json
import resource
from pathlib import Path

from tqdm import tqdm

from pipeline.errors import run_main
from pipeline.config import stage_args
from pipeline.files import atomic_path, write_json
from pipeline.parallel import ordered_map
from pipeline.pruning.normalize import ColumnStats, fit_normalizer
from pipeline.pruning.graph import GraphResult, prune_file, write_normalized
from pipeline.pruning.params import PruneParams
from pipeline.settings.prune import prune_settings
from pipeline.pruned import (COUNT_COLUMNS, INDEX_FILE, NORMALIZER_FILE, REPORT_FILE, WHOLE_GRAPH, collection_dir,
                             spread_summary, write_index)
from pipeline.tpugraphs.dataset import Collection, check_disjoint_splits, npz_root
from pipeline.tpugraphs.errors import TpuGraphsFormatError
from pipeline.tpugraphs.leaks import check_content_leaks
from pipeline.tpugraphs.schema import SPLITS
from pipeline.timings import Stopwatch, write_timings

STAGE = "prune"


def _peak_rss_mb() -> float:
    """Peak resident set size of this process and of its largest finished child, in MB (Linux ru_maxrss is KB)."""
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return round(peak / 1024, 1)


def split_totals(rows: list[dict]) -> dict:
    """Totals of the index rows per split (graphs and COUNT_COLUMNS)."""
    out = {}
    for split in SPLITS:
        split_rows = [r for r in rows if r["split"] == split]
        out[split] = {"graphs": len(split_rows), **{k: int(sum(r[k] for r in split_rows)) for k in COUNT_COLUMNS}}
    return out


def check_rankable(done: list[GraphResult], folder: Path) -> None:
    """TpuGraphsFormatError unless train and valid each hold a graph with two configurations of different runtimes
    (once repeated configurations are merged): without one, train teaches the models no order (LightGBM and the GNN
    trained on nothing and wrote models) and valid scores every model alike (a tied graph's Kendall tau is 0), and
    both went unnoticed."""
    for split, why in (("train", "to teach the models an order"), ("valid", "to score the models on")):
        graphs = [r for r in done if r.split == split]
        if graphs and not any(r.ranks for r in graphs):
            raise TpuGraphsFormatError(folder / split, None, f"a {split} graph with two configurations of different "
                                       f"runtimes ({why})", f"{len(graphs)} graph(s), each with one configuration "
                                       f"(repeats merged) or all its runtimes equal")


def prune_collection(root: str | Path, collection: str | Collection, pruned_dir: str | Path,
                     params: PruneParams) -> dict:
    """Prune every graph of one collection into `<pruned_dir>/<slug>/`; returns the report (also report.json).

    Raises:
        TpuGraphsFormatError: a graph fails validation (names the file), unless it is a train graph and
            `skip_invalid_train` is set (then it is skipped and listed in the report).
    """
    watch = Stopwatch()
    collection = Collection.parse(collection)
    root = npz_root(root)
    out = collection_dir(pruned_dir, collection.slug)
    with atomic_path(out) as tmp:
        tasks = []
        split_paths = check_disjoint_splits(root, collection)
        for split in SPLITS:
            (tmp / split).mkdir(parents=True)
            for path in split_paths[split]:
                tasks.append((path, collection, split, path.relative_to(root).as_posix(), params, tmp / split))
        results = ordered_map(prune_file, tasks, params.workers, f"prune {collection.slug}", "graph")
        skipped = []
        for result in results:
            if result.error is None:
                continue
            if result.split != "train" or not params.skip_invalid_train:
                raise result.error
            skipped.append({"split": result.split, "graph_id": result.graph_id, "source_file": result.source_file,
                            "error": str(result.error)})
        done = [r for r in results if r.error is None]
        check_content_leaks(((r.split, root / r.source_file, r.digest, r.copy) for r in done))
        check_rankable(done, root / collection.subdir)
        train_stats = ColumnStats.combine(r.stats for r in done if r.split == "train")
        normalizer = fit_normalizer(train_stats, params.log_mask, params.pad_value, params.drop_constant,
                                    where=f"{root / collection.subdir / 'train'}", min_std=params.min_std)
        normalizer.save(tmp / NORMALIZER_FILE)
        for result in tqdm(done, desc=f"normalise {collection.slug}", unit="graph", mininterval=1.0):
            write_normalized(tmp / result.split / result.graph_id, normalizer, root / result.source_file)
        rows = [r.row for r in done]
        write_index(rows, tmp / INDEX_FILE)
        report = {"collection": collection.name, "source": collection.subdir.as_posix(),
                  "params": {"hops": WHOLE_GRAPH if params.hops is None else params.hops,
                             "pad_value": params.pad_value, "dedup": params.dedup},
                  "splits": split_totals(rows), "skipped": skipped,
                  "duplicate_spread": spread_summary(r.spread for r in done if r.split == "train"),
                  "node_feat_columns": len(normalizer.columns)}
        # report.json is part of the DVC output, so it holds only what the input and config determine;
        # the run's wall time and memory go to the metrics file alone.
        (tmp / REPORT_FILE).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
        report.update(wall_s=watch.elapsed(), peak_rss_mb=_peak_rss_mb())
    return report


def metrics_summary(report: dict) -> dict:
    """The numbers `dvc metrics show` displays: totals and keep ratios (per-split totals: report.json); what the input
    and config determine, so an identical rerun writes the same file (its seconds and memory: `write_metrics`)."""
    totals = {k: sum(s[k] for s in report["splits"].values()) for k in ("graphs", *COUNT_COLUMNS)}
    return {**totals,
            "node_keep_ratio": round(totals["nodes_pruned"] / max(totals["nodes"], 1), 6),
            "edge_keep_ratio": round(totals["edges_pruned"] / max(totals["edges"], 1), 6),
            "config_keep_ratio": round(totals["configs_dedup"] / max(totals["configs"], 1), 6),
            "skipped": len(report["skipped"]), "node_feat_columns": report["node_feat_columns"],
            "duplicate_groups": report["duplicate_spread"]["groups"],
            "duplicate_spread_median": (report["duplicate_spread"]["percentiles"] or [None] * 51)[50]}


def write_metrics(report: dict, metrics_dir: str | Path, slug: str) -> dict:
    """Write `metrics_summary(report)` to `<metrics_dir>/prune/<slug>.json` and the run's wall seconds and peak
    memory to its timings file (`pipeline.timings`), each atomically; returns the summary."""
    summary = metrics_summary(report)
    write_json(summary, Path(metrics_dir) / STAGE / f"{slug}.json")
    write_timings(metrics_dir, STAGE, slug, {"seconds": report["wall_s"], "peak_rss_mb": report["peak_rss_mb"]})
    return summary


def main(argv=None) -> None:
    args, cfg = stage_args(__doc__, argv)
    collection = Collection.parse(args.collection)
    params = prune_settings(cfg, collection)
    report = prune_collection(cfg.data.root, collection, cfg.paths.pruned_dir, params)
    summary = write_metrics(report, cfg.paths.metrics_dir, collection.slug)
    print(f"prune {collection.name}: {summary['graphs']} graphs, nodes {summary['nodes']} -> "
          f"{summary['nodes_pruned']}, edges {summary['edges']} -> {summary['edges_pruned']}, configs "
          f"{summary['configs']} -> {summary['configs_dedup']}, {summary['skipped']} skipped, "
          f"{report['wall_s']:.1f} s")


if __name__ == "__main__":
    run_main(main)
