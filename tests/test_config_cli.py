"""The command line of the stages and of pipeline.config: --help lists settings, --cfg job prints the config."""
import subprocess
import sys

import pytest
import yaml

from pipeline.config import repo_root
from pipeline.config import group_help, groups_help, main, stage_args


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
    assert "grid_step: 0.05" in out and "# weight grid resolution on the simplex" in out and "--cfg" in out


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
    assert "gnn: default, gst, kaggle" in out and "data=synthetic_ci" in out
    main(["--cfg", "job", "gnn=kaggle"])               # prints, writes nothing
    assert yaml.safe_load(capsys.readouterr().out)["gnn"]["hidden"] == 256
    assert "data: " in groups_help()


def test_stage_help_from_the_shell_names_its_own_group():
    result = cli("pipeline.lgbm", "--help")
    assert result.returncode == 0 and "conf/lgbm/default.yaml" in result.stdout and "num_leaves:" in result.stdout
