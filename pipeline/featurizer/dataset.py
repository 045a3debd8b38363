"""Write HLO programs as TpuGraphs test graphs in the official npz folder layout (command featurize's library).

Per program: `OUT/npz/layout/xla/{random,default}/test/<stem>.npz` (the whole module) and
`OUT/npz/tile/xla/test/<stem>_<hash>.npz` (one per distinct fused kernel). Every program is parsed (and
--train-from's train and valid folders found) before anything is written; each collection's test folder is staged
(`OUT/.featurize-staging/`), validated with the data layer and then swapped in whole, so a crash leaves the
previous folder. `OUT/featurize.json` records the files written
(`files`, per collection) and the fusion instructions each tile file stands for (`kernels`: identical kernels of a
program share a file, as in the official data); a rerun replaces them, but an OUT whose test (or, with
--train-from, train/valid) folders hold other graphs, e.g. an existing dataset root, is refused. A program that
gives no graph is named with the reason (`Featurized.empty`); when none gives one, nothing is written.
`link_train_from` links an existing root's train and valid splits beside them.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from tqdm import tqdm

from pipeline.errors import shortened
from pipeline.files import blocking_file, read_json, remove, resolved, write_json
from pipeline.featurizer.tile_configs import TileSearch, tile_configs
from pipeline.hlo.featurize import (HloModule, LayoutProgram, SearchParams, layout_configs, layout_program,
                                    parse_module, read_hlo_text, tile_programs, why_no_layout_node,
                                    why_no_tile_kernel)
from pipeline.seeds import graph_rng
from pipeline.tpugraphs import writer
from pipeline.tpugraphs.dataset import Collection, load_graph, npz_root, validate_node_config_feat
from pipeline.tpugraphs.schema import LABELLED_SPLITS
from pipeline.tpugraphs.schema import NPZ_SUBDIR

TEST_SPLIT = "test"
STEM_SUFFIXES = (".txt", ".hlo", ".pbtxt")
TILE_HASH_DIGITS = 16              # tile stems: <program>_<16 hex>, as the official `<benchmark>_<hash>`
STAGING, RETIRED = ".staging", ".retired"
STAGING_ROOT = ".featurize-staging"   # OUT/<this>/<slug>/: test files written, validated, then swapped in
OWNED = "featurize.json"           # OUT/<this>: the test files featurize wrote there (a rerun may replace them)


@dataclass(frozen=True)
class FeaturizeSettings:
    seed: int
    collections: tuple[Collection, ...]
    layout_configs: int
    tile_configs: int
    max_config_nodes: int | None
    chunk_configs: int
    search: SearchParams
    tile_search: TileSearch


def program_stem(path: Path) -> str:
    """File name without .txt/.hlo/.pbtxt suffixes, characters outside [A-Za-z0-9._-] replaced by '_'."""
    name = path.name
    while any(name.endswith(s) and len(name) > len(s) for s in STEM_SUFFIXES):
        name = name[:name.rfind(".")]
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def read_programs(paths: Sequence[Path]) -> list[tuple[str, HloModule]]:
    """(stem, parsed module) per file; raises HloParseError / ValueError before anything is written."""
    programs, seen = [], {}
    for path in paths:
        stem = program_stem(path)
        if stem in seen:
            again = os.path.realpath(path) == os.path.realpath(seen[stem])     # the same file (or a link to it)
            raise ValueError(f"{path}: given twice; give each program once" if again else
                             f"{path}: same file stem {stem!r} as {seen[stem]}; rename one of them")
        seen[stem] = path
        programs.append((stem, parse_module(read_hlo_text(path), str(path))))
    return programs


def _graph_arrays(program) -> dict[str, np.ndarray]:
    return {"node_feat": program.node_feat, "node_opcode": program.node_opcode, "edge_index": program.edge_index}


def write_layout(program: LayoutProgram, stem: str, collection: Collection, s: FeaturizeSettings,
                 folder: Path) -> int:
    """Write one layout test file of `collection`'s search; returns 1, or 0 when nothing is configurable."""
    if len(program.config_node_ids) == 0:
        return 0
    rng = graph_rng(s.seed, "featurize-layout", collection.slug, program_digest(program))   # the graph, not the name
    ids, feat = layout_configs(program, collection.search, s.layout_configs, s.search, rng, s.max_config_nodes)
    chunks = (feat[i:i + s.chunk_configs].astype(np.float32) for i in range(0, len(feat), s.chunk_configs))
    writer.write_layout_file(folder / f"{stem}.npz", _graph_arrays(program), ids, program.node_splits, len(feat),
                             chunks, [np.zeros(len(feat))], test=True)
    return 1


