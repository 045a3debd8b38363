"""The one schema of every configuration value (every group of conf/), checked when the config loads.

`validate(cfg)` walks the composed (or params.yaml) configuration against `SCHEMA` before any stage reads data and
raises `SettingsError` with one line naming the key, the value and what is allowed; a key no code reads is refused
with the closest known key (difflib). `check_overrides` does the same for `key=value` / `group=option` overrides
before Hydra composes them, so a mistyped key gets that hint instead of Hydra's traceback.

The `synthesize` group, the sections `featurize` shares with it and `data.generator` (per builder) are checked by
pipeline/settings_synth.py.

The choices (gnn.norm, gnn.loss, prune.dedup, lgbm.features ...) come from pipeline/choices.py, which the libraries
that act on them import too, so loading a config imports neither torch nor any stage's library (every stage's DVC
dependencies stay its own).
"""
from __future__ import annotations

import difflib
import fnmatch
import math
import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from pipeline.choices import C_INT_MAX, ENSEMBLE_TIE_BREAKS, LIGHTGBM_MAX_LEAVES
from pipeline.choices import (ENSEMBLE_WEIGHTINGS, GNN_DEVICES, GNN_LOSSES, GNN_MIXERS, GNN_MODES, GNN_NORMS,
                              GNN_REDUCTIONS, GNN_SCHEDULES, GST_SEGMENTATIONS, LGBM_FEATURE_GROUPS, LGBM_LABEL_GAINS,
                              LGBM_LAYOUT_REFERENCES, LGBM_NODE_STATS, LGBM_OBJECTIVES, LIGHTGBM_MAX_QUERY_ROWS,
                              LIGHTGBM_XENDCG_GRADES, PRUNE_DEDUP_MODES,
                              PRUNE_WHOLE_GRAPH, SYNTH_BUILDERS, AUTOTUNE_MODELS, AUTOTUNE_ALGORITHMS, MODEL_STAGES,
                              MODELS, VALID_METRICS)
from pipeline.errors import PipelineError
from pipeline.settings_synth import (FEATURIZE_SEARCH, FEATURIZE_TILE_SEARCH, SYNTHESIZE, check_generator,
                                     check_synthesize)
from pipeline.settings_types import (COUNT, FRACTION, NON_NEGATIVE, POSITIVE, SEARCH_ENTRIES, AnyMapping, Bool,
                                     BySearch, Either, FileName, Float, Group, Int, List, Optional, SettingsError, Str,
                                     unknown_key)
from pipeline.tpugraphs.dataset import COLLECTIONS, Collection
from pipeline.tpugraphs.schema import NODE_FEAT_NAMES

# by-search gnn keys only layout models read (no tile entry)
GNN_LAYOUT_ONLY = ("node_reduce", "joint_sources", "layout_roles", "layout_padding")
LIGHTGBM_MAX_GRADES = LIGHTGBM_MAX_QUERY_ROWS         # pipeline.lgbm_model.train.max_label_grades (rank_xendcg: 31,
# a cross-key rule of `validate`)
COLLECTION_SLUGS = tuple(c.slug for c in COLLECTIONS)   # data.collections: dvc.yaml's foreach items name folders
COLLECTION_NAMES = COLLECTION_SLUGS + tuple(c.name for c in COLLECTIONS)   # tools also take 'layout:xla:random'
KIND_NAMES = {kind: tuple(n for c in COLLECTIONS if c.kind == kind for n in (c.slug, c.name)) for kind in ("tile",
                                                                                                        "layout")}

WHOLE_DIR = "synthetic_dir"                             # the paths.* folder a stage replaces whole
SAME_LAYOUT = ("models_dir", "predictions_dir")         # paths.* folders laid out alike: <model>/<collection>/
SAMPLED = Either((Int(low=0, high=0), Int(low=2)))      # configurations sampled per graph: 0 (all), or 2 to rank
LGB_COUNT = Int(low=1, high=C_INT_MAX)                  # a LightGBM parameter (a C int)
SEED = Int(low=0, high=C_INT_MAX)                       # the seeds LightGBM and torch take (LightGBM's: a C int)
PROBABILITY = Float(low=0.0, high=1.0, high_open=True)
PATH = Str()

