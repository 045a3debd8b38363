"""The settings schema: every bad value named in one line when the config loads, before any data is read."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pipeline.config import compose, load_cfg
from pipeline.settings_schema import (GNN_DEVICES, GNN_MIXERS, GNN_NORMS,
                                      GST_SEGMENTATIONS, check_overrides, known_keys, validate)
from pipeline.errors import PipelineError
from pipeline.settings_types import SettingsError

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("override, message", [
    ("prune.hops=abc", "setting prune.hops='abc': expected an integer >= 0 or one of ['all']"),
    ("prune.hops=1.7", "setting prune.hops=1.7: expected an integer >= 0 or one of ['all']"),
    ("prune.hops=-1", "setting prune.hops=-1: expected an integer >= 0 or one of ['all']"),
    ("prune.pad_value=nan", "setting prune.pad_value=nan: expected a finite number"),
    ("prune.workers=0", "setting prune.workers=0: expected an integer >= 1"),
    ("prune.dedup=max", "setting prune.dedup='max': expected one of ['min', 'mean']"),
    ("gnn.lr=abc", "setting gnn.lr='abc': expected a finite number > 0.0, or a mapping with keys among "
                   "['tile', 'random', 'default'] of them"),
    ("gnn.lr=-1", "setting gnn.lr=-1: expected a finite number > 0.0, or a mapping"),
    ("gnn.lr.random=0", "setting gnn.lr.random=0: expected a finite number > 0.0"),
    ("gnn.epochs=0", "setting gnn.epochs=0: expected an integer >= 1"),
    ("gnn.hidden=0", "setting gnn.hidden=0: expected an integer >= 1"),
    ("gnn.dropout=1.0", "setting gnn.dropout=1.0: expected a finite number >= 0.0 and < 1.0"),
    ("gnn.norm=batch", "setting gnn.norm='batch': expected one of ['instance', 'layer', 'none'], or a mapping"),
    ("gnn.norm.tile=layer", "setting gnn.norm.tile='layer': expected an entry of a mapping, but gnn.norm holds one "
                            "value here: set it whole, e.g. 'gnn.norm={tile: ..., random: ..., default: ...}'"),

    ("gnn.configs_per_graph.default=1", "setting gnn.configs_per_graph.default=1: expected an integer >= 2"),
    ("gnn.amp=yes", "setting gnn.amp='yes': expected true or false"),
    ("gnn.attention_heads=3", "setting gnn.attention_heads=3: expected a divisor of 2 * gnn.hidden = 64"),
    ("gnn.gst.segmentation=halves", "setting gnn.gst.segmentation='halves': expected one of ['contiguous', 'node_splits']"),
    ("gnn.steps_per_epoch=0", "setting gnn.steps_per_epoch=0: expected null or an integer >= 1"),
    ("lgbm.num_leaves=0", "setting lgbm.num_leaves=0: expected an integer >= 2"),
    ("lgbm.max_query_rows=20000", "setting lgbm.max_query_rows=20000: expected an integer >= 2 and <= 10000"),
    ("lgbm.tile.label_grades=10001", "setting lgbm.tile.label_grades=10001: expected an integer >= 2 and <= 10000"),
    ("lgbm.node_stats=[mean,median]", "setting lgbm.node_stats[1]='median': expected one of"),
    ("lgbm.eval_at=[]", "setting lgbm.eval_at=[]: expected a list of at least 1 distinct items"),
    ("submit.tile_top_k=0", "setting submit.tile_top_k=0: expected an integer >= 1"),
    ("ensemble.grid_step=0", "setting ensemble.grid_step=0: expected a finite number > 0.0 and <= 1.0"),
    ("wandb.mode=cloud", "setting wandb.mode='cloud': expected one of ['offline', 'online', 'disabled']"),
    ("data.collections=[tile-xla,tile:xla2]", "setting data.collections[1]='tile:xla2': expected one of"),
    ("data.collections=[layout:xla:random]",                 # dvc.yaml's outputs are named by slug, as stages write
     "setting data.collections[0]='layout:xla:random': expected one of ['tile-xla', 'layout-xla-random',"),
    ("data.generator=3", "setting data.generator=3: expected a mapping or null"),
    ("paths.models_dir=''", "setting paths.models_dir='': expected a non-empty string"),
    ("seed=-1", "setting seed=-1: expected an integer >= 0"),
    ("evaluation.scatter_points_per_graph=x", "setting evaluation.scatter_points_per_graph='x': expected an integer"),
    ("gnn.epoch=3", "setting gnn.epoch='3': expected a known key (no code reads this one); did you mean gnn.epochs?"),
    ("+gnn.epoch=3", "did you mean gnn.epochs?"),
    ("+lgbm.tile.label_gains=linear", "did you mean lgbm.tile.label_gain?"),
    ("gnn=kagle", "setting gnn='kagle': expected one of the presets ['default', 'gst', 'kaggle'] (conf/gnn/*.yaml); "
                  "did you mean gnn=kaggle?"),
    ("data=tpugraphs data.root=null", "setting data.root=None: expected the path of the TpuGraphs download when data.kind=tpugraphs"),
    ("data=tpugraphs data.synthesized_by=[programs]",
     "setting data.synthesized_by=['programs']: expected [] for data.kind=tpugraphs (dvc.yaml runs stage synthesize "
     "once per entry)"),
    ("data.synthesized_by=[]", "setting data.synthesized_by=[]: expected ['programs'] for data.kind=synthetic"),
    ("data.generator.builder=templates", "setting data.synthesized_by=['programs']: expected ['templates'] for"),
    ("gnn.lr=[", "setting overrides=['gnn.lr=[']: expected overrides Hydra accepts"),
    ("prune.normalize.log_columns=[*_product,nope_*]",
     "setting prune.normalize.log_columns[1]='nope_*': expected an fnmatch pattern matching some node_feat column"),
    ("gnn=gst gnn.norm=instance", "setting gnn.norm='instance': expected layer or none when gnn.mode=gst"),
    ("gnn=gst gnn.norm={tile:instance,random:instance,default:layer}",
     "setting gnn.norm.random='instance': expected layer or none when gnn.mode=gst"),
    ("ensemble.prefer=gnn ensemble.members=[heuristic,lgbm]",
     "setting ensemble.prefer='gnn': expected null or one of ensemble.members ['heuristic', 'lgbm']"),
    ("ensemble.tolerance=-0.1", "setting ensemble.tolerance=-0.1: expected a finite number >= 0.0"),
    ("lgbm.layout.objective=rank_xendcg lgbm.layout.label_grades=60",
     "setting lgbm.layout.label_grades=60: expected an integer 2..31 for objective rank_xendcg"),
])
def test_bad_settings_are_named_in_one_line(override, message):
    with pytest.raises(SettingsError) as info:
        compose(override.split(" "))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_by_search_entries_must_cover_the_configured_collections():
    with pytest.raises(SettingsError, match=r"gnn.lr=.*missing \['random'\]"):
        compose(["~gnn.lr.random"])
    with pytest.raises(SettingsError, match="setting gnn.lr.fast='0.1': expected a known key .*did you mean gnn.lr?"):
        compose(["+gnn.lr.fast=0.1"])
    with pytest.raises(SettingsError, match=r"setting gnn.norm.tile='batch': expected one of \['instance'"):
        compose(["gnn=gst", "gnn.norm.tile=batch"])        # gnn=gst gives norm by search
    cfg = OmegaConf.to_container(compose())
    cfg["gnn"]["lr"]["fast"] = 0.1                          # params.yaml edited by hand
    with pytest.raises(SettingsError, match=r"setting gnn.lr.fast=0.1: expected no such entry: gnn.lr takes"):
        validate(cfg)
    cfg["gnn"]["lr"] = 0.1
    cfg["synthesize"] = None
    with pytest.raises(SettingsError, match="setting synthesize=None: expected a mapping"):
        validate(cfg)
    assert compose(["~gnn.lr.random", "data.collections=[tile-xla,layout-xla-default]"]).gnn.lr.tile == 2e-3


def test_prune_hops_by_search_needs_each_layout_search_but_no_tile_entry():
    with pytest.raises(SettingsError, match=r"setting prune.hops=.*missing \['default'\]"):
        compose(["~prune.hops.default"])                              # conf holds {random: 1, default: 1}
    with pytest.raises(SettingsError, match=r"setting prune.hops.random=-2: expected an integer >= 0"):
        compose(["prune.hops={random: -2, default: 1}"])
    cfg = compose(["prune.hops={random: all, default: 2}"])          # tile-xla configured, no tile entry needed
    assert dict(cfg.prune.hops) == {"random": "all", "default": 2}
    assert dict(compose().prune.hops) == {"random": 1, "default": 1}           # the measured default
    assert compose(["prune.hops=2"]).prune.hops == 2                 # a plain value still works


def test_min_std_by_search_needs_an_entry_for_every_configured_collection_tile_included():
    with pytest.raises(SettingsError, match=r"setting prune.normalize.min_std=.*missing \['tile'\]"):
        compose(["~prune.normalize.min_std.tile"])                                # tile-xla is configured
    with pytest.raises(SettingsError, match=r"setting prune.normalize.min_std.default=-1: expected a finite number"):
        compose(["prune.normalize.min_std.default=-1"])
    cfg = compose(["~prune.normalize.min_std.tile", "data.collections=[layout-xla-random,layout-xla-default]"])
    assert dict(cfg.prune.normalize.min_std) == {"random": 1.0, "default": 0.0}   # no tile collection: no entry
    assert dict(compose().prune.normalize.min_std) == {"tile": 0.0, "random": 1.0, "default": 0.0}  # measured
    assert compose(["prune.normalize.min_std=2"]).prune.normalize.min_std == 2    # a plain value still works


def test_every_preset_and_params_yaml_are_valid():
    for group in ("data", "gnn"):
        for option in sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml")):
            extra = ["data.root=/download"] if option == "tpugraphs" else []
            assert compose([f"{group}={option}", *extra])[group] is not None
    assert compose(["prune.hops=all", "gnn.lr=0.5", "gnn.norm=layer", "gnn.steps_per_epoch=3"]).prune.hops == "all"
    validate(OmegaConf.to_container(OmegaConf.load(ROOT / "params.yaml")))


def test_params_yaml_is_checked_too(tmp_path):
    cfg = OmegaConf.to_container(compose())
    cfg["gnn"]["epoch"] = 3
    (tmp_path / "params.yaml").write_text(OmegaConf.to_yaml(cfg))
    with pytest.raises(SettingsError, match="setting gnn.epoch=3: .*did you mean gnn.epochs"):
        load_cfg([], params_file=tmp_path / "params.yaml")
    (tmp_path / "params.yaml").write_text("gnn: [1, 2\n")
    with pytest.raises(SettingsError, match="params.yaml='<unreadable>': expected a YAML mapping"):
        load_cfg([], params_file=tmp_path / "params.yaml")


def test_override_keys_are_checked_before_hydra():
    check_overrides(["gnn.lr.tile=1", "synthesize.search.swap_prob=1", "data.generator.seed=1", "hydra.job.num=1",
                     "gnn=gst", "lgbm.eval_at.0=10"], ROOT / "conf")
    with pytest.raises(SettingsError, match="did you mean prune.chunk_size"):
        check_overrides(["prune.chunksize=3"], ROOT / "conf")
    assert "gnn.gst.segment_size" in known_keys() and "lgbm.features.opcodes" in known_keys()
    for nameless in ("=5", "+=1", "gnn.=3", ".lr=1", "~"):          # was "setting ='5': ... (conf//*.yaml)"
        with pytest.raises(PipelineError, match=rf"^override '{re.escape(nameless)}': expected KEY=VALUE"):
            check_overrides([nameless], ROOT / "conf")


def test_the_libraries_act_on_the_choices_the_schema_checks():
    """One declaration (pipeline/choices.py): the schema and every library use the same tuples, not copies."""
    from pipeline import choices
    from pipeline.ensembling.blend import WEIGHTINGS
    from pipeline.features.table import ALL_GROUPS, NODE_STATS
    from pipeline.graphnet.attention import MIXERS
    from pipeline.graphnet.layers import NORMS
    from pipeline.graphnet.losses import LOSSES
    from pipeline.graphnet.model import REDUCTIONS
    from pipeline.graphnet.schedule import SCHEDULES
    from pipeline.graphnet.segments import SEGMENTATIONS
    from pipeline.graphnet.train_loop import pick_device
    from pipeline.lgbm_model.train import LABEL_GAINS, OBJECTIVES
    from pipeline.pruned import WHOLE_GRAPH
    from pipeline.pruning.dedup import DEDUP_MODES
    from pipeline.synthesize import BUILDERS

    used = (NORMS, REDUCTIONS, LOSSES, SCHEDULES, SEGMENTATIONS, WHOLE_GRAPH, DEDUP_MODES, ALL_GROUPS,
            OBJECTIVES, LABEL_GAINS, WEIGHTINGS, BUILDERS)
    declared = (choices.GNN_NORMS, choices.GNN_REDUCTIONS, choices.GNN_LOSSES,
                choices.GNN_SCHEDULES, choices.GST_SEGMENTATIONS, choices.PRUNE_WHOLE_GRAPH,
                choices.PRUNE_DEDUP_MODES, choices.LGBM_FEATURE_GROUPS, choices.LGBM_OBJECTIVES,
                choices.LGBM_LABEL_GAINS, choices.ENSEMBLE_WEIGHTINGS, choices.SYNTH_BUILDERS)
    assert all(a is b for a, b in zip(used, declared, strict=True))
    assert (tuple(MIXERS), tuple(NODE_STATS)) == (choices.GNN_MIXERS, choices.LGBM_NODE_STATS)
    assert (GNN_NORMS, GNN_MIXERS, GST_SEGMENTATIONS) == (NORMS, tuple(MIXERS), SEGMENTATIONS)
    assert GNN_DEVICES == ("auto", "cpu", "cuda") and pick_device("cpu").type == "cpu"
    assert pick_device("auto").type in ("cpu", "cuda")
    from pipeline.tuning.scorers import MODELS as TUNING_MODELS
    from pipeline.tuning.search import ALGORITHMS

    assert TUNING_MODELS is choices.AUTOTUNE_MODELS and ALGORITHMS is choices.AUTOTUNE_ALGORITHMS


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["-m", "pipeline.config", "gnn.epoch=3"],
    ["-m", "pipeline.gnn", "--collection", "tile-xla", "gnn.lr=abc"],
    ["-m", "pipeline.prune", "--collection", "tile-xla", "prune.hops=1.7"],
    ["-m", "pipeline.submit", "--check", "x.csv", "submit.tile_top_k=0"],
    ["-m", "pipeline.heuristic", "--collection", "tile:xla2"],
])
def test_command_line_errors_are_one_line_without_traceback(command):
    done = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and done.stderr.startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr


def test_schema_models_are_predicts_and_the_model_stages_of_dvc_yaml():
    import yaml

    from pipeline.predict import MODELS
    from pipeline.settings_schema import MODEL_STAGES, MODELS as SCHEMA_MODELS

    assert set(SCHEMA_MODELS) == set(MODELS) and set(MODEL_STAGES) | {"ensemble"} == set(MODELS)
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert set(MODEL_STAGES) < set(stages) and "ensemble" in stages