def program_digest(program) -> str:
    """Hex digest of a layout or kernel graph's arrays: identical graphs share it, whatever their file's name. The
    sampled configurations are drawn from it, so a renamed program gets the same files under its new stem."""
    h = hashlib.sha256()
    for array in _graph_arrays(program).values():
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()[:TILE_HASH_DIGITS]


def write_tiles(module: HloModule, stem: str, collection: Collection, s: FeaturizeSettings,
                folder: Path) -> dict[str, list[str]]:
    """Write one tile test file per distinct fused kernel; returns {file name: the fusion instructions it stands
    for, as the text names them} (identical kernels share one file)."""
    written: dict[str, list[str]] = {}
    for program in tile_programs(module):
        digest = program_digest(program)
        name = f"{stem}_{digest}.npz"
        if name in written:
            written[name].append(program.fusion)
            continue
        written[name] = [program.fusion]
        rng = graph_rng(s.seed, "featurize-tile", digest)
        config_feat = tile_configs(program, s.tile_configs, s.tile_search, rng)
        zeros = np.zeros(len(config_feat), dtype=np.int64)
        writer.write_tile_file(folder / name, _graph_arrays(program), config_feat, zeros, zeros, test=True)
    return written


def validate_folder(folder: Path, collection: Collection) -> None:
    """Load every file of a staged test folder with the data layer (raises TpuGraphsFormatError)."""
    for path in sorted(folder.glob("*.npz")):
        validate_node_config_feat(load_graph(path, collection, TEST_SPLIT))


def _swap_in(staged: Path, final: Path) -> None:
    """Replace `final` (a folder or a link) by `staged` with renames only."""
    retired = final.with_name(final.name + RETIRED)
    remove(retired)
    if final.is_symlink() or final.exists():
        final.rename(retired)
    staged.rename(final)
    remove(retired)


def train_folders(root: Path, collections: Sequence[Collection]) -> list[tuple[Collection, str, Path]]:
    """(collection, split, folder) of `root`'s train and valid folders of each collection; FileNotFoundError
    naming the first one missing (featurize checks them all before it writes anything)."""
    source, folders = npz_root(root), []
    for collection in collections:
        for split in LABELLED_SPLITS:
            folder = source / collection.subdir / split
            if not folder.is_dir():
                raise FileNotFoundError(f"--train-from {root}: no {collection.name} {split} folder ({folder})")
            folders.append((collection, split, folder))
    return folders


def link_train_from(root: Path, out: Path, collections: Sequence[Collection]) -> int:
    """Hard-link (copy across file systems) `root`'s train and valid files of each collection into out/npz.

    Links are plain files: they survive the source folder being rewritten or removed (e.g. `dvc repro synthesize`
    rebuilding data/synthetic) and DVC hashes them like any file. Returns the number of files linked.
    """
    linked = 0
    for collection, split, folder in train_folders(root, collections):
        final = out / NPZ_SUBDIR / collection.subdir / split
        staged = final.with_name(split + STAGING)
        remove(staged)
        staged.mkdir(parents=True)
        for path in sorted(folder.glob("*.npz")):
            try:
                os.link(path, staged / path.name)
            except OSError:
                shutil.copy2(path, staged / path.name)
            linked += 1
        _swap_in(staged, final)
    return linked


@dataclass(frozen=True)
class Featurized:
    """What `featurize` wrote: test files per collection slug, and why each program that gave none gave none."""

    counts: dict[str, int]
    empty: dict[str, str]          # program path -> the reason (no configurable node, no fused kernel)


def written_before(out: Path) -> dict[str, set[str]]:
    """File names per collection slug that an earlier `featurize` into `out` wrote (its OWNED record)."""
    path = out / OWNED
    if not path.is_file():
        return {}
    files = read_json(path).get("files", {})
    if not isinstance(files, dict) or not all(isinstance(names, list) and all(isinstance(n, str) for n in names)
                                              for names in files.values()):
        raise ValueError(f"{path}: key 'files' expected {{collection slug: [file name, ...]}} as featurize writes it, "
                         f"found {shortened(files)} (edited by hand?); write to a new --out folder")
    return {slug: set(names) for slug, names in files.items()}


def kernel_names(out: Path) -> dict[str, list[str]]:
    """{tile file name: the fusion instructions it stands for} from the OWNED record of a `featurize` into `out`
    (empty when there is none, or it predates the record of kernels)."""
    path = out / OWNED
    if not path.is_file():
        return {}
    return {name: list(fusions) for names in read_json(path).get("kernels", {}).values()
            for name, fusions in names.items()}