LGBM_KIND = Group({
    "objective": Str(LGBM_OBJECTIVES),
    "configs_per_graph": SAMPLED,               # 0 = all
    "valid_configs_per_graph": SAMPLED,         # 0 = all
    "label_grades": Int(low=2, high=LIGHTGBM_MAX_GRADES),
    "label_gain": Str(LGBM_LABEL_GAINS),
    "lambdarank_truncation_level": LGB_COUNT,
})

SCHEMA = Group({
    "paths": Group({name: PATH for name in ("synthetic_dir", "tpugraphs_dir", "pruned_dir", "models_dir", "predictions_dir",
                                             "metrics_dir", "plots_dir", "submissions_dir", "multirun_dir",
                                             "checkpoints_dir")}),
    "data": Group({
        "name": Str(),
        "kind": Str(("synthetic", "tpugraphs")),
        "root": Optional(PATH),
        "collections": List(Str(COLLECTION_SLUGS), min_len=1),
        "generator": AnyMapping(nullable=True),        # per builder: pipeline/settings_synth.py
        "synthesized_by": List(Str(SYNTH_BUILDERS)),   # dvc.yaml: synthesize@<builder>, once or not at all
    }),
    "wandb": Group({"project": Str(), "entity": Optional(Str()), "mode": Str(("offline", "online", "disabled")),
                    "dir": PATH}),
    "synthesize": SYNTHESIZE,
    "download": Group({"competition": Str(), "cli": Str()}),   # python -m pipeline.download (Kaggle's data)
    "featurize": Group({                        # python -m pipeline.featurize (a user's own HLO programs)
        "seed": Int(low=0),                     # numpy's SeedSequence takes no negative seed
        "collections": List(Str(COLLECTION_NAMES), min_len=1),
        "layout_configs": COUNT,
        "tile_configs": COUNT,
        "max_config_nodes": Optional(COUNT),
        "chunk_configs": COUNT,
        "search": FEATURIZE_SEARCH,             # the layout searches' settings (pipeline/hlo/configs.py)
        "tile_search": FEATURIZE_TILE_SEARCH,   # tile candidates (pipeline/featurizer/tile_configs.TileSearch)
    }),
    "prune": Group({
        "hops": BySearch(Either((Int(low=0), Str((PRUNE_WHOLE_GRAPH,))))),   # by search like gnn.lr
        "pad_value": Float(),
        "dedup": Str(PRUNE_DEDUP_MODES),
        "normalize": Group({"log_columns": List(Str()), "drop_constant": Bool(), "min_std": BySearch(NON_NEGATIVE)}),
        "workers": COUNT,
        "chunk_size": COUNT,
        "skip_invalid_train": Bool(),
    }),
    "heuristic": Group({"chunk_size": COUNT}),
    "lgbm": Group({
        "num_leaves": Int(low=2, high=LIGHTGBM_MAX_LEAVES),
        "learning_rate": POSITIVE,
        "num_boost_round": LGB_COUNT,
        "early_stopping_rounds": LGB_COUNT,
        "eval_metric": Str(("score", "order", "ndcg")),
        "eval_at": List(LGB_COUNT, min_len=1),
        "min_data_in_leaf": Int(low=0, high=C_INT_MAX),
        "feature_fraction": Float(low=0.0, high=1.0, low_open=True),
        "bagging_fraction": Float(low=0.0, high=1.0, low_open=True),
        "bagging_freq": Int(low=0, high=C_INT_MAX),
        "lambda_l2": NON_NEGATIVE,
        "max_bin": Int(low=2, high=C_INT_MAX),
        "num_threads": LGB_COUNT,
        "max_query_rows": Int(low=2, high=LIGHTGBM_MAX_QUERY_ROWS),
        "feature_chunk": COUNT,
        "importance_top": COUNT,
        "node_stats": List(Str(LGBM_NODE_STATS)),
        "max_perm_rank": COUNT,
        "top_nodes": COUNT,
        "layout_reference": Str(LGBM_LAYOUT_REFERENCES),
        "features": Group({name: Bool() for name in LGBM_FEATURE_GROUPS}),
        "tile": LGBM_KIND,
        "layout": LGBM_KIND,
    }),
    "gnn": Group({
        "hidden": COUNT, "opcode_dim": COUNT, "config_value_dim": COUNT, "layers": COUNT,
        "dropout": PROBABILITY,
        "norm": BySearch(Str(GNN_NORMS)),
        "residual": Bool(), "cross_attention": Bool(),
        "attention_heads": COUNT,
        "cross_mixer": Str(GNN_MIXERS),
        "cross_pooled": Bool(), "effective_layout": Bool(), "edge_mismatch": Bool(),
        "node_reduce": BySearch(Str(GNN_REDUCTIONS)),   # layout models only: no tile entry needed
        "pooled_head": Bool(),
        "joint_sources": BySearch(Bool()),       # layout models only: also train on the other source's graphs
        "tile_geometry": Bool(),                  # tile models: the tile relative to the kernel's output
        "layout_roles": BySearch(Bool()),         # layout models: the roles of each block's most-minor dims
        "layout_padding": BySearch(Bool()),       # layout models: the padding waste of each block's most-minor dims
        "loss": Str(GNN_LOSSES),
        "margin": NON_NEGATIVE,
        "min_gap": Float(low=0.0, high=1.0, high_open=True),
        "min_gap_quantile": Optional(FRACTION),   # null: gnn.min_gap; else from prune's duplicate spread
        "lr": BySearch(POSITIVE),
        "weight_decay": NON_NEGATIVE,
        "warmup_frac": FRACTION,
        "schedule": Str(GNN_SCHEDULES),
        "lr_patience": COUNT, "lr_decay": Float(low=0.0, high=1.0, low_open=True),
        "epochs": BySearch(COUNT),                # the budget; early stopping after `patience` epochs without gain
        "patience": COUNT,
        "min_delta": NON_NEGATIVE,
        "seeds": List(SEED, min_len=1),     # one model per member seed (pipeline/graphnet/members.py)
        "steps_per_epoch": Optional(COUNT),
        "graphs_per_step": COUNT,
        "configs_per_graph": BySearch(Int(low=2)),
        "grad_clip": NON_NEGATIVE,                # 0 = no clipping
        "ema_epochs": BySearch(Optional(POSITIVE)),   # null: validate the raw weights (pipeline/graphnet/ema.py)
        "tta": COUNT, "infer_batch": COUNT,
        "infer_chunk_mb": Optional(POSITIVE),  # null: the plain forward (pipeline/graphnet/chunked.py)
        "valid_max_configs": Int(low=2),
        "valid_tta": Optional(COUNT),             # null: gnn.tta
        "valid_metric": Str(VALID_METRICS),       # selection per valid graph: the collection's score | Kendall tau
        "device": Str(GNN_DEVICES),
        "amp": Bool(), "resume": Bool(),
        "num_threads": COUNT,
        "member_workers": COUNT,                  # members trained at once on a CPU, num_threads shared
        "mode": Str(GNN_MODES),
        "gst": Group({
            "segment_size": COUNT,
            "segmentation": Str(GST_SEGMENTATIONS),
            "segments_per_step": COUNT,
            "stale_dropout": PROBABILITY,
            "finetune_epochs": Int(low=0),
            "finetune_lr_scale": NON_NEGATIVE,
        }),
    }),
    "ensemble": Group({"members": List(Str(MODEL_STAGES), min_len=1), "normalize": Str(("minmax", "rank")),
                       "weighting": Str(ENSEMBLE_WEIGHTINGS), "tie_break": Str(ENSEMBLE_TIE_BREAKS),
                       "grid_step": Float(low=0.0, high=1.0, low_open=True),
                       "tolerance": NON_NEGATIVE,          # valid scores this close to the best tie
                       "prefer": Optional(Str(MODEL_STAGES))}),   # the member ties go to (one of members)
    "submit": Group({"model": Str(MODELS), "name": FileName(),    # <submissions_dir>/<name>.csv
                     "tile_top_k": COUNT}),
    "predict": Group({"model": Str(MODELS), "top": COUNT, "run_dir": PATH}),
    "autotune": Group({                         # python -m pipeline.autotune and stage autotune (pipeline/tuning)
        "model": Str(AUTOTUNE_MODELS),
        "collection": Str(KIND_NAMES["layout"]),          # a layout model searches layouts
        "tile_collection": Str(KIND_NAMES["tile"]),
        "budget": COUNT,
        "stage_budget": COUNT,
        "workers": COUNT,
        "out_dir": PATH,
        "seed": SEED,
        "top_changes": Int(low=0),
        "search": Group({"algorithm": Str(AUTOTUNE_ALGORITHMS), "batch": COUNT, "population": COUNT,
                         "local_share": FRACTION, "mutation_extra": NON_NEGATIVE, "random_default_prob": PROBABILITY,
                         "combos": COUNT, "time_limit_s": POSITIVE}),
        "guard": Group({"error_quantile": FRACTION, "by_distance": Bool(), "min_pairs": COUNT, "siblings": Bool(),
                        "chain": Bool(), "step_budget": COUNT, "shrink": Bool(), "measured_blocks": Bool(),
                        "beside_unmeasured": Int(low=0), "small_program_scale": Float(low=1.0)}),
        "calibration": Group({"configs": COUNT}),
        "oracle": Group({"budget": COUNT, "random_samples": COUNT, "batch": COUNT}),
        "tile": Group({"max_configs": Int(low=2), "candidates": Int(low=0)}),
    }),
    "summary": Group({"models": List(Str(MODELS), min_len=1), "splits": List(Str(("valid", "test")), min_len=1),
                      "page_template": PATH, "vega_lite_version": Str(), "rank_model": Str(MODELS),
                      "rank_split": Str(("valid", "test"))}),
    "evaluation": Group({"scatter_points_per_graph": Int(low=0)}),
    "seed": SEED,
})


