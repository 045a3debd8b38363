"""Stage `summary`: one number per experiment, the Kaggle score of every model, in `<metrics_dir>/summary.json`.

    python -m pipeline.summary                          # the stage (dvc repro runs it)
    python -m pipeline.summary --show                   # the leaderboard: models x splits beside the ceiling
    python -m pipeline.summary --show --experiments     # one row per DVC experiment, best first

Reads the metrics file each model stage wrote per collection (`<metrics_dir>/<model>/<slug>.json`, see
pipeline/scoring/evaluate.py) and writes, per model and split, the Kaggle score, and the dataset's ceiling when
the metrics files know it (pipeline/scoring/leaderboard.py):

    {"<model>": {"<split>": kaggle}, "ceiling": {"<split>": kaggle}}

The Kaggle score is the leaderboard's: the unweighted mean of the collection scores, i.e. the tile:xla score
(`2 - best of top 5 / best`, averaged over graphs) and the four layout Kendall taus (averaged over graphs), over
the collections `data.collections` configures (all five for a full run, so it equals the leaderboard's mean).
A split a metrics file lacks (the real test split has no truth) is left out of that model, never counted as zero.
`dvc metrics show` prints it as one short row; `--show --experiments` ranks the experiments by it.
Key `autotune` carries stage autotune's mean share of the oracle's gain over the programs it counts and the pick's
share of the oracle's summed log gain over every program (`<metrics_dir>/autotune.json`, "all": {"share": mean,
"programs": n, "log_share": pick}; the spread, the baselines and the programs listed apart stay in autotune.json);
`dvc exp show --sort-by metrics/summary.json:autotune.share` ranks by it.

It also lays out the review page of `dvc plots show` (dvc.yaml's top-level `plots:`, grouped per collection):
`<plots_dir>/summary/models/<slug>.csv` (graph_id, model, score: every model's valid score per graph, the
model-vs-model comparison), `<plots_dir>/summary/ranks/<slug>.csv` (model, graph_id, true_rank, predicted_rank),
`<plots_dir>/summary/gnn_curves.csv` (collection, seed, epoch, loss, valid_score: one line per collection and
member seed), read from the model stages' plots (a missing one is a one-line error naming it),
`<plots_dir>/summary/autotune.csv` (program, search, runtime_vs_default: stage autotune's pick, oracle and
baselines per built-in test program and layout collection, over the compiler default's runtime), and
`summary.page_template`, the HTML page DVC fills with the charts, with Vega inlined so it renders offline
(pipeline/plots_page.py).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping, Sequence

from omegaconf import DictConfig

import pandas as pd

from pipeline.errors import PipelineError, run_main, shortened
from pipeline import notebook_data as reports
from pipeline import plots_page
from pipeline.config import stage_args
from pipeline.files import atomic_path, is_number, read_json, write_json
from pipeline.scoring import leaderboard, metrics
from pipeline.scoring.evaluate import metrics_file
from pipeline.tpugraphs.dataset import Collection

SUMMARY_NAME = "summary.json"
AUTOTUNE = "autotune"                  # summary.json's key for stage autotune (not a model)
AUTOTUNE_NAME = "autotune.json"        # stage autotune's metrics (pipeline/autotune.py)
STAGE = "summary"                      # its folder under plots_dir
AUTOTUNE_CHART = "autotune.csv"        # stage autotune's review chart, in that folder
COMPARED_SPLIT = "valid"               # the split every model is scored on with truth, real data included


def summary_file(metrics_dir: str | Path) -> Path:
    """`<metrics_dir>/summary.json`: the per-model Kaggle scores (`dvc metrics show`, `dvc exp show`)."""
    return Path(metrics_dir) / SUMMARY_NAME


def read_collection_metrics(path: Path) -> dict:
    """One stage's metrics JSON of one collection; a missing or malformed file is a one-line error naming it."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics file; run the stage that writes it first (dvc repro)")
    return read_json(path)


def split_summary(scores: Mapping[str, float]) -> dict:
    """{"kaggle": mean of the collection scores, "collections": how many, "<slug>": score ...} of one split."""
    return {"kaggle": metrics.kaggle_score(scores), "collections": len(scores), **dict(scores)}


def check_summary(summary: Mapping, path: Path) -> None:
    """PipelineError naming `path` and the key unless each model maps splits to finite scores (or to null, or to
    {"kaggle": score} as earlier runs nested them) and `autotune` is an object: one edited or mended by hand was
    an AttributeError traceback, a string one line without the file, a NaN shown as 'nan'."""
    for model, scores in summary.items():
        values = None
        if isinstance(scores, Mapping):
            values = [scores.get(k) for k in ("share", "log_share")] if model == AUTOTUNE else \
                [v.get("kaggle") if isinstance(v, Mapping) else v for v in scores.values()]
        if values is None or not all(v is None or is_number(v) for v in values):
            expected = "an object of stage autotune's shares" if model == AUTOTUNE else "{split: finite Kaggle score}"
            raise PipelineError(f"{path}: key {model!r}: expected {expected} as stage summary writes it; found "
                                f"{shortened(scores)}; run `python -m pipeline.summary` again")


