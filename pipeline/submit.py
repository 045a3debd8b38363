"""Stage `submit`: turn test predictions into one validated Kaggle CSV (`ID,TopConfigs`).

`python -m pipeline.submit` writes `<submissions_dir>/<submit.name>.csv` from `<predictions_dir>/<submit.model>/`;
`python -m pipeline.submit --check FILE [overrides]` validates any CSV against the configured dataset and exits
non-zero with the list of problems. A CSV Kaggle would reject never reaches submissions/: it is validated first,
then written atomically. On synthetic data the stage also scores the submission against the hidden truth.
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from pipeline.scoring import metrics
from pipeline.config import stage_args
from pipeline.errors import PipelineError, run_main, shortened
from pipeline.files import given, write_csv, write_json
from pipeline.scoring.evaluate import load_truth
from pipeline.predictions import Predictions, load_predictions, predictions_path
from pipeline.tpugraphs.dataset import Collection, graph_paths, load_graph, npz_root
from pipeline.tpugraphs.schema import OFFICIAL_TEST_GRAPHS

HEADER = ["ID", "TopConfigs"]
SEPARATOR = ";"


class SubmissionError(PipelineError):
    """A submission Kaggle would reject; the message lists every problem found."""


def row_id(collection: Collection, graph_id: str) -> str:
    """Kaggle row ID: `tile:xla:<stem>` or `layout:<source>:<search>:<stem>`."""
    return f"{collection.name}:{graph_id}"


def top_configs(kind: str, scores: np.ndarray, tile_top_k: int) -> list[int]:
    """Config indices fastest first: every index for layout, the top-k distinct ones for tile (all if fewer)."""
    order = metrics.top_k_indices(scores, len(scores))
    return [int(i) for i in (order[:tile_top_k] if kind == "tile" else order)]


def build_rows(collection: Collection, preds: Predictions, tile_top_k: int) -> pd.DataFrame:
    """One submission row per graph of `preds`."""
    rows = [{"ID": row_id(collection, g), "TopConfigs": SEPARATOR.join(map(str, top_configs(collection.kind, s, tile_top_k)))}
            for g, s in preds.items()]
    return pd.DataFrame(rows, columns=HEADER)


def expected_rows(data_root: str | Path, collections: Sequence[Collection]) -> dict[str, tuple[str, int]]:
    """Every test graph of the dataset: row ID -> (collection kind, number of configs)."""
    root = npz_root(data_root)
    expected = {}
    for collection in collections:
        for path in graph_paths(root, collection, "test"):
            graph = load_graph(path, collection, "test")
            expected[row_id(collection, graph.graph_id)] = (collection.kind, graph.n_configs)
    return expected


def parse_indices(text: str) -> list[int]:
    """'3;0;2' -> [3, 0, 2]; raises ValueError on anything else (ASCII digits only: str.isdigit also takes
    full-width or superscript digits, which Kaggle's parser refuses)."""
    parts = str(text).split(SEPARATOR)
    if not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise ValueError(f"not a ';'-separated list of non-negative integers: {shortened(str(text))}")
    try:
        return [int(p) for p in parts]
    except ValueError:      # over Python's 4300-digit limit for int(str): its message names sys.set_int_max_str_digits
        raise ValueError(f"not a list of config indices (one has over 4300 digits): {shortened(str(text))}") from None


def check_row(kind: str, n_configs: int, indices: list[int], tile_top_k: int) -> str | None:
    """The problem with one row's indices, or None."""
    if len(set(indices)) != len(indices):
        return "repeats a config index"
    if any(i >= n_configs for i in indices):
        return f"index {shortened(max(indices))} out of range for {n_configs} configs"
    if kind == "layout" and len(indices) != n_configs:
        return f"has {len(indices)} indices; a layout row must be a full permutation of {n_configs} configs"
    if kind == "tile" and len(indices) != min(tile_top_k, n_configs):
        return f"has {len(indices)} indices; a tile row needs the top {min(tile_top_k, n_configs)}"
    return None


def collection_of(row_id_: str) -> str:
    """The collection name of a row ID (`layout:xla:random:<stem>` -> `layout:xla:random`)."""
    return str(row_id_).rsplit(":", 1)[0]


def missing_collections(table: pd.DataFrame, expected: Mapping[str, tuple[str, int]]) -> list[str]:
    """A problem for every collection of `expected` with no row at all in `table`."""
    present = {collection_of(i) for i in table["ID"]}
    wanted: dict[str, int] = {}
    for row_id_ in expected:
        wanted[collection_of(row_id_)] = wanted.get(collection_of(row_id_), 0) + 1
    return [f"no rows at all for collection {name} (expected {n})" for name, n in sorted(wanted.items())
            if name not in present]


def official_count_notes(table: pd.DataFrame, collections: Sequence[Collection]) -> list[str]:
    """data=tpugraphs: rows per collection that differ from the official test set (894 rows in all). Notes, not
    problems: a local copy of the data may hold other test graphs; Kaggle expects exactly these counts."""
    counts = table["ID"].map(collection_of).value_counts()
    problems = []
    for collection in collections:
        found, official = int(counts.get(collection.name, 0)), OFFICIAL_TEST_GRAPHS[collection.name]
        if found != official:
            problems.append(f"{collection.name}: {found} rows; the official test set has {official} graphs "
                            f"({sum(OFFICIAL_TEST_GRAPHS.values())} rows in all)")
    return problems


def validate_submission(table: pd.DataFrame, expected: Mapping[str, tuple[str, int]], tile_top_k: int) -> list[str]:
    """Every problem that would make Kaggle reject `table` (empty list = valid)."""
    if list(table.columns) != HEADER:
        return [f"header is {shortened(list(table.columns))}; expected {HEADER}"]
    problems = missing_collections(table, expected)       # IDs and values from the CSV are echoed `shortened`
    problems += [f"duplicate ID {shortened(i)}" for i in sorted(table["ID"][table["ID"].duplicated()].unique())]
    problems += [f"unknown ID {shortened(i)}" for i in sorted(set(table["ID"]) - set(expected))]
    problems += [f"missing ID {i!r}" for i in sorted(set(expected) - set(table["ID"]))]
    for row_id_, text in zip(table["ID"], table["TopConfigs"]):
        if row_id_ not in expected:
            continue
        kind, n_configs = expected[row_id_]
        try:
            problem = check_row(kind, n_configs, parse_indices(text), tile_top_k)
        except ValueError as err:
            problem = str(err)
        if problem:
            problems.append(f"{row_id_}: {problem}")
    return problems


def write_submission(table: pd.DataFrame, path: str | Path, expected: Mapping[str, tuple[str, int]],
                     tile_top_k: int) -> None:
    """Validate, then write atomically; raises SubmissionError (and writes nothing) if invalid."""
    problems = validate_submission(table, expected, tile_top_k)
    if problems:
        raise SubmissionError(f"{path}: {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    write_csv(table, path)


def ranking_scores(indices: list[int], n_configs: int) -> np.ndarray:
    """Scores implied by a submitted ranking: position in the list, unlisted configs after all listed ones."""
    scores = np.full(n_configs, float(len(indices)))
    scores[indices] = np.arange(len(indices))
    return scores


def score_submission(cfg: DictConfig, table: pd.DataFrame, collections: Sequence[Collection]) -> dict | None:
    """Score the CSV itself against the hidden synthetic test truth; None on real data."""
    by_id = dict(zip(table["ID"], table["TopConfigs"]))
    scores = {}
    for collection in collections:
        truth = load_truth(cfg, collection, "test")
        if truth is None:
            return None
        preds = Predictions()
        for graph_id, runtimes in truth.items():
            preds[graph_id] = ranking_scores(parse_indices(by_id[row_id(collection, graph_id)]), len(runtimes))
        scores[collection.name] = metrics.score_predictions(collection.kind, preds, truth)["score"]
    return {"test": {"collections": scores, "kaggle_score": metrics.kaggle_score(scores)}}


def check_file(path: str | Path, cfg: DictConfig) -> list[str]:
    """Validate any CSV against the configured dataset's test graphs."""
    collections = [Collection.parse(c) for c in cfg.data.collections]
    table, problem = read_submission(path)
    if table is None:
        return [problem]
    return validate_submission(table, expected_rows(cfg.data.root, collections), cfg.submit.tile_top_k)


def read_submission(path: str | Path) -> tuple[pd.DataFrame | None, str | None]:
    """(the CSV as strings, None), or (None, the one-line reason it cannot be read).

    Rows with more fields than the header are refused: pandas would take the extra leading fields as an index and
    shift the rest under ID and TopConfigs (a trailing ',' on each row, or an unnamed first column). A pipe or a
    device is refused unread: a named pipe without a writer waited forever, `/dev/zero` filled the memory, and
    `<(...)` was read empty the second time (`check_notes` reads the file first)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None, f"cannot read {path}: not a regular file (a pipe, device or socket); expected a CSV file"
        table = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
        if not isinstance(table.index, pd.RangeIndex):
            return None, (f"cannot read {path}: its first row has {table.index.nlevels + table.shape[1]} fields, the "
                          f"header {shortened(list(table.columns))} {table.shape[1]} (an extra column, or a trailing "
                          f"',' on each row)")
        return table, None
    except UnicodeDecodeError as err:
        return None, f"cannot read {path}: not UTF-8 text (byte {err.start}: {err.reason})"
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        return None, f"cannot read {path}: {str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}"


def check_notes(path: str | Path, cfg: DictConfig) -> list[str]:
    """What `--check` reports besides problems: on data=tpugraphs, row counts unlike the official test set."""
    table, _ = read_submission(path)
    if cfg.data.kind != "tpugraphs" or table is None or list(table.columns) != HEADER:
        return []
    return official_count_notes(table, [Collection.parse(c) for c in cfg.data.collections])


def run(cfg: DictConfig) -> Path:
    """Build, validate and write the submission; score it on synthetic data; log it to wandb."""
    from pipeline import tracking

    collections = [Collection.parse(c) for c in cfg.data.collections]
    parts = [build_rows(c, load_predictions(predictions_path(cfg.paths.predictions_dir, cfg.submit.model, c.slug, "test")),
                        cfg.submit.tile_top_k) for c in collections]
    table = pd.concat(parts, ignore_index=True)
    path = Path(cfg.paths.submissions_dir) / f"{cfg.submit.name}.csv"
    write_submission(table, path, expected_rows(cfg.data.root, collections), cfg.submit.tile_top_k)
    result = {"rows": len(table), "model": cfg.submit.model, **(score_submission(cfg, table, collections) or {})}
    write_json(result, Path(cfg.paths.metrics_dir) / "submit.json")
    with tracking.start_run(cfg, "submit") as wandb_run:
        wandb_run.summary.update({k: v for k, v in result.items() if k != "model"})
        tracking.log_artifact(wandb_run, cfg.submit.name, "submission", path)
    print(f"wrote {path}: {len(table)} rows, validated" + (
        f"; synthetic test Kaggle score {result['test']['kaggle_score']:.4f}" if "test" in result else ""))
    return path


def main(argv: Sequence[str] | None = None) -> None:
    args, cfg = stage_args(__doc__.splitlines()[0], argv, collection=False, add_flags=lambda parser: parser.add_argument(
        "--check", metavar="FILE", type=given, help="validate FILE against the configured dataset and exit"))
    if args.check:
        for note in check_notes(args.check, cfg):
            print(f"note: {note}", file=sys.stderr)
        problems = check_file(args.check, cfg)
        if problems:
            print(f"{args.check}: INVALID, {len(problems)} problem(s):\n  " + "\n  ".join(problems), file=sys.stderr)
            raise SystemExit(1)
        print(f"{args.check}: valid submission")
        return
    run(cfg)


if __name__ == "__main__":
    run_main(main)