def search_entries(collections: Iterable[str]) -> tuple[str, ...]:
    """The by-search entries the configured collections need (tile for tile, else the layout search)."""
    found = [c for c in COLLECTIONS if c.name in collections or c.slug in collections]
    return tuple(sorted({"tile" if c.kind == "tile" else c.search for c in found}))


def validate(cfg: Mapping) -> None:
    """Check every key and value of a resolved configuration; raises SettingsError (one line) on the first fault."""
    SCHEMA.check(cfg, "")
    needed = search_entries(cfg["data"]["collections"])
    gnn = cfg["gnn"]
    layout_needed = tuple(e for e in needed if e != "tile")
    for key, spec in SCHEMA.fields["gnn"].fields.items():
        if isinstance(spec, BySearch):
            spec.check(gnn[key], f"gnn.{key}", layout_needed if key in GNN_LAYOUT_ONLY else needed)
    # tile graphs are always kept whole, so prune.hops needs no tile entry
    SCHEMA.fields["prune"].fields["hops"].check(cfg["prune"]["hops"], "prune.hops", layout_needed)
    SCHEMA.fields["prune"].fields["normalize"].fields["min_std"].check(cfg["prune"]["normalize"]["min_std"],
                                                                       "prune.normalize.min_std", needed)
    pooled = 2 * gnn["hidden"]                 # the config self-attention runs over mean+max pooled embeddings
    if gnn["cross_attention"] and pooled % gnn["attention_heads"]:
        raise SettingsError("gnn.attention_heads", gnn["attention_heads"],
                            f"a divisor of 2 * gnn.hidden = {pooled} (cross_attention is on)")
    if cfg["data"]["kind"] == "tpugraphs" and cfg["data"]["root"] is None:
        raise SettingsError("data.root", None, "the path of the TpuGraphs download when data.kind=tpugraphs")
    check_gst_norm(gnn, layout_needed)
    check_ensemble_prefer(cfg["ensemble"])
    if len({Collection.parse(n).slug for n in cfg["featurize"]["collections"]}) < len(cfg["featurize"]["collections"]):
        raise SettingsError("featurize.collections", cfg["featurize"]["collections"], "distinct collections (a slug "
                                                                                      "and its name are the same one)")
    check_grid_step(cfg["ensemble"]["grid_step"])
    check_joint_sources(gnn, list(cfg["data"]["collections"]))
    check_log_columns(cfg["prune"]["normalize"]["log_columns"])
    check_label_grades(cfg["lgbm"])
    check_synthesized_by(cfg["data"])
    check_paths(cfg["paths"])
    check_generator(cfg["data"]["generator"])
    check_synthesize(cfg["synthesize"])


