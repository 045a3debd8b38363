"""The command line of the stages and of pipeline.config: --help lists settings, --cfg job prints the config."""
import subprocess
import sys

import pytest
import yaml

from pipeline.config import repo_root
from pipeline.config import group_help, groups_help, main, stage_args
from pipeline.settings_types import SettingsError


def cli(*args):
    return subprocess.run([sys.executable, "-m", *args], cwd=repo_root(), capture_output=True, text=True)


def test_group_help_lists_keys_defaults_and_comments(tmp_path):
    (tmp_path / "lgbm").mkdir()
    (tmp_path / "lgbm" / "default.yaml").write_text("num_leaves: 31   # leaves per tree\n")
    text = group_help("lgbm", tmp_path)
    assert "override as lgbm.<key>=<value>" in text and "  num_leaves: 31   # leaves per tree" in text
    assert group_help("nothing_here", tmp_path) is None and group_help(None) is None


def test_stage_help_shows_its_group_file(capsys):
    with pytest.raises(SystemExit) as stop:
        stage_args("d", ["--help"], group="ensemble")
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "grid_step: 0.25" in out and "# weight grid resolution on the simplex" in out and "--cfg" in out


def test_cfg_job_prints_the_resolved_config_with_overrides(capsys):
    with pytest.raises(SystemExit) as stop:
        stage_args("d", ["--cfg", "job", "ensemble.grid_step=0.1"])     # no --collection needed to look
    assert stop.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["ensemble"]["grid_step"] == 0.1 and printed["paths"]["models_dir"] == "models"


