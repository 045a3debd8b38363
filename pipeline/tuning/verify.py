"""Stage autotune: autotune every built-in test program and verify each pick with the cost model.

Per built-in test program (`data.generator`, builder `programs`) and layout collection of its source: the
program's layout graph as the dataset holds it (node_feat layout columns from the default configuration), the
model-guided search at `autotune.stage_budget` evaluations, the guard, and two baselines at the same budget: the
best of the featurizer's sample (`featurize.search`, what the Kaggle task ranks) and a random search, both ranked
by the model and guarded alike. Every pick is timed by the noise-free layout cost model against the compiler
default and the oracle (`pipeline.tuning.oracle`), which is computed once per program.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.costmodel.layout import LayoutCostModel, LayoutCostParams
from pipeline.files import read_json
from pipeline.hlo.featurize import layout_configs
from pipeline.hlo.node_features import with_layouts
from pipeline.pruned import REPORT_FILE, collection_dir, spread_quantile
from pipeline.seeds import graph_rng
from pipeline.settings.sections import layout_cost, search_params
from pipeline.tpugraphs.dataset import Collection
from pipeline.tuning.oracle import CostModelScorer, oracle_search
from pipeline.tuning.program import Program, template_graph
from pipeline.tuning.report import aggregate, share_of_gain
from pipeline.tuning.scorers import Guide, load_guide
from pipeline.tuning.search import SearchResult, SearchSettings, guard, run_search
from pipeline.tuning.space import LayoutSpace

PROGRAMS_BUILDER = "programs"


@dataclass(frozen=True)
class AutotuneSettings:
    """The `autotune` group (what both the tool and the stage read)."""

    model: str
    budget: int
    stage_budget: int
    seed: int
    search: SearchSettings
    noise_quantile: float
    calibration_configs: int
    oracle_budget: int
    oracle_random: int
    oracle_batch: int

    @classmethod
    def from_cfg(cls, cfg: Mapping) -> "AutotuneSettings":
        return cls(str(cfg["model"]), int(cfg["budget"]), int(cfg["stage_budget"]), int(cfg["seed"]),
                   SearchSettings.from_cfg(cfg["search"]), float(cfg["guard"]["noise_quantile"]),
                   int(cfg["calibration"]["configs"]), int(cfg["oracle"]["budget"]),
                   int(cfg["oracle"]["random_samples"]), int(cfg["oracle"]["batch"]))


def noise_margin(pruned_dir: str, collection: Collection, quantile: float) -> float:
    """log(1 + the `quantile` of the duplicate-runtime spread stage prune measured): the guard's margin."""
    path = collection_dir(pruned_dir, collection.slug) / REPORT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; run stage prune@{collection.slug} first (dvc repro)")
    spread = spread_quantile(read_json(path).get("duplicate_spread"), quantile, str(path))
    return float(np.log1p(spread or 0.0))


def builtin_test_programs(cfg: DictConfig) -> list:
    """The built-in test programs of the preset (none for a dataset that the programs builder did not make)."""
    generator = cfg.data.get("generator")
    if generator is None or generator.get("builder") != PROGRAMS_BUILDER:
        return []
    from pipeline.settings.programs import program_settings
    from pipeline.zoo.registry import programs

    s = program_settings(generator, cfg.synthesize)
    return [p for p in programs(s.programs, s.sizes, s.seed) if p.split == "test"]


def builtin_program(zoo_program, params: LayoutCostParams) -> Program:
    """The program's layout graph with node_feat's layout columns as the default configuration compiles it."""
    from pipeline.synth.programs import layout_graph_of

    layout = layout_graph_of(zoo_program)
    model = LayoutCostModel(layout.graph, layout.config_node_ids, params)
    return Program(zoo_program.name, layout, with_layouts(layout.node_feat, model.default_minor_to_major()), ())


def _best_guarded(scores: np.ndarray, candidates: np.ndarray, space: LayoutSpace, margin: float) -> np.ndarray:
    best = int(np.argmin(scores))
    return guard(SearchResult(candidates[best], float(scores[best]), len(scores), 0.0), space.default()[0], margin)[0]


def featurizer_baseline(program: Program, space: LayoutSpace, collection: Collection, scorer, n: int,
                        params: SearchParams, batch: int, margin: float, seed: int) -> np.ndarray:
    """The guarded best of n configurations sampled as `featurize` samples them, ranked by the model."""
    rng = graph_rng(seed, "autotune-featurizer", collection.slug, program.name)
    _, feat = layout_configs(program.layout, collection.search, n, params, rng)      # [n, NC, 18], every node
    scores = np.concatenate([scorer(feat[lo:lo + batch]) for lo in range(0, n, batch)])
    return _best_guarded(scores, space.decode(feat), space, margin)