def check_paths(paths: Mapping) -> None:
    """paths.synthetic_dir is replaced whole by stage synthesize (and tracked whole by DVC): no other paths.* folder
    may be it, hold it or lie inside it; paths.models_dir and paths.predictions_dir both hold <model>/<collection>
    folders, so they differ."""
    folder = {key: os.path.abspath(value) for key, value in paths.items()}
    whole = folder[WHOLE_DIR]
    for key, other in folder.items():
        inside = os.path.commonpath([whole, other]) in (whole, other)
        if key != WHOLE_DIR and inside:
            raise SettingsError(f"paths.{key}", paths[key], f"a folder apart from paths.{WHOLE_DIR}="
                                                            f"{paths[WHOLE_DIR]} (stage synthesize replaces that "
                                                            f"folder whole): neither it, inside it nor holding it")
    if folder[SAME_LAYOUT[0]] == folder[SAME_LAYOUT[1]]:
        raise SettingsError(f"paths.{SAME_LAYOUT[1]}", paths[SAME_LAYOUT[1]],
                            f"a folder other than paths.{SAME_LAYOUT[0]} (both hold <model>/<collection> folders)")


def check_ensemble_prefer(ensemble: Mapping) -> None:
    """ensemble.prefer names the member that tied blends go to: it must be one of ensemble.members."""
    prefer = ensemble["prefer"]
    if prefer is not None and prefer not in list(ensemble["members"]):
        raise SettingsError("ensemble.prefer", prefer, f"null or one of ensemble.members {list(ensemble['members'])}")


