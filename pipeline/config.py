"""Configuration: compose conf/ with Hydra, or read params.yaml (what DVC tracked).

Every stage calls `load_cfg(argv)`: with no `key=value` overrides it reads params.yaml, so `dvc repro` runs exactly
what DVC recorded; with overrides it composes conf/ with them the way `dvc exp run -S` does, and leaves
params.yaml alone. `python -m pipeline.config [overrides]` regenerates params.yaml.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from collections.abc import Mapping
from typing import Callable, Sequence

from omegaconf import DictConfig, OmegaConf

from pipeline.files import write_text

CONF_DIR = "conf"
CONFIG_NAME = "config"
PARAMS_FILE = "params.yaml"


def repo_root() -> Path:
    """The repository root: DVC's DVC_ROOT when set, else the folder above this package."""
    return Path(os.environ.get("DVC_ROOT") or Path(__file__).resolve().parent.parent)


def compose(overrides: Sequence[str] = (), conf_dir: Path | None = None) -> DictConfig:
    """Compose conf/ with Hydra overrides and resolve it, exactly as `dvc exp run -S` does."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    conf_dir = Path(conf_dir or repo_root() / CONF_DIR).resolve()
    with initialize_config_dir(config_dir=str(conf_dir), version_base=None):
        cfg = hydra_compose(config_name=CONFIG_NAME, overrides=list(overrides))
    OmegaConf.resolve(cfg)
    return cfg


def split_overrides(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split argv into Hydra overrides (`key=value`, `group=option`, `+key=v`) and everything else."""
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    rest = [a for a in argv if a not in overrides]
    return overrides, rest


def load_cfg(argv: Sequence[str] | None = None, params_file: Path | None = None) -> DictConfig:
    """The configuration a stage runs with: params.yaml, or conf/ composed with the overrides in argv."""
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides, _ = split_overrides(argv)
    if overrides:
        return compose(overrides)
    path = Path(params_file or PARAMS_FILE)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no params.yaml here; run `python -m pipeline.config` from the repo root")
    return OmegaConf.load(path)


def stage_args(description: str, argv: Sequence[str] | None = None, collection: bool = True,
               add_flags: Callable[[argparse.ArgumentParser], None] | None = None):
    """Parse a stage's own flags (`--collection`, plus any `add_flags` adds) and load its config from the overrides.

    Returns (args, cfg). Used by every `pipeline.<stage>.main`.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides, rest = split_overrides(argv)
    parser = argparse.ArgumentParser(description=description)
    if collection:
        parser.add_argument("--collection", required=True, help="e.g. layout-xla-random or layout:xla:random")
    if add_flags is not None:
        add_flags(parser)
    args = parser.parse_args(rest)
    return args, load_cfg(overrides)


def by_search(value, key: str, kind: str, search: str | None):
    """A setting given once, or as a mapping by search (`random` / `default`) with a `tile` entry for tile graphs.

    `key` names the setting in messages (e.g. "gnn.lr"); `kind` and `search` are the collection's.
    """
    if not isinstance(value, Mapping):
        return value
    entry = "tile" if kind == "tile" else search
    if entry not in value:
        raise ValueError(f"{key} has no entry {entry!r} for a {kind} graph of search {search!r}; "
                         f"found {list(value)}")
    return value[entry]


def write_params(cfg: DictConfig, path: Path | str = PARAMS_FILE) -> None:
    """Write cfg to params.yaml the way DVC's Hydra integration does (resolved, no comments)."""
    write_text(OmegaConf.to_yaml(cfg, resolve=True), path)


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m pipeline.config [overrides]`: regenerate params.yaml from conf/."""
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides, rest = split_overrides(argv)
    if rest:
        raise SystemExit(f"pipeline.config takes only Hydra overrides (key=value), got {rest}")
    write_params(compose(overrides))
    print(f"wrote {PARAMS_FILE} ({len(overrides)} override(s))")


if __name__ == "__main__":
    main()
