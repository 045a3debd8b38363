"""Command predict: rank the configurations of any graph file (or folder of them) with the trained models.

`python -m pipeline.predict PATH [--model ensemble|gnn|lgbm|heuristic] [--collection C] [--top K] [--out CSV]
[overrides]` reads `.npz` files in the official format, prunes each one the way stage `prune` pruned its
collection (the hops, padding and train-fitted node-feature normaliser saved in `<pruned_dir>/<slug>/`, through
`pipeline.pruning.graph`), scores every configuration with the model the stages wrote under
`<models_dir>/<model>/<slug>/` (the ensemble blends its members with the weights stage `ensemble` chose, read
from `<metrics_dir>/ensemble/<slug>.json`), prints the K predicted fastest configurations per graph and writes
the whole ranking to a CSV (columns RANKING_COLUMNS; rank 1 = predicted fastest).

A file's collection comes from its path when it sits in the official tree (`.../layout/xla/random/...`), else
from `--collection`. A graph of another kind than the model's (a tile file for a layout model) is refused with
one line. The CSV goes to `--out`, or `<predict.run_dir>/<model>-<slug or mixed>-<time>.csv`; a path inside a
folder the DVC stages write is refused.

A single `*.hlo` or `*.txt` file whose first line (after comments) starts with `HloModule` is HLO module text
(`.compile().as_text()`, an XLA dump): it is featurised first (`pipeline.featurizer`, settings `featurize`) into the
collections of `featurize.collections`, and each graph is ranked with its own collection's model (a tile graph's
printed line names its fusion instructions). Any other file, `--top` below 1, an unknown `--collection`, a
truncated model.txt and ensemble weights recorded on other data are refused in one line (PredictError);
docs/predict.md lists what is accepted.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from pipeline.config import stage_args, stage_output_key
from pipeline.errors import run_main
from pipeline.files import atomic_path, blocking_file, given, output_error, resolved, write_csv
from pipeline.hlo.lexing import first_statement
from pipeline.tpugraphs.dataset import COLLECTIONS, GRAPH_SUFFIX, Collection, check_file_name, warn_left_out
from pipeline.tpugraphs.npz import list_members
from pipeline.trained import MODELS, PredictError, graph_scores, prune_new_graph

RANKING_COLUMNS = ["source_file", "graph_file", "collection", "model", "graph_id", "rank", "config_index", "score"]
GRAPHS_SUFFIX = "_graphs"           # HLO text: the graphs ranked are kept beside the CSV, in `<csv stem>_graphs/`
HLO_SUFFIXES = (".hlo", ".txt")     # HLO module text: `.hlo`, `.hlo.txt`, XLA dumps (`*.before_optimizations.txt`)
HLO_FIRST_WORD = "HloModule"
KERNELS_SHOWN = 4                   # fusion names printed per tile graph (identical kernels share one graph)
UTF8_BOM = "\ufeff"                 # an editor's byte-order mark before `HloModule`: the HLO reader skips it too
HLO_SNIFF_BYTES = 1 << 16           # read to find that first word, past `//` and `/* ... */` notes


def file_kind(path: Path) -> str:
    """`tile` or `layout`, from the keys of an npz (config_feat vs node_config_feat)."""
    members = list_members(path)
    if "node_config_feat" in members:
        return "layout"
    if "config_feat" in members:
        return "tile"
    raise PredictError(f"{path}: neither node_config_feat (layout) nor config_feat (tile) found; "
                       f"keys {sorted(members)}")


def path_collection(path: Path) -> Collection | None:
    """The collection whose folder (e.g. layout/xla/random) the path lies in, or None."""
    parts = Path(path).resolve().parts
    for collection in COLLECTIONS:
        sub = collection.subdir.parts
        if any(parts[i:i + len(sub)] == sub for i in range(len(parts) - len(sub) + 1)):
            return collection
    return None


def input_files(path: Path) -> list[Path]:
    """The npz files to rank: the file itself, or every `*.npz` under a folder (sorted); the folder's other files
    are named in one warning line on stderr (left out, never silently: a `graph.NPZ` is not ranked). An entry of
    the folder named `*.npz` that is no file (a folder, a dangling link) is refused naming it."""
    path = Path(path)
    files = sorted(map(check_file_name, path.rglob(f"*{GRAPH_SUFFIX}"))) if path.is_dir() else [path]
    if not files or not path.is_dir() and not path.is_file():
        raise PredictError(f"{path}: expected an .npz graph file or a folder holding some")
    entry = next((f for f in files if not f.is_file()), None)
    if entry is not None:
        found = f"a dangling link to {os.readlink(entry)}" if entry.is_symlink() and not entry.exists() else \
            "a folder" if entry.is_dir() else "not a regular file"
        raise PredictError(f"{entry}: expected an .npz graph file (in {path}); found {found}")
    if path.is_dir():
        ranked = set(files)
        others = sorted(str(f.relative_to(path)) for f in path.rglob("*") if f.is_file() and f not in ranked)
        warn_left_out(path, others, "files")
    return files


def resolve_collection(path: Path, given: str | None) -> Collection:
    """The model collection a file is ranked with; refuses a file whose kind differs from it."""
    collection = Collection.parse(given) if given else path_collection(path)
    if collection is None:
        raise PredictError(f"{path}: collection unknown (not under an official layout/... or tile/xla folder); "
                           f"pass --collection")
    kind = file_kind(path)
    if kind != collection.kind:
        raise PredictError(f"{path}: a {kind} graph, but the {collection.name} model ranks {collection.kind} graphs")
    return collection


def ranking_table(path: Path, collection: Collection, model: str, graph_id: str, scores: np.ndarray) -> pd.DataFrame:
    """Every config of one graph, best first (stable on ties): RANKING_COLUMNS."""
    order = np.argsort(scores, kind="stable")
    return pd.DataFrame({"source_file": str(path), "graph_file": str(path), "collection": collection.name, "model": model,
                         "graph_id": graph_id, "rank": np.arange(1, len(order) + 1), "config_index": order,
                         "score": np.asarray(scores, dtype=np.float64)[order]}, columns=RANKING_COLUMNS)


def rank_files(cfg: DictConfig, files: Sequence[Path], model: str, collection: str | None) -> pd.DataFrame:
    """The ranking of every file (all checked before any is scored)."""
    from tqdm import tqdm

    jobs = [(f, resolve_collection(f, collection)) for f in files]
    tables = []
    with tempfile.TemporaryDirectory(prefix="predict-") as work:
        for i, (path, coll) in enumerate(tqdm(jobs, desc=f"predict {model}", unit="graph", disable=len(jobs) < 2)):
            graph = prune_new_graph(cfg, path, coll, Path(work) / str(i))
            tables.append(ranking_table(path, coll, model, graph.graph_id, graph_scores(cfg, model, coll, path, graph)))
    return pd.concat(tables, ignore_index=True)


def sniff_first_statement(path: Path) -> str:
    """The first statement of a text file, reading no more than it takes: HLO_SNIFF_BYTES, doubled while what was
    read is all comment or blank, an unclosed `/*`, or may end inside the word (a 70 KB `/* ... */` note before
    `HloModule` was refused as not HLO text although the reader accepts it)."""
    head = b""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(max(len(head), HLO_SNIFF_BYTES))
            head += chunk
            first = first_statement(head.decode("utf-8", "replace").removeprefix(UTF8_BOM))
            if not chunk or not (first == "" or first.startswith("/*") or HLO_FIRST_WORD.startswith(first)):
                return first


def is_hlo_text(path: Path) -> bool:
    """A single file named `*.hlo` or `*.txt` (`.hlo.txt`, an XLA dump, `.compile().as_text()` ...) whose first
    line that is neither blank nor comment starts with `HloModule`; any other file that is not an `.npz` is refused
    (PredictError)."""
    if not path.is_file() or path.suffix == GRAPH_SUFFIX:
        return False
    if path.suffix not in HLO_SUFFIXES:
        raise PredictError(f"{path}: expected an {GRAPH_SUFFIX} graph file, a folder of them, or HLO module text "
                           f"(a {' or '.join(HLO_SUFFIXES)} file)")
    first = sniff_first_statement(path)
    if not first.startswith(HLO_FIRST_WORD):
        raise PredictError(f"{path}: expected HLO module text, whose first line (after comments) starts with "
                           f"'{HLO_FIRST_WORD}'; found {first[:60]!r}")
    return True


def rank_path(cfg: DictConfig, path: Path, model: str, collection: str | None, work: Path) -> pd.DataFrame:
    """Rank an npz file or folder; HLO text is first featurised (`pipeline.featurizer`, settings `featurize`) into the
    collections of `featurize.collections` under `work` (official layout; `keep_graphs` keeps them), each graph then
    ranked by its own collection's model."""
    try:
        path.stat()
    except FileNotFoundError:
        pass                                # refused below, saying what is expected
    except OSError as error:                # a name too long, a folder this user may not search, ...
        raise PredictError(f"{path}: cannot read ({error.strerror or error})") from None
    if not is_hlo_text(path):
        return rank_files(cfg, input_files(path), model, collection)
    if collection is not None:
        raise PredictError(f"{path}: HLO text yields graphs of several collections; drop --collection")
    from pipeline.featurizer.dataset import featurize
    from pipeline.settings.featurize import featurize_settings
    from pipeline.hlo.featurize import HloParseError

    try:
        done = featurize([path], work, featurize_settings(cfg), progress=False)
    except (HloParseError, ValueError) as error:
        raise PredictError(str(error)) from None
    files = sorted(work.rglob(f"*{GRAPH_SUFFIX}"))
    if not files:
        raise PredictError(f"{path}: no graph to rank ({done.empty.get(str(path), 'none written')})")
    table = rank_files(cfg, files, model, None)
    table["source_file"] = str(path)
    return table