def check_grid_step(step: float) -> None:
    """ensemble.grid_step divides the weight 1 into whole ticks (pipeline/ensembling/blend.weight_grid rounds 1/step:
    0.3 searched steps of 1/3, 0.7 the members alone)."""
    ticks = 1 / step
    if not math.isclose(ticks, round(ticks)):
        raise SettingsError("ensemble.grid_step", step, "1/n for a whole number n (e.g. 0.5, 0.25, 0.2, 0.1)")


def check_gst_norm(gnn: Mapping, layout_searches: Sequence[str]) -> None:
    """gnn.mode=gst trains layout graphs segment by segment: gnn.norm=instance normalises over every node of a
    graph, which a segment does not see, so no layout entry of gnn.norm may be `instance` then; and its fine-tuning
    epochs train the pooled head only, so they need gnn.pooled_head."""
    if gnn["mode"] != "gst":
        return
    norm = gnn["norm"]
    for search in layout_searches:
        value = norm.get(search) if isinstance(norm, Mapping) else norm
        if value == "instance":
            key = f"gnn.norm.{search}" if isinstance(norm, Mapping) else "gnn.norm"
            raise SettingsError(key, value, "layer or none when gnn.mode=gst (instance normalises over every node of "
                                            "a graph, which a segment does not see)")
    if int(gnn["gst"]["finetune_epochs"]) > 0 and not gnn["pooled_head"]:
        raise SettingsError("gnn.pooled_head", gnn["pooled_head"], "true when gnn.mode=gst fine-tunes its head "
                                                                   "(gnn.gst.finetune_epochs > 0)")


def check_log_columns(patterns: Sequence[str]) -> None:
    """Each `prune.normalize.log_columns` fnmatch pattern names some node_feat column (NODE_FEAT_NAMES)."""
    for i, pattern in enumerate(patterns):
        if not any(fnmatch.fnmatchcase(name, pattern) for name in NODE_FEAT_NAMES):
            raise SettingsError(f"prune.normalize.log_columns[{i}]", pattern,
                                "an fnmatch pattern matching some node_feat column (pipeline/tpugraphs/schema.py)")