def check_out(out: Path, collections: Sequence[Collection], train_from: Path | None) -> None:
    """Refuse an `out` that is (or lies below) a file, or whose folders that featurize replaces hold graphs it did
    not write there: a test folder's files not in its OWNED record, or (with `train_from`) a train or valid folder's
    files that `train_from` does not hold (an existing dataset root: featurize replaces those folders whole)."""
    blocking = blocking_file(out)
    if blocking is not None:
        raise ValueError(f"--out {out}: {blocking} is a file; expected a folder (the dataset root to write)")
    owned = written_before(out)
    for c in collections:
        replaced = {TEST_SPLIT: owned.get(c.slug, set())}
        if train_from is not None:
            replaced.update({split: {p.name for p in (npz_root(train_from) / c.subdir / split).glob("*.npz")}
                             for split in LABELLED_SPLITS})
        for split, ours in replaced.items():
            final = out / NPZ_SUBDIR / c.subdir / split
            blocking = blocking_file(final)     # made or swapped in after the graphs: the staging folder was left
            if blocking is not None:
                raise ValueError(f"--out {out}: {blocking} is a file; expected a folder (featurize writes {final})")
            foreign = sorted({p.name for p in final.glob("*.npz")} - ours) if final.is_dir() else []
            if foreign:
                raise ValueError(f"--out {out}: {final} holds {len(foreign)} graph(s) featurize did not write (e.g. "
                                 f"{foreign[0]}: an existing dataset?); featurize replaces that folder, so write to "
                                 f"a new one")


def no_graph_reason(program: LayoutProgram, module: HloModule) -> str:
    """Why a program gave no file in any collection (the layout reason; the tile reason)."""
    return f"{why_no_layout_node(program.graph)}; {why_no_tile_kernel(module)}"


def featurize(paths: Sequence[Path], out: Path, s: FeaturizeSettings, train_from: Path | None = None,
              progress: bool = True) -> Featurized:
    """Write every program's test files under out/npz (see the module docstring). Nothing is written, and `out`
    is left as it was, when no program gives a graph."""
    if train_from is not None and resolved(out, "--out") == resolved(train_from, "--train-from"):
        raise ValueError(f"--out {out} is the --train-from root: its test split would be replaced; write elsewhere")
    check_out(out, s.collections, train_from)
    programs = read_programs([Path(p) for p in paths])
    made_out, staging = not out.exists(), out / STAGING_ROOT
    folders = {c.slug: staging / c.slug for c in s.collections}
    counts, empty, kernels = dict.fromkeys(folders, 0), {}, {}
    try:
        remove(staging)
        for folder in folders.values():
            folder.mkdir(parents=True)
        for path, (stem, module) in zip(paths, tqdm(programs, desc="featurize", unit="program",
                                                    disable=not progress)):
            got, layout = 0, layout_program(module)                # one layout graph for every layout collection
            for c in s.collections:
                if c.kind == "tile":
                    tiles = write_tiles(module, stem, c, s, folders[c.slug])
                    kernels.setdefault(c.slug, {}).update(tiles)
                    n = len(tiles)
                else:
                    n = write_layout(layout, stem, c, s, folders[c.slug])
                counts[c.slug], got = counts[c.slug] + n, got + n
            if not got:
                empty[str(path)] = no_graph_reason(layout, module)
        written = [c for c in s.collections if counts[c.slug]]
        for c in written:
            validate_folder(folders[c.slug], c)
        if train_from is not None:              # every folder to link is there before anything is written
            train_folders(train_from, written)
    except BaseException:                       # a crash or a refused file: `out` as it was
        remove(out if made_out else staging)
        raise
    if not written:                             # nothing to write: `out` as it was (and gone if this made it)
        remove(out if made_out else staging)
        return Featurized(counts, empty)
    for c in s.collections:                     # a collection without graphs gets no folder (an empty split is
        final = out / NPZ_SUBDIR / c.subdir / TEST_SPLIT   # refused by the data layer), old files of a rerun go too
        if counts[c.slug]:
            final.parent.mkdir(parents=True, exist_ok=True)
            _swap_in(folders[c.slug], final)
        else:
            remove(final)
    remove(staging)
    write_json({"files": {c.slug: sorted(p.name for p in (out / NPZ_SUBDIR / c.subdir / TEST_SPLIT).glob("*.npz"))
                          for c in written},
                "kernels": {slug: names for slug, names in kernels.items() if names}}, out / OWNED)
    if train_from is not None:
        link_train_from(train_from, out, written)
    return Featurized(counts, empty)