def kernel_label(fusions: Sequence[str]) -> str:
    """' kernel <fusion>' for a tile graph featurised from HLO text (its fusion instructions, as the text names them;
    identical kernels share a graph: ' kernel a (= b, c)', at most KERNELS_SHOWN names), '' for any other graph."""
    if not fusions:
        return ""
    same = list(fusions[1:KERNELS_SHOWN])
    more = len(fusions) - 1 - len(same)
    tail = ", ".join(same) + (f" and {more} more" if more else "")
    return f" kernel {fusions[0]}" + (f" (= {tail})" if same else "")


def graphs_dir(out: Path) -> Path:
    """Where the graphs featurised from HLO text are kept: beside the CSV `out`, `<its stem>_graphs/`."""
    return out.with_name(out.stem + GRAPHS_SUFFIX)


def keep_graphs(table: pd.DataFrame, work: Path, dest: Path, source: Path) -> pd.DataFrame:
    """Copy the graphs featurised under `work` (official layout) to `dest`, replacing an earlier run's (atomically),
    and point the table's `graph_file` there: a row's `config_index` is the row of that file's `config_feat` /
    `node_config_feat` (the configurations predict sampled and ranked, which the CSV alone could not name). Refused
    where `dest` is a file, holds the input `source`, or holds anything but an earlier run's graphs."""
    blocking = blocking_file(dest)
    if blocking is not None:
        raise PredictError(f"{dest}: {blocking} is a file; expected a folder for the graphs ranked (beside --out)")
    if dest.resolve() in source.resolve().parents:
        raise PredictError(f"{dest}: holds the input {source}; the graphs ranked would replace it, so choose another "
                           f"--out")
    written = {entry.name for entry in work.iterdir()}          # npz/ and featurize's record of it
    if dest.is_dir() and any(entry.name not in written for entry in dest.iterdir()):
        raise PredictError(f"{dest}: holds files predict did not write; expected no folder there, or an earlier "
                           f"run's graphs ({', '.join(sorted(written))}; the graphs ranked are kept beside --out)")
    try:
        with atomic_path(dest) as tmp:
            shutil.copytree(work, tmp)
    except OSError as error:
        raise output_error("the graphs folder", dest, error) from None
    return table.assign(graph_file=[str(dest / Path(f).relative_to(work)) for f in table["graph_file"]])