def check_label_grades(lgbm: Mapping) -> None:
    """rank_xendcg computes its gain 2^label in a 32-bit int: at most LIGHTGBM_XENDCG_GRADES grades."""
    for kind in ("tile", "layout"):
        if lgbm[kind]["objective"] == "rank_xendcg" and lgbm[kind]["label_grades"] > LIGHTGBM_XENDCG_GRADES:
            raise SettingsError(f"lgbm.{kind}.label_grades", lgbm[kind]["label_grades"],
                                f"an integer 2..{LIGHTGBM_XENDCG_GRADES} for objective rank_xendcg")


def check_joint_sources(gnn: Mapping, collections: Sequence[str]) -> None:
    """gnn.joint_sources trains a layout collection on its sibling's train graphs too (the other source, the same
    search: stage gnn reads the sibling's pruned folder), so wherever it is on the sibling must be configured."""
    value = gnn["joint_sources"]
    for collection in COLLECTIONS:
        if collection.kind != "layout" or not {collection.name, collection.slug} & set(collections):
            continue
        on = value.get(collection.search, False) if isinstance(value, Mapping) else value
        sibling = collection.sibling
        if on and not {sibling.name, sibling.slug} & set(collections):
            key = f"gnn.joint_sources.{collection.search}" if isinstance(value, Mapping) else "gnn.joint_sources"
            raise SettingsError(key, on, f"false while data.collections lacks {sibling.slug}, whose train graphs "
                                         f"{collection.slug} would train on")


def check_synthesized_by(data: Mapping) -> None:
    """`data.synthesized_by` is what dvc.yaml's synthesize stage runs for (foreach): [data.generator.builder] for
    generated data, [] for real data, whose pipeline has no synthesize stage (so `dvc repro` never replaces the
    built-in dataset a user's own root links its train splits from)."""
    generator = data["generator"] if isinstance(data["generator"], Mapping) else {}
    expected = [generator.get("builder")] if data["kind"] == "synthetic" else []
    if list(data["synthesized_by"]) != expected:
        raise SettingsError("data.synthesized_by", data["synthesized_by"],
                            f"{expected} for data.kind={data['kind']} (dvc.yaml runs stage synthesize once per entry)")


def spec_at(dotted: str):
    """The schema entry of a dotted key, or None when no code reads that key."""
    spec = SCHEMA
    for part in dotted.split("."):
        if isinstance(spec, AnyMapping):
            return spec
        if isinstance(spec, BySearch) and part in SEARCH_ENTRIES:
            spec = spec.item
        elif isinstance(spec, Group) and part in spec.fields:
            spec = spec.fields[part]
        elif isinstance(spec, List) and part.isdigit():        # an item of a list (lgbm.eval_at.0=10)
            spec = spec.item
        else:
            return None
    return spec


def known_keys() -> list[str]:
    """Every dotted key of the schema (for the closest-key hint)."""
    keys, stack = [], [("", SCHEMA)]
    while stack:
        prefix, spec = stack.pop()
        for name, child in spec.fields.items():
            keys.append(f"{prefix}{name}")
            if isinstance(child, Group):
                stack.append((f"{prefix}{name}.", child))
    return keys


def check_overrides(overrides: Sequence[str], conf_dir: Path) -> None:
    """Refuse overrides of keys no code reads, and `group=option` with no conf/<group>/<option>.yaml."""
    for override in overrides:
        key, _, value = override.lstrip("~+").partition("=")
        if not all(key.split(".")):                            # `=5`, `gnn.=5`, `.lr=1`: no name to set
            raise PipelineError(f"override {override!r}: expected KEY=VALUE, a setting or config group named "
                                f"before '='")
        if key.startswith("hydra") or "/" in key:
            continue
        group_dir = conf_dir / key
        if "." not in key and group_dir.is_dir():
            options = sorted(p.stem for p in group_dir.glob("*.yaml"))
            if value not in options:
                close = difflib.get_close_matches(value, options, n=1, cutoff=0.5)
                hint = f"; did you mean {key}={close[0]}?" if close else ""
                raise SettingsError(key, value, f"one of the presets {options} (conf/{key}/*.yaml){hint}")
            continue
        if spec_at(key) is None:
            raise unknown_key(key, value, known_keys())
