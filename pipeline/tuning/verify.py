"""Stage autotune: measure every collection's guard, autotune every built-in test program, verify each pick.

First the guard of every collection of data.collections is measured on the valid split
(`scorers.measure_guard`, `pipeline.tuning.guard`): the tool's file, and the guides below. Per built-in test
program (`data.generator`, builder `programs`) and layout collection of its source: the program's layout graph as
the dataset holds it (node_feat layout columns from the default configuration), the model-guided search at
`autotune.stage_budget` evaluations inside the guard's region, the guard, and two baselines at the same budget:
the best of the featurizer's sample (`featurize.search`, what the Kaggle task ranks) and a random search, both
ranked by the model and guarded alike. Every pick is timed by the noise-free layout cost model against the
compiler default and the oracle (`pipeline.tuning.oracle`), which is computed once per program. Tile picks:
`pipeline.tuning.verify_tiles`. Seconds go to the timings, never to the metrics (an identical rerun writes
identical metrics).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np
import torch
from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.costmodel.layout import LayoutCostModel, LayoutCostParams
from pipeline.graphnet.member_pool import imap_pool
from pipeline.hlo.configs import SearchParams
from pipeline.hlo.featurize import layout_configs
from pipeline.hlo.node_features import with_layouts
from pipeline.seeds import graph_rng
from pipeline.settings.sections import layout_cost, search_params
from pipeline.tpugraphs.dataset import Collection
from pipeline.tuning.oracle import CostModelScorer, oracle_search
from pipeline.tuning.program import Program, template_graph
from pipeline.timings import DIGITS, Stopwatch
from pipeline.tuning.report import aggregate, mean_std, share_of_gain
from pipeline.tuning.guard import GuardSettings
from pipeline.tuning.scorers import Guide, guide_of, load_members, measure_guard
from pipeline.tuning.verify_tiles import verify_tiles
from pipeline.tuning.chain import guarded_pick
from pipeline.tuning.search import Guard, SearchResult, SearchSettings, changed_blocks, guard, run_search
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
    guard: GuardSettings
    calibration_configs: int
    oracle_budget: int
    oracle_random: int
    oracle_batch: int
    workers: int = 1             # stage: built-in programs verified at once, each in its own process

    @classmethod
    def from_cfg(cls, cfg: Mapping) -> "AutotuneSettings":
        return cls(str(cfg["model"]), int(cfg["budget"]), int(cfg["stage_budget"]), int(cfg["seed"]),
                   SearchSettings.from_cfg(cfg["search"]), GuardSettings.from_cfg(cfg["guard"]),
                   int(cfg["calibration"]["configs"]), int(cfg["oracle"]["budget"]),
                   int(cfg["oracle"]["random_samples"]), int(cfg["oracle"]["batch"]), int(cfg["workers"]))


def builtin_test_programs(cfg: DictConfig) -> list:
    """The built-in test programs of the preset (none for a dataset that the programs builder did not make)."""
    generator = cfg.data.get("generator")
    if generator is None or generator.get("builder") != PROGRAMS_BUILDER:
        return []
    from pipeline.settings.programs import program_settings
    from pipeline.synth.programs import layout_programs

    return [p for p in layout_programs(program_settings(generator, cfg.synthesize)) if p.split == "test"]


def builtin_program(zoo_program, params: LayoutCostParams, layout=None) -> Program:
    """The program's layout graph (`layout`, else lowered here) with node_feat's layout columns as the default
    configuration compiles it."""
    from pipeline.synth.programs import layout_graph_of

    layout = layout_graph_of(zoo_program) if layout is None else layout
    model = LayoutCostModel(layout.graph, layout.config_node_ids, params)
    return Program(zoo_program.name, layout, with_layouts(layout.node_feat, model.default_minor_to_major()), ())


@dataclass(frozen=True)
class BuiltinCase:
    """A built-in test program ready to verify: its graph, its space, the noise-free cost model and the oracle."""

    program: Program
    space: LayoutSpace
    truth: CostModelScorer
    oracle: SearchResult

    @property
    def oracle_ns(self) -> float:
        return self.truth.default_ns * float(np.exp(self.oracle.score))


def builtin_case(zoo_program, params: LayoutCostParams, s: AutotuneSettings, layout=None) -> BuiltinCase:
    """`zoo_program`'s graph (`layout`, else lowered here), space, cost model and oracle (`pipeline.tuning.oracle`,
    the stage's oracle settings, seeded by autotune.seed and the program's name)."""
    program = builtin_program(zoo_program, params, layout)
    space = LayoutSpace.of(program.layout.graph, program.layout.config_node_ids, program.name)
    truth = CostModelScorer(space, params)
    oracle = oracle_search(space, truth, s.search, s.oracle_budget, s.oracle_random, s.oracle_batch,
                           graph_rng(s.seed, "autotune-oracle", program.name))
    return BuiltinCase(program, space, truth, oracle)


def _best_guarded(scores: np.ndarray, candidates: np.ndarray, space: LayoutSpace, rule: Guard) -> np.ndarray:
    ranked = [np.inf if frozen else rule.ranked(float(x), int(np.count_nonzero(c)))
              for x, c, frozen in zip(scores, candidates, space.changes_frozen(candidates))]
    best = int(np.argmin(ranked))
    if not np.isfinite(ranked[best]):                       # every sample outside the region or on a frozen block
        return space.default()[0]
    return guard(SearchResult(candidates[best], float(scores[best]), len(scores), 0.0), space.default()[0], rule)[0]


def featurizer_baseline(program: Program, space: LayoutSpace, collection: Collection, scorer, n: int,
                        params: SearchParams, batch: int, rule: Guard, seed: int) -> np.ndarray:
    """The guarded best of n configurations sampled as `featurize` samples them, ranked by the model."""
    rng = graph_rng(seed, "autotune-featurizer", collection.slug, program.name)
    _, feat = layout_configs(program.layout, collection.search, n, params, rng)      # [n, NC, 18], every node
    scores = np.concatenate([scorer(feat[lo:lo + batch]) for lo in range(0, n, batch)])
    return _best_guarded(scores, space.decode(feat), space, rule)


def verify_program(program: Program, space: LayoutSpace, truth: CostModelScorer, oracle_ns: float,
                   collection: Collection, guide: Guide, template, s: AutotuneSettings,
                   featurize_search: SearchParams) -> tuple[dict, dict]:
    """(one row of metrics/autotune.json, its search seconds) (see the module docstring)."""
    scorer = guide.scorer(template)
    rule = guide.rule.for_program(len(template.node_opcode), s.guard.small_program_scale)
    space = space.only_kinds(rule.measured_blocks).freeze_beside(s.guard.beside_unmeasured)   # (LayoutSpace)
    rng = graph_rng(s.seed, "autotune", collection.slug, program.name)
    found = guarded_pick(space, scorer, s.search, s.stage_budget, rng, rule, s.guard.chain, s.guard.step_budget)
    pick, predicted, kept, result = found.candidate, found.score, found.kept, found.search
    random_pick = run_search(space, scorer, s.search, s.stage_budget, rng, algorithm="random",
                             rule=rule)
    random_pick = guard(random_pick, space.default()[0], rule)[0]
    sample_pick = featurizer_baseline(program, space, collection, scorer, s.stage_budget, featurize_search,
                                      s.search.batch, rule, s.seed)
    t_default = truth.default_ns
    unguarded_blocks = changed_blocks(found.unguarded.candidate)
    t_pick, t_random, t_sample, t_unguarded, *t_points = truth.runtime_ns(
        space.encode(np.stack([pick, random_pick, sample_pick, found.unguarded.candidate, *found.points])))
    row = {"program": program.name, "collection": collection.name, "model": guide.model,
           "configurable_nodes": space.n_nodes, "t_default_ns": t_default, "t_pick_ns": float(t_pick),
           "t_oracle_ns": oracle_ns, "share": share_of_gain(t_default, t_pick, oracle_ns),
           "oracle_gain": 1.0 - oracle_ns / t_default,
           "predicted_ratio": float(np.exp(predicted)), "verified_ratio": float(t_pick / t_default),
           "guard_kept_pick": bool(kept), "margin": rule.margin_at(unguarded_blocks),
           "evaluations": result.evaluations, "changed_blocks": changed_blocks(pick),
           "unguarded": {"predicted_ratio": float(np.exp(rule.calibrated(found.unguarded.score, unguarded_blocks))),
                         "verified_ratio": float(t_unguarded / t_default), "changed_blocks": unguarded_blocks},
           "t_featurizer_sample_ns": float(t_sample),
           "share_featurizer_sample": share_of_gain(t_default, t_sample, oracle_ns),
           "t_random_search_ns": float(t_random),
           "share_random_search": share_of_gain(t_default, t_random, oracle_ns)}
    if s.guard.chain:                  # every kept step: blocks, margin, predicted and verified log runtime gain
        row["chain_steps"] = [{"changed_blocks": step.changed, "margin": step.margin, "predicted_gain": step.gain,
                               "verified_gain": float(np.log(t_points[i + 1] / t_points[i]))}
                              for i, step in enumerate(found.steps)]
    return row, {"program": program.name, "collection": collection.name, "seconds": round(result.seconds, DIGITS),
                 "evaluations_per_s": round(result.evaluations / max(result.seconds, 1e-9), DIGITS)}


@dataclass
class Verification:
    """What stage autotune writes: the metrics, the timings (their own file) and the guard table per collection."""

    metrics: dict
    timings: dict
    guards: dict                 # slug -> guard table (pipeline.tuning.guard)


def measure_guards(cfg: DictConfig, s: AutotuneSettings, progress: bool) -> dict:
    """slug -> (guard table, loaded members) of every collection of data.collections."""
    collections = [Collection.parse(x) for x in cfg.data.collections]
    return {c.slug: measure_guard(cfg, c, s.calibration_configs, s.search.batch, s.seed, s.guard)
            for c in tqdm(collections, desc="autotune guard", unit="collection", disable=not progress)}


@dataclass(frozen=True)
class ProgramJob:
    """One built-in test program to verify, maybe in a pool worker (picklable): the config, the guard tables of the
    layout collections (slug -> table, `measure_guard`), the zoo program, the work folder, the worker's torch
    threads (None: torch's own count, in the stage's process) and the program's lowered layout graph (None: the
    worker lowers it)."""

    cfg: DictConfig
    tables: dict
    zoo_program: object
    work_dir: str
    threads: int | None = None
    layout: object = None


def verify_builtin(job: ProgramJob, guides: dict | None = None) -> tuple[str, list[dict], list[dict], float]:
    """(program name, rows, their timing rows, oracle seconds) of one built-in test program x each layout collection
    of its source in `job.tables`; the guides are built from the tables and the models on disk unless given."""
    if job.threads is not None:
        torch.set_num_threads(job.threads)
    cfg, zoo_program = job.cfg, job.zoo_program
    s = AutotuneSettings.from_cfg(cfg.autotune)
    collections = [c for c in (Collection.parse(x) for x in cfg.data.collections)
                   if c.slug in job.tables and c.source == zoo_program.source]
    if guides is None:
        guides = {c.slug: guide_of(job.tables[c.slug], s.model, c,
                                   load_members(cfg, job.tables[c.slug]["models"][s.model]["weights"], c),
                                   s.guard.by_distance) for c in collections}
    case = builtin_case(zoo_program, layout_cost(cfg.synthesize.layout_cost), s, job.layout)
    featurize_search = search_params(cfg.featurize.search)
    rows, times = [], []
    for c in collections:
        template = template_graph(cfg, case.program, c, Path(job.work_dir))
        row, seconds = verify_program(case.program, case.space, case.truth, case.oracle_ns, c, guides[c.slug],
                                      template, s, featurize_search)
        rows.append(row)
        times.append(seconds)
    return zoo_program.name, rows, times, case.oracle.seconds


def verify_all(cfg: DictConfig, zoo: list, tables: dict, guides: dict, work_dir: Path, workers: int,
               progress: bool) -> list[tuple[str, list[dict], list[dict], float]]:
    """`verify_builtin` of every program of `zoo`, in its order: in this process with `workers` 1, else in a pool
    of that many spawned processes sharing the cores (`pipeline.graphnet.member_pool`), one program at a time
    each, the programs of most configurable nodes first (lowered here, once), so that no large program starts last
    while the other workers wait. A row depends only on its program, collection and seed, so the pool's results are
    those of one process with the same torch threads."""
    if workers <= 1 or not zoo:                         # no pool to start without built-in programs (real data)
        done = (verify_builtin(ProgramJob(cfg, tables, p, str(work_dir)), guides) for p in zoo)
    else:
        from pipeline.synth.programs import layout_graph_of

        threads = max(1, torch.get_num_threads() // workers)
        jobs = [ProgramJob(cfg, tables, p, str(work_dir), threads, layout_graph_of(p)) for p in zoo]
        jobs.sort(key=lambda job: -len(job.layout.config_node_ids))     # the longest first: a shorter tail
        done = imap_pool(verify_builtin, jobs, workers)
    by_name = {}
    for result in tqdm(done, total=len(zoo), desc="autotune", unit="program", disable=not progress):
        by_name[result[0]] = result
    return [by_name[p.name] for p in zoo]


def run(cfg: DictConfig, work_dir: Path, progress: bool = True) -> Verification:
    """The guard of every collection, then every built-in test program x layout collection verified (the rows and
    their aggregates; `autotune.workers` programs at a time) and every built-in test kernel's tile pick
    (`pipeline.tuning.verify_tiles`)."""
    watch = Stopwatch()
    s = AutotuneSettings.from_cfg(cfg.autotune)
    measured = measure_guards(cfg, s, progress)
    guard_seconds = watch.elapsed()
    collections = [c for c in (Collection.parse(x) for x in cfg.data.collections) if c.kind == "layout"]
    zoo = builtin_test_programs(cfg)
    guides = {c.slug: guide_of(measured[c.slug][0], s.model, c, measured[c.slug][1], s.guard.by_distance)
              for c in collections if any(p.source == c.source for p in zoo)}
    tables = {slug: measured[slug][0] for slug in guides}
    done = verify_all(cfg, zoo, tables, guides, work_dir, s.workers, progress)
    rows = [row for _, program_rows, _, _ in done for row in program_rows]
    times = [t for _, _, program_times, _ in done for t in program_times]
    oracle_seconds = sum(seconds for *_, seconds in done)
    per_collection = {c.name: aggregate([r for r in rows if r["collection"] == c.name])
                      for c in collections if c.slug in guides}
    calibration = {g.collection.name: {m.name: vars(cal) for m, cal in zip(g.members, g.calibrations)}
                   for g in guides.values()}
    tiles_started = watch.elapsed()
    tiles = verify_tiles(cfg, s, measured, work_dir, progress)
    metrics = {"model": s.model, "budget": s.stage_budget, "algorithm": s.search.algorithm, "all": aggregate(rows),
               "collections": per_collection, "guards": {g.collection.name: vars(g.rule) for g in guides.values()},
               "calibration": calibration, "programs": rows, "tiles": tiles}
    timings = {"seconds": watch.elapsed(), "guard_seconds": guard_seconds,
               "oracle_seconds": round(oracle_seconds, DIGITS),
               "tile_seconds": round(watch.elapsed() - tiles_started, DIGITS),
               "search_seconds": mean_std([t["seconds"] for t in times]), "programs": times, "workers": s.workers}
    return Verification(metrics, timings, {slug: table for slug, (table, _) in measured.items()})