def model_summary(per_collection: Mapping[str, Mapping], splits: Sequence[str], where: str) -> dict:
    """Summaries of one model's splits from {slug: metrics dict}; a split is kept when every collection has it.

    A split present in some collections and missing in others is an error (the mean would mix collections).
    """
    result = {}
    for split in splits:
        for slug, m in per_collection.items():
            entry = m.get(split)
            score = entry.get("score") if isinstance(entry, Mapping) else entry
            if split in m and not (isinstance(entry, Mapping) and is_number(score)):
                raise PipelineError(f"{where}/{slug}.json: key '{split}.score': expected a finite score as the stage "
                                    f"writes it; found {shortened(score)}; run the stage again (dvc repro)")
        present = {slug: m[split]["score"] for slug, m in per_collection.items() if split in m}
        if not present:
            continue
        if len(present) != len(per_collection):
            missing = sorted(set(per_collection) - set(present))
            raise ValueError(f"{where}: split {split!r} is scored in {sorted(present)} but not in {missing}")
        result[split] = split_summary(present)
    return result


def summarize(metrics_dir: str | Path, models: Sequence[str], collections: Sequence[Collection],
              splits: Sequence[str]) -> dict:
    """{model: {split: {...}}} from the metrics files of `models` x `collections` under metrics_dir."""
    return {model: model_summary(collection_metrics(metrics_dir, model, collections), splits,
                                 f"{Path(metrics_dir) / model}") for model in models}


def collection_metrics(metrics_dir: str | Path, model: str, collections: Sequence[Collection]) -> dict:
    """{slug: metrics dict} of one model stage."""
    return {c.slug: read_collection_metrics(metrics_file(metrics_dir, model, c.slug)) for c in collections}


def summary_ceiling(metrics_dir: str | Path, model: str, collections: Sequence[Collection],
                    splits: Sequence[str]) -> dict[str, float | None]:
    """The dataset's ceiling per split, as the Kaggle score (from one model's metrics files, which record it)."""
    per_collection = collection_metrics(metrics_dir, model, collections)
    return {split: leaderboard.split_ceiling(per_collection, split) for split in splits}


def found(table_and_missing: tuple[pd.DataFrame, list[Path]], what: str) -> pd.DataFrame:
    """The table of a notebook_data loader; FileNotFoundError naming the first missing file."""
    table, missing = table_and_missing
    if missing:
        raise FileNotFoundError(f"{missing[0]}: no {what} file; run the stage that writes it first (dvc repro)")
    return table


def review_tables(plots_dir: str | Path, models: Sequence[str], slugs: Sequence[str]) -> dict[str, pd.DataFrame]:
    """{relative csv path: table} of the grouped review charts (see the module docstring), from the model stages'
    per-graph scores, rank scatters and GNN curves."""
    stages = {m: reports.MODEL_STAGES.get(m, m) for m in models}
    graphs = found(reports.per_graph(plots_dir, slugs, stages), "per-graph score")
    graphs = graphs[graphs["split"] == COMPARED_SPLIT]
    ranks = pd.concat([found(reports.rank_scatter_points(plots_dir, slugs, m), "rank scatter").assign(model=m)
                       for m in models], ignore_index=True)
    tables = {}
    for slug in slugs:
        tables[f"models/{slug}.csv"] = graphs.loc[graphs["collection"] == slug, ["graph_id", "model", "score"]]
        tables[f"ranks/{slug}.csv"] = ranks.loc[ranks["collection"] == slug,
                                                ["model", "graph_id", "true_rank", "predicted_rank"]]
    if "gnn" in stages:
        curves = found(reports.gnn_curves(plots_dir, slugs), "gnn curve")
        tables["gnn_curves.csv"] = curves[["collection", "seed", "epoch", "loss", "valid_score"]]
    return tables


def autotune_table(metrics_dir: str | Path) -> pd.DataFrame:
    """The review chart of stage autotune: per built-in test program and layout collection, each search's runtime
    over the compiler default's (`notebook_data.autotune_ratios`; no rows on data without built-in programs)."""
    return reports.autotune_ratios(found(reports.autotune_runtimes(metrics_dir), "autotune metrics"))


def write_review(tables: dict[str, pd.DataFrame], folder: Path) -> None:
    """Write the review tables under `folder`, replacing it whole (nothing stale from other collections stays)."""
    with atomic_path(folder) as tmp:
        for name, table in tables.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            table.to_csv(tmp / name, index=False)


