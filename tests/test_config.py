from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pipeline.config import compose, load_cfg, split_overrides, stage_args

ROOT = Path(__file__).resolve().parent.parent


def test_params_yaml_is_in_sync_with_conf():
    """params.yaml is what DVC tracks; regenerate it with `python -m pipeline.config` when conf/ changes."""
    committed = OmegaConf.to_container(OmegaConf.load(ROOT / "params.yaml"))
    assert committed == OmegaConf.to_container(compose()), "params.yaml is stale: run `python -m pipeline.config`"


def test_no_overrides_reads_params_yaml(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(OmegaConf.to_yaml(compose(["heuristic.chunk_size=3"])))
    assert load_cfg([], params_file=params).heuristic.chunk_size == 3


def test_overrides_change_what_a_stage_sees():
    args, cfg = stage_args("x", ["--collection", "tile-xla", "heuristic.chunk_size=7", "data=programs_ci"])
    assert args.collection == "tile-xla"
    assert cfg.heuristic.chunk_size == 7
    assert cfg.data.name == "programs_ci"
    assert compose().heuristic.chunk_size != 7


def test_group_swap_to_real_data_takes_root():
    cfg = compose(["data=tpugraphs", "data.root=/some/download"])
    assert cfg.data.kind == "tpugraphs" and cfg.data.root == "/some/download"


def test_split_overrides_keeps_flags_apart():
    assert split_overrides(["--collection", "tile-xla", "gnn.lr=1", "+x=2"]) == (["gnn.lr=1", "+x=2"], ["--collection", "tile-xla"])


def test_a_params_yaml_that_is_not_utf8_is_named_in_one_line(tmp_path):
    """A hand-edited params.yaml saved in another encoding: one line naming it, no UnicodeDecodeError traceback."""
    import pytest
    from pipeline.settings_types import SettingsError

    params = tmp_path / "params.yaml"
    params.write_bytes(b"\xff\xfe gnn: 1\n")
    with pytest.raises(SettingsError, match=r"^setting .*params\.yaml='<unreadable>': expected a YAML mapping "
                                            r"\('utf-8' codec can't decode"):
        load_cfg([], params_file=params)


def test_split_overrides_leaves_paths_and_flag_values_with_an_equals_sign_alone(tmp_path, monkeypatch):
    """A token with a `=` is an override only with a Hydra key, not after a flag that takes a value, and not when it
    names an existing file (`lr=0.1/p.hlo.txt` relative to the working folder)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lr=0.1").mkdir()
    (tmp_path / "lr=0.1" / "p.hlo.txt").write_text("HloModule m\n")
    argv = ["lr=0.1/p.hlo.txt", "/abs/b=2/q.hlo.txt", "--out", "runs/x=1", "--builtin", "gnn.lr=1", "+x=2", "~y",
            "hydra/launcher=basic", "data@d=tpugraphs"]
    assert split_overrides(argv, {"--out"}) == (
        ["gnn.lr=1", "+x=2", "~y", "hydra/launcher=basic", "data@d=tpugraphs"],
        ["lr=0.1/p.hlo.txt", "/abs/b=2/q.hlo.txt", "--out", "runs/x=1", "--builtin"])


def test_a_flag_value_with_an_equals_sign_stays_the_flag_value():
    def add_flags(parser):
        parser.add_argument("path")
        parser.add_argument("--out")

    args, cfg = stage_args("x", ["/runs/lr=0.1/p.hlo.txt", "--out", "ranks/x=1.csv", "heuristic.chunk_size=7"],
                           collection=False, add_flags=add_flags)
    assert (args.path, args.out, cfg.heuristic.chunk_size) == ("/runs/lr=0.1/p.hlo.txt", "ranks/x=1.csv", 7)


def test_a_dvc_root_without_conf_is_one_line_naming_it(tmp_path, monkeypatch):
    """DVC_ROOT set by hand to a folder without conf/ (or nowhere): `python -m pipeline.config` said '<root>/conf:
    no such file or folder; expected the output of an earlier stage', an override on any command 'Primary config
    directory not found.', neither naming DVC_ROOT."""
    from pipeline.settings_types import SettingsError

    for root in (tmp_path, tmp_path / "nowhere"):
        monkeypatch.setenv("DVC_ROOT", str(root))
        with pytest.raises(SettingsError, match=rf"^setting DVC_ROOT \(environment variable\)='{root}': expected unset "
                                                r"or the repository root, a folder holding conf/"):
            compose(["data=programs_ci"])