def test_pipeline_config_help_and_cfg_job(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "gnn: default, gst, kaggle" in out and "data=programs_ci" in out
    main(["--cfg", "job", "gnn=kaggle"])               # prints, writes nothing
    assert yaml.safe_load(capsys.readouterr().out)["gnn"]["hidden"] == 256
    assert "data: " in groups_help()


def test_cfg_job_previews_what_the_command_writes_whatever_the_selection(tmp_path, monkeypatch, capsys):
    """`python -m pipeline.config --cfg job ARGS` prints what `python -m pipeline.config ARGS` writes, whose ARGS
    replace the current selection: the preview used to layer them on it (under a smoke selection it showed smoke's
    epochs for `data=programs_ci`, and `--cfg job +experiment=smoke` failed as a repeated default)."""
    import shutil
    from omegaconf import OmegaConf
    from pipeline import selection
    from pipeline.config import compose

    shutil.copytree(repo_root() / "conf", tmp_path / "conf")
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    selection.write_selection(["+experiment=smoke", "gnn.epochs=4"], tmp_path / "conf")
    for overrides in (["data=programs_ci"], ["+experiment=smoke"]):
        main(["--cfg", "job", *overrides])
        shown = yaml.safe_load(capsys.readouterr().out)
        assert shown == OmegaConf.to_container(compose(overrides, tmp_path / "conf", with_selection=False))
    assert shown["gnn"]["epochs"] == 2 and compose([], tmp_path / "conf").gnn.epochs == 4   # the selection stays


def test_stage_help_from_the_shell_names_its_own_group():
    result = cli("pipeline.lgbm", "--help")
    assert result.returncode == 0 and "conf/lgbm/default.yaml" in result.stdout and "num_leaves:" in result.stdout


def test_adhoc_run_says_it_writes_over_dvc_outputs(capsys):
    stage_args("d", ["ensemble.grid_step=0.1"], collection=False)
    assert "writes over its DVC-tracked outputs" in capsys.readouterr().err
    stage_args("d", ["ensemble.grid_step=0.1"], collection=False, dvc_outputs=False)
    assert capsys.readouterr().err == ""


def test_local_group_sticks_to_every_composition(tmp_path):
    """An optional conf/local/default.yaml (copied from example.yaml) applies to every composition; the
    command line still wins; with no file nothing changes."""
    import shutil
    from pipeline.config import compose

    conf = tmp_path / "conf"
    shutil.copytree(repo_root() / "conf", conf)
    (conf / "local" / "default.yaml").unlink(missing_ok=True)
    assert compose([], conf).data.name == compose([], repo_root() / "conf").data.name
    local = (conf / "local" / "example.yaml").read_text().replace("/data/npz_all", "/mnt/tpu")
    (conf / "local" / "default.yaml").write_text(local.replace("num_threads: 2", "num_threads: 7", 1))
    cfg = compose([], conf)
    # machine settings only: the preset stays the default, the TpuGraphs root applies when data=tpugraphs
    assert (cfg.data.name, cfg.gnn.num_threads) == (compose([], repo_root() / "conf").data.name, 7)
    assert cfg.data.root == cfg.paths.synthetic_dir
    assert compose(["data=tpugraphs"], conf).data.root == "/mnt/tpu"
    assert compose(["gnn.num_threads=3"], conf).gnn.num_threads == 3


def test_the_selection_sticks_to_every_composition_dvc_exp_run_included(tmp_path):
    """`python -m pipeline.config data=programs_ci gnn.lr=3e-4` keeps its overrides (conf/selection/current.yaml):
    a later composition with other overrides (an ad-hoc stage, `--cfg job`, DVC's own `dvc exp run -S`) starts
    from them; the command line still wins; no overrides resets it."""
    import shutil
    from dvc.utils.hydra import compose_and_dump
    from omegaconf import OmegaConf
    from pipeline import selection
    from pipeline.config import compose

    conf = tmp_path / "conf"
    shutil.copytree(repo_root() / "conf", conf)
    (conf / "local" / "default.yaml").unlink(missing_ok=True)
    default = compose([], conf, with_selection=False)
    selection.write_selection(["data=programs_ci", "gnn.lr=3e-4", "gnn.seeds=[0,1]"], conf)
    assert selection.read_selection(conf) == "data=programs_ci gnn.lr=3e-4 gnn.seeds=[0,1]"
    assert compose([], conf) == compose(["data=programs_ci", "gnn.lr=3e-4", "gnn.seeds=[0,1]"], conf,
                                        with_selection=False)
    adhoc = compose(["gnn.hidden=16"], conf)
    assert (adhoc.data.name, adhoc.gnn.lr, list(adhoc.gnn.seeds), adhoc.gnn.hidden) == ("programs_ci", 3e-4, [0, 1], 16)
    assert compose(["data=programs", "gnn.lr=0.01"], conf).data.name == "programs"
    compose_and_dump(tmp_path / "params.yaml", str(conf), None, "config", "", ["gnn.hidden=16"])   # dvc exp run -S
    assert OmegaConf.load(tmp_path / "params.yaml") == adhoc
    selection.write_selection([], conf)
    assert compose([], conf) == default and selection.read_selection(conf) == ""
    with pytest.raises(SettingsError, match="a deletion or a sweep is not kept"):
        selection.selection_config(["gnn.lr=1e-3,3e-4"], conf)


def test_a_missing_data_root_is_refused_before_dvc(tmp_path):
    """Any preset whose data.root is not there (and not generated by synthesize) stops `pipeline.config` in one
    line naming the key, before params.yaml or the selection change."""
    params = (repo_root() / "params.yaml").read_bytes()
    result = cli("pipeline.config", "data=programs_ci", f"data.root={tmp_path / 'gone'}")
    assert result.returncode == 2 and (repo_root() / "params.yaml").read_bytes() == params
    assert result.stderr.strip() == (f"error: data.root={tmp_path / 'gone'}: no such folder (preset "
                                     f"data=programs_ci); set data.root=<an existing folder>, or the preset's root "
                                     f"in conf/local/default.yaml")


def test_experiment_presets_compose():
    from pipeline.config import compose

    smoke = compose(["+experiment=smoke"])
    assert smoke.data.name == "programs_ci" and smoke.gnn.epochs == 2
    gpu = compose(["+experiment=kaggle_gpu", "data.root=/mnt/tpu"])
    assert (gpu.data.kind, gpu.gnn.hidden, gpu.gnn.device) == ("tpugraphs", 256, "cuda")


def test_real_data_without_its_files_fails_in_one_line_before_dvc(tmp_path):
    """data=tpugraphs reads paths.tpugraphs_dir by default; with nothing there `python -m pipeline.config` stops in
    one line naming the folder and the download command, and leaves params.yaml alone (so `&& dvc repro` never
    starts); an explicit null root is refused by the schema."""
    params = (repo_root() / "params.yaml").read_bytes()
    result = cli("pipeline.config", "data=tpugraphs", f"paths.tpugraphs_dir={tmp_path / 'none'}")
    assert result.returncode == 2 and (repo_root() / "params.yaml").read_bytes() == params
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: data.root={tmp_path / 'none'}: no TpuGraphs data there (")
    assert "found no such folder" in line and line.endswith("run `python -m pipeline.download` or set "
                                                            "data.root=<folder holding npz/>")
    result = cli("pipeline.config", "data=tpugraphs", "data.root=null")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: setting data.root=None: expected the path of the TpuGraphs download when data.kind=tpugraphs"]


def test_real_data_lacking_a_chosen_collection_names_the_ones_it_holds(tmp_path):
    """A download holding only some collections (no nlp folders, say) used to pass `python -m pipeline.config` and
    stop in stage prune naming a missing folder; now the command stops first, naming the collections to choose."""
    params = (repo_root() / "params.yaml").read_bytes()
    for sub in ("tile/xla/train", "layout/xla/random/train", "layout/xla/default/train"):
        (tmp_path / "npz" / sub).mkdir(parents=True)
    result = cli("pipeline.config", "data=tpugraphs", f"data.root={tmp_path}")
    assert result.returncode == 2 and (repo_root() / "params.yaml").read_bytes() == params
    assert result.stderr.strip().splitlines() == [
        f"error: data.root={tmp_path}: no layout-nlp-random, layout-nlp-default folder(s) under {tmp_path / 'npz'}; "
        f"name the collections it holds: 'data.collections=[tile-xla,layout-xla-random,layout-xla-default]'"]


def test_threads_above_the_cores_warn(capsys):
    from pipeline.config import warn_threads

    assert warn_threads("gnn.num_threads", 8, cores=2) is True
    assert capsys.readouterr().err.strip() == ("warning: gnn.num_threads=8 but this machine has 2 core(s); set "
                                               "gnn.num_threads=2 (or in conf/local/default.yaml) to avoid "
                                               "oversubscribing them")
    assert warn_threads("gnn.num_threads", 2, cores=2) is False and capsys.readouterr().err == ""


def test_the_selection_wins_over_the_machine_settings_as_the_command_line_does(tmp_path):
    """A conf/local/default.yaml that sets keys the selection also sets (directly or through `+experiment=smoke`)
    composes, with the selection, to what the same overrides give on the command line: `python -m pipeline.config
    +experiment=smoke` on such a machine used to stop with 'does not compose to what ... did'."""
    import shutil
    from pipeline import selection
    from pipeline.config import compose

    conf = tmp_path / "conf"
    shutil.copytree(repo_root() / "conf", conf)
    (conf / "local" / "default.yaml").write_text("# @package _global_\ngnn:\n  seeds: [0, 1]\n  epochs: 1\n"
                                                 "  num_threads: 1\nlgbm:\n  num_boost_round: 5\n")
    for overrides in (["+experiment=smoke"], ["data=programs_ci", "gnn.epochs=7", "lgbm.num_boost_round=9"]):
        selection.write_selection(overrides, conf)
        chosen = compose([], conf)
        assert chosen == compose(overrides, conf, with_selection=False)
        assert chosen.gnn.num_threads == 1                      # the machine's setting, not chosen: kept
    assert (chosen.gnn.epochs, chosen.lgbm.num_boost_round, list(chosen.gnn.seeds)) == (7, 9, [0, 1])
    selection.write_selection(["+experiment=smoke"], conf)
    assert (compose([], conf).gnn.epochs, list(compose([], conf).gnn.seeds)) == (2, [0])


@pytest.mark.parametrize("text, words", [
    (b"gnn: [unclosed\n", "expected UTF-8 YAML text (while parsing a flow sequence)"),
    (b"\xff\xfe bad", "expected UTF-8 YAML text ('utf-8' codec can't decode byte 0xff"),
    (b"gnn:\n  num_threads: 3\n", "expected '# @package _global_' as the first line"),
])
def test_a_malformed_local_file_is_named_in_one_line(tmp_path, text, words):
    """conf/local/default.yaml that is not YAML, not UTF-8, or lacks `# @package _global_` (its keys would land
    under `local`) is refused naming the file, not with a traceback or as an unknown key `local`."""
    import shutil
    from pipeline.config import compose

    conf = tmp_path / "conf"
    shutil.copytree(repo_root() / "conf", conf)
    (conf / "local" / "default.yaml").write_bytes(text)
    with pytest.raises(SettingsError) as refused:
        compose([], conf)
    assert str(refused.value).startswith(f"setting {conf / 'local' / 'default.yaml'}=") and words in str(refused.value)
    (conf / "local" / "default.yaml").write_text("# nothing set on this machine yet\n")     # empty: accepted
    assert compose([], conf) == compose([], repo_root() / "conf")


def test_a_bad_wandb_mode_in_the_environment_exits_before_any_work(monkeypatch):
    """WANDB_MODE wins over wandb.mode: a value wandb does not know exits in one line when the stage starts, not
    with a traceback after its work (tracking.start_run runs last)."""
    monkeypatch.setenv("WANDB_MODE", "bogus")
    with pytest.raises(SystemExit, match=r"^error: setting WANDB_MODE \(environment variable\)='bogus': expected "
                                         r"unset or one of \['offline', 'online', 'disabled'\]$"):
        stage_args("d", ["--collection", "tile-xla", "seed=1"])