def output_path(cfg: DictConfig, out: str | None, model: str, slugs: set[str], source: Path) -> Path:
    """--out, or a new file under predict.run_dir; refused where it would land on the input (`source` or a file in
    it), below a file, on a folder, or inside a folder the DVC stages write."""
    if out is None:
        tag = next(iter(slugs)) if len(slugs) == 1 else "mixed"
        out = Path(cfg.predict.run_dir) / f"{model}-{tag}-{time.strftime('%Y%m%d-%H%M%S')}.csv"
    path = resolved(out, "--out")
    if os.path.isdir(path):                 # False, not OSError, where the system cannot look (a name too long)
        raise PredictError(f"--out {out}: a folder; expected the path of the CSV file to write")
    blocking = blocking_file(path, itself=False)
    if blocking is not None:
        raise PredictError(f"--out {out}: {blocking} is a file; expected a folder to hold the CSV")
    ranked = resolved(source)
    if path == ranked or (os.path.isdir(source) and ranked in path.parents and path.suffix == GRAPH_SUFFIX):
        raise PredictError(f"--out {out}: the input {path if os.path.isdir(source) else source}; the CSV would "
                           f"replace it, so choose another path")
    key = stage_output_key(cfg, path)
    if key is not None:
        raise PredictError(f"--out {out}: inside paths.{key} ({cfg.paths[key]}), which DVC stages write; "
                           f"choose a path elsewhere")
    return Path(out)


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=given, help="an .npz graph file (official format), a folder of them, or HLO text")
    parser.add_argument("--model", choices=MODELS, default=None, help="default: predict.model")
    parser.add_argument("--collection", default=None, help="the model's collection when the path does not say it")
    parser.add_argument("--top", type=int, default=None, help="configs printed per graph (default: predict.top)")
    parser.add_argument("--out", type=given, default=None, help="the CSV written (default: under predict.run_dir)")