def autotune_summary(metrics_dir: str | Path) -> dict:
    """Stage autotune's mean share of the oracle's gain, the programs it counts and the pick's share of the oracle's
    summed log gain, from `<metrics_dir>/autotune.json` (one-line error when it or a key is missing)."""
    overall = read_collection_metrics(Path(metrics_dir) / AUTOTUNE_NAME).get("all")
    for key in ("share", "log_share"):
        if not isinstance(overall, dict) or not isinstance(overall.get(key), dict):
            raise ValueError(f"{Path(metrics_dir) / AUTOTUNE_NAME}: key 'all.{key}' missing; re-run stage autotune")
    return {"share": overall["share"]["mean"], "programs": overall["share"]["n"],
            "log_share": overall["log_share"].get("pick")}                              # the rest: autotune.json


def run(cfg: DictConfig) -> dict:
    """Summarise the configured models over the configured collections and write summary.json, the review
    charts' tables and the offline page template."""
    collections = [Collection.parse(c) for c in cfg.data.collections]
    models = list(cfg.summary.models)
    splits = list(cfg.summary.splits)
    detail = summarize(cfg.paths.metrics_dir, models, collections, splits)
    ceiling = summary_ceiling(cfg.paths.metrics_dir, models[0], collections, splits)
    summary = leaderboard.flat_summary(detail, ceiling)
    summary[AUTOTUNE] = autotune_summary(cfg.paths.metrics_dir)
    tables = review_tables(cfg.paths.plots_dir, models, [c.slug for c in collections])
    tables[AUTOTUNE_CHART] = autotune_table(cfg.paths.metrics_dir)
    page = plots_page.page_template(str(cfg.summary.vega_lite_version))
    write_review(tables, Path(cfg.paths.plots_dir) / STAGE)
    plots_page.write_template(page, cfg.summary.page_template)
    write_json(summary, summary_file(cfg.paths.metrics_dir))
    return summary


def show(cfg: DictConfig) -> str:
    """The workspace's leaderboard from summary.json (a missing file is a one-line error naming it)."""
    path = summary_file(cfg.paths.metrics_dir)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no summary; run `dvc repro` (or `python -m pipeline.summary`) first")
    splits = list(cfg.summary.splits)
    summary = read_json(path)
    check_summary(summary, path)
    autotune = summary.pop(AUTOTUNE, None) or {}
    table = leaderboard.workspace_table(summary, splits, str(cfg.summary.rank_split))
    share = "" if autotune.get("share") is None else (f"\nautotune: mean share of the oracle's gain "
                                                        f"{autotune['share']:.3f} over {autotune.get('programs')} programs")
    if share and autotune.get("log_share") is not None:
        share += f", {autotune['log_share']:.3f} of its summed log gain"
    return f"{table}{share}\n(Kaggle score: the mean over {len(cfg.data.collections)} collection(s); {path})"


def show_experiments(cfg: DictConfig) -> str:
    """One row per DVC experiment from `dvc exp show --json`, best first."""
    import json
    import subprocess

    done = subprocess.run(["dvc", "exp", "show", "--json"], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: `dvc exp show --json` failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    path = summary_file(cfg.paths.metrics_dir).as_posix()
    rank = (str(cfg.summary.rank_model), str(cfg.summary.rank_split))
    return leaderboard.experiments_table(json.loads(done.stdout), path, list(cfg.summary.models), rank)


def markdown(cfg: DictConfig) -> str:
    """The results tables of README.md and docs/results.md, from the model stages' metrics files: models x splits
    beside the ceiling, then collections x models per split."""
    collections = [Collection.parse(c) for c in cfg.data.collections]
    per_model = {m: collection_metrics(cfg.paths.metrics_dir, m, collections) for m in cfg.summary.models}
    splits = list(cfg.summary.splits)
    tables = [leaderboard.markdown_summary(per_model, splits),
              *(leaderboard.markdown_collections(per_model, split) for split in splits)]
    return "\n\n".join(tables)


def add_flags(parser) -> None:
    parser.add_argument("--show", action="store_true", help="print the leaderboard (summary.json) and exit")
    parser.add_argument("--markdown", action="store_true",
                        help="with --show: the results tables of README.md and docs/results.md, as Markdown")
    parser.add_argument("--experiments", action="store_true",
                        help="with --show: one row per DVC experiment (dvc exp show --json), best first")


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, cfg = stage_args(__doc__.splitlines()[0], argv, collection=False, add_flags=add_flags,
                           dvc_outputs="--show" not in argv)          # --show writes nothing
    table_flag = "markdown" if args.markdown else "experiments" if args.experiments else None
    if table_flag and not args.show:                                # else the stage would run and rewrite its outputs
        raise SystemExit(f"error: --{table_flag} prints a table: expected it with --show (python -m pipeline.summary "
                         f"--show --{table_flag})")
    if args.show:
        try:
            print(show_experiments(cfg) if args.experiments else markdown(cfg) if args.markdown else show(cfg))
        except (FileNotFoundError, ValueError) as error:
            raise SystemExit(f"error: {error}") from None
        return
    run(cfg)
    print(show(cfg))


if __name__ == "__main__":
    run_main(main)