def verify_program(program: Program, space: LayoutSpace, truth: CostModelScorer, oracle_ns: float,
                   collection: Collection, guide: Guide, template, s: AutotuneSettings, margin: float,
                   featurize_search: SearchParams) -> dict:
    """One row of metrics/autotune.json (see the module docstring)."""
    scorer = guide.scorer(template)
    rng = graph_rng(s.seed, "autotune", collection.slug, program.name)
    result = run_search(space, scorer, s.search, s.stage_budget, rng)
    pick, predicted, kept = guard(result, space.default()[0], margin)
    random_pick = run_search(space, scorer, s.search, s.stage_budget, rng, algorithm="random")
    random_pick = guard(random_pick, space.default()[0], margin)[0]
    sample_pick = featurizer_baseline(program, space, collection, scorer, s.stage_budget, featurize_search,
                                      s.search.batch, margin, s.seed)
    t_default = truth.default_ns
    t_pick, t_random, t_sample = truth.runtime_ns(space.encode(np.stack([pick, random_pick, sample_pick])))
    return {"program": program.name, "collection": collection.name, "model": guide.model,
            "configurable_nodes": space.n_nodes, "t_default_ns": t_default, "t_pick_ns": float(t_pick),
            "t_oracle_ns": oracle_ns, "share": share_of_gain(t_default, t_pick, oracle_ns),
            "oracle_gain": 1.0 - oracle_ns / t_default,
            "predicted_ratio": float(np.exp(predicted)), "verified_ratio": float(t_pick / t_default),
            "guard_kept_pick": bool(kept), "evaluations": result.evaluations, "seconds": result.seconds,
            "evaluations_per_s": result.evaluations / max(result.seconds, 1e-9),
            "t_featurizer_sample_ns": float(t_sample),
            "share_featurizer_sample": share_of_gain(t_default, t_sample, oracle_ns),
            "t_random_search_ns": float(t_random),
            "share_random_search": share_of_gain(t_default, t_random, oracle_ns)}


def run(cfg: DictConfig, work_dir: Path, progress: bool = True) -> dict:
    """Every built-in test program x layout collection: the rows and their aggregates (metrics/autotune.json)."""
    started = time.perf_counter()
    s = AutotuneSettings.from_cfg(cfg.autotune)
    params = layout_cost(cfg.synthesize.layout_cost)
    featurize_search = search_params(cfg.featurize.search)
    collections = [c for c in (Collection.parse(x) for x in cfg.data.collections) if c.kind == "layout"]
    zoo = builtin_test_programs(cfg)
    guides = {c.slug: load_guide(cfg, s.model, c, s.calibration_configs, s.search.batch, s.seed)
              for c in collections if any(p.source == c.source for p in zoo)}
    margins = {slug: noise_margin(cfg.paths.pruned_dir, g.collection, s.noise_quantile) for slug, g in guides.items()}
    rows, oracle_seconds = [], 0.0
    for zoo_program in tqdm(zoo, desc="autotune", unit="program", disable=not progress):
        program = builtin_program(zoo_program, params)
        space = LayoutSpace.of(program.layout.graph, program.layout.config_node_ids, program.name)
        truth = CostModelScorer(space, params)
        oracle = oracle_search(space, truth, s.search, s.oracle_budget, s.oracle_random, s.oracle_batch,
                               graph_rng(s.seed, "autotune-oracle", program.name))
        oracle_seconds += oracle.seconds
        oracle_ns = truth.default_ns * float(np.exp(oracle.score))
        for c in collections:
            if c.slug in guides and c.source == zoo_program.source:
                template = template_graph(cfg, program, c, work_dir)
                rows.append(verify_program(program, space, truth, oracle_ns, c, guides[c.slug], template, s,
                                           margins[c.slug], featurize_search))
    per_collection = {c.name: aggregate([r for r in rows if r["collection"] == c.name])
                      for c in collections if c.slug in guides}
    calibration = {g.collection.name: {m.name: vars(cal) for m, cal in zip(g.members, g.calibrations)}
                   for g in guides.values()}
    return {"model": s.model, "budget": s.stage_budget, "algorithm": s.search.algorithm, "all": aggregate(rows),
            "collections": per_collection, "margins": {guides[k].collection.name: v for k, v in margins.items()},
            "calibration": calibration, "oracle_seconds": oracle_seconds,
            "seconds": time.perf_counter() - started, "programs": rows}