def main(argv: Sequence[str] | None = None) -> None:
    args, cfg = stage_args(__doc__.splitlines()[0], argv, collection=False, add_flags=add_flags,
                           dvc_outputs=False)
    model = args.model or str(cfg.predict.model)
    top = int(cfg.predict.top if args.top is None else args.top)
    if top < 1:
        raise PredictError(f"--top {top}: expected a count >= 1 (the configs printed per graph)")
    if args.collection is not None:
        try:
            Collection.parse(args.collection)
        except ValueError as error:
            raise PredictError(f"--collection: {error}") from None
    if args.out is not None:
        output_path(cfg, args.out, model, set(), Path(args.path))   # refused before the ranking, not after it
    with tempfile.TemporaryDirectory(prefix="predict-hlo-") as work:
        table = rank_path(cfg, Path(args.path), model, args.collection, Path(work))
        slugs = {Collection.parse(c).slug for c in table["collection"]}
        out = output_path(cfg, args.out, model, slugs, Path(args.path))
        featurised = any(Path(work).iterdir())
        kernels = {}
        if featurised:
            from pipeline.featurizer.dataset import kernel_names

            kernels = kernel_names(Path(work))                      # tile graph file -> its fusion instructions
            table = keep_graphs(table, Path(work), graphs_dir(out), Path(args.path))
    for (source, _, graph_id), rows in table.groupby(["source_file", "collection", "graph_id"], sort=False):
        best = ", ".join(str(i) for i in rows["config_index"].head(top))
        kernel = kernel_label(kernels.get(Path(rows["graph_file"].iloc[0]).name, []))
        print(f"{source}{kernel} ({rows['collection'].iloc[0]}, {model}): top {min(top, len(rows))} of {len(rows)}: "
              f"{best}")
    try:
        write_csv(table, out)
    except OSError as error:
        raise output_error("--out" if args.out is not None else "predict.run_dir", out, error) from None
    print(f"wrote {out} ({len(table)} rows)")
    if featurised:
        print(f"kept the graphs ranked in {graphs_dir(out)}: config_index is the row of graph_file's configurations "
              f"(tile: config_feat, layout: node_config_feat)")


if __name__ == "__main__":
    run_main(main)
