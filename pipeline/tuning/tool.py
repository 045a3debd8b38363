"""The autotune tool on a user's program: HLO text in, `<out>/<program>.json` of layouts and tiles out.

Layouts: the unoptimised text's layout graph, searched with `autotune.collection`'s model (`--model`) from the
compiler default within the region and guarded by the margin that stage autotune measured on the valid split
(`pipeline.tuning.guard`). Tiles (when optimised text is given): every fused kernel, scored with
`autotune.tile_collection`'s model. Everything is checked (texts parsed, collections and
models found) before the search starts; errors are one line naming the file or key.
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from pipeline.files import blocking_file, output_error, write_json
from pipeline.seeds import graph_rng
from pipeline.tpugraphs.dataset import Collection
from pipeline.config import stage_output_key
from pipeline.featurizer.dataset import program_digest, program_stem
from pipeline.trained import PredictError
from pipeline.tuning.program import read_program, template_graph
from pipeline.tuning.report import changes, frozen_beside, unmeasured
from pipeline.tuning.scorers import load_guide
from pipeline.tuning.chain import guarded_pick
from pipeline.tuning.space import LayoutSpace, SpaceError
from pipeline.tuning.tiles import tune_tiles
from pipeline.tuning.verify import AutotuneSettings
from pipeline.hlo.featurize import read_hlo_text, why_no_layout_node
from pipeline.settings.sections import tile_search


@dataclass(frozen=True)
class Request:
    """One tool run: the program's texts and the command's flags (None: the `autotune` group's value)."""

    program: Path
    optimized: Path | None
    model: str | None
    budget: int | None
    collection: str | None
    out: Path | None


def checked_collection(cfg: DictConfig, name: str, kind: str, key: str) -> Collection:
    """The collection `name` when it is of `kind` and among data.collections (else a one-line PredictError)."""
    try:
        collection = Collection.parse(name)
    except ValueError as err:
        raise PredictError(f"{key}={name!r}: {err}") from None
    if collection.kind != kind:
        raise PredictError(f"{key}={name}: a {collection.kind} collection; autotune needs a {kind} model here")
    if collection.slug not in {Collection.parse(c).slug for c in cfg.data.collections}:
        raise PredictError(f"{key}={name}: not among data.collections {list(cfg.data.collections)} of "
                           f"data={cfg.data.name}; its models were not trained")
    return collection


def program_key(program) -> str:
    """The search's seed key: digests of the layout graph and of every fused kernel's graph (`program_digest`), so
    the same program gives the same pick whatever its file name, comments or source metadata (an optimised text's
    FileNames / StackFrames blocks name the script that compiled it)."""
    return "-".join([program_digest(program.layout), *(program_digest(t) for t in program.tiles)])


def output_dir(cfg: DictConfig, out: Path | None) -> Path:
    """--out or autotune.out_dir; refused inside a folder the DVC stages write, or where a file stands."""
    folder = Path(out) if out is not None else Path(cfg.autotune.out_dir)
    blocking, name = blocking_file(folder), "--out" if out is not None else "autotune.out_dir"
    if blocking is not None:
        raise PredictError(f"{name} {folder}: {blocking} is a file; expected a folder for <program>.json")
    key = stage_output_key(cfg, folder, name)
    if key is not None:
        raise PredictError(f"--out {folder}: inside paths.{key} ({cfg.paths[key]}), which DVC stages write")
    return folder


def search_layouts(cfg: DictConfig, s: AutotuneSettings, program, space: LayoutSpace, guide, budget: int, key: str,
                   work: Path) -> dict:
    """The layout half of the JSON: the guarded pick of `space` scored with `guide`'s model (docs/autotune.md)."""
    template = template_graph(cfg, program, guide.collection, work)
    scorer, nodes = guide.scorer(template), len(template.node_opcode)
    rule = guide.rule.for_program(nodes, s.guard.small_program_scale)
    found = guarded_pick(space, scorer, s.search, budget, graph_rng(s.seed, "autotune", key), rule,
                         s.guard.chain, s.guard.step_budget)
    pick, score, result = found.candidate, found.score, found.search
    out = {"evaluations": result.evaluations, "seconds": result.seconds,
           "evaluations_per_s": result.evaluations / max(result.seconds, 1e-9),
           "beyond_max_gain": result.beyond_max_gain, "predicted_runtime_ratio": float(np.exp(score)),
           "guarded": not found.kept, "layouts": space.layouts(pick),
           "changes": changes(space, pick, scorer, score, int(cfg.autotune.top_changes), s.search.batch,
                              rule.calibrated),
           "unmeasured_blocks": unmeasured(space), "frozen_beside_unmeasured": frozen_beside(space),
           "pruned_nodes": nodes, "margin_scale": rule.scale}
    if s.guard.chain:                                   # the kept guarded steps (pipeline.tuning.chain)
        out["chain_steps"] = [vars(step) for step in found.steps]
    return out


def no_layouts(why: str) -> dict:
    """The layout half of the JSON for a program with fused kernels but no configurable node: nothing searched,
    the compiler default (no layout set), and why."""
    return {"evaluations": 0, "seconds": 0.0, "evaluations_per_s": 0.0, "beyond_max_gain": 0,
            "predicted_runtime_ratio": 1.0, "guarded": False, "layouts": [], "changes": [], "unmeasured_blocks": [],
            "frozen_beside_unmeasured": 0, "pruned_nodes": 0, "margin_scale": 1.0, "layouts_not_searched": why}


def autotune(cfg: DictConfig, request: Request) -> tuple[dict, Path]:
    """Search the program's configurations; returns (the JSON object, the path it was written to). A program with
    no configurable node is refused (SpaceError) unless its optimised text gives fused kernels: then only tiles are
    searched and the JSON says why its layouts were not (`layouts_not_searched`)."""
    s = AutotuneSettings.from_cfg(cfg.autotune)
    model, budget = request.model or s.model, int(request.budget or s.budget)
    collection = checked_collection(cfg, request.collection or str(cfg.autotune.collection), "layout",
                                    "autotune.collection")
    folder = output_dir(cfg, request.out)
    name = program_stem(request.program)
    text = read_hlo_text(request.program)
    optimized = read_hlo_text(request.optimized) if request.optimized else None
    program = read_program(name, text, str(request.program), optimized, str(request.optimized))
    key = program_key(program)                                  # the graphs, not the file name nor the metadata
    space, ids = None, program.layout.config_node_ids
    if not len(ids) and not program.tiles:                         # nothing to search: one line, both reasons
        tiles_why = "" if program.no_tiles is None else f"; {program.no_tiles}"
        raise SpaceError(f"{request.program}: {why_no_layout_node(program.layout.graph)}{tiles_why}")
    if len(ids):
        space = LayoutSpace.of(program.layout.graph, ids, str(request.program))
    if program.no_tiles is not None:
        print(f"warning: {program.no_tiles}, so no tiles to search", file=sys.stderr)
    guide = load_guide(cfg, model, collection)
    tile_guide = None
    if program.tiles:
        tile_collection = checked_collection(cfg, str(cfg.autotune.tile_collection), "tile",
                                             "autotune.tile_collection")
        tile_guide = load_guide(cfg, model, tile_collection)
    with tempfile.TemporaryDirectory(prefix="autotune-") as work:
        if space is None:
            layouts = no_layouts(f"{request.program}: {why_no_layout_node(program.layout.graph)}")
        else:
            space = space.only_kinds(guide.rule.measured_blocks).freeze_beside(s.guard.beside_unmeasured)
            layouts = search_layouts(cfg, s, program, space, guide, budget, key, Path(work))
        tiles = []
        if tile_guide is not None:
            search = tile_search(cfg.featurize.tile_search.min_tile, cfg.featurize.tile_search.cost)
            tiles = tune_tiles(cfg, list(program.tiles), tile_guide, search, int(cfg.autotune.tile.max_configs),
                               s.search.batch, Path(work), graph_rng(s.seed, "autotune-tile", key),
                               int(cfg.autotune.tile.candidates))
    out = {"program": name, "source": str(request.program), "model": model, "collection": collection.name,
           "budget": budget, **layouts, "guard": vars(guide.rule), "tiles": tiles}
    path = folder / f"{name}.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_json(out, path)
    except OSError as error:
        raise output_error("--out" if request.out is not None else "autotune.out_dir", folder, error) from None
    return out, path
