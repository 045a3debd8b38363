"""The current selection: the overrides `python -m pipeline.config` was last given, kept where every entry point
composes from.

`python -m pipeline.config data=programs_ci gnn.lr=3e-4` writes them to conf/selection/current.yaml (a Hydra
config of the `selection` group: `override /<group>: <option>` in its defaults, values as keys), and
conf/config.yaml includes it after its own values and after conf/local/ (this machine's settings), so a chosen
value wins over the machine's, as the same override on the command line does. So `dvc repro` (params.yaml), `dvc
exp run -S ...` (DVC's Hydra composition), ad-hoc stage runs, `pipeline.sweep`, `--cfg job` and
`pipeline.predict` all start from the same choice, and command-line overrides apply on top of it. `python -m
pipeline.config` with no overrides resets the selection to conf/'s defaults. The file is committed with
params.yaml (a test checks that the two agree).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Sequence

import yaml
from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.files import remove, write_text
from pipeline.settings_types import SettingsError

GROUP = "selection"                      # conf/<GROUP>/<NAME>.yaml, `optional selection: current` in config.yaml
NAME = "current"
HYDRA = "hydra"                          # Hydra's own config node and groups (hydra.job.name, hydra/launcher)
DROP = f"~{GROUP}"                       # the Hydra override that composes conf/ without the selection
HEADER = ("# @package _global_\n"
          "# The current selection, written by `python -m pipeline.config{args}` (pipeline/selection.py): every\n"
          "# composition starts from it (dvc exp run -S, ad-hoc stage runs, sweep, --cfg job, predict). Do not edit;\n"
          "# rerun `python -m pipeline.config [overrides]` (none: conf/'s defaults).\n")


def selection_file(conf_dir: Path) -> Path:
    """conf/selection/current.yaml."""
    return Path(conf_dir) / GROUP / f"{NAME}.yaml"


def selection_config(overrides: Sequence[str], conf_dir: Path) -> dict:
    """The Hydra config that applies `overrides` when included: group choices as `override /group: option` (or
    `/group: option` for `+group=option`) in its defaults list, every other value under its dotted key.

    A deletion (`~key`), a sweep or Hydra's own settings (`hydra.*`, `hydra/...`) cannot be kept in a config:
    SettingsError naming it.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    defaults: list = []
    values = OmegaConf.create()
    for override in overrides:
        try:
            (parsed,) = OverridesParser.create().parse_overrides([override])
        except HydraException as error:
            raise SettingsError("overrides", override, f"an override Hydra accepts ({error})") from None
        key = parsed.key_or_group
        if key.split(".")[0].split("/")[0] == HYDRA:
            raise SettingsError(key, override, "a setting or preset of conf/ (Hydra's own settings, hydra.* and "
                                               "hydra/..., change no output and are not kept: give them to the "
                                               "command they are for)")
        if parsed.is_delete() or parsed.is_sweep_override():
            raise SettingsError(key, override, "a value or a preset to keep (a deletion or a sweep is not kept: "
                                               "edit conf/, or use `python -m pipeline.sweep`)")
        if "." not in key and (Path(conf_dir) / key).is_dir():
            defaults.append({(f"/{key}" if parsed.is_add() else f"override /{key}"): parsed.value()})
            continue
        OmegaConf.update(values, key, parsed.value(), force_add=True)
    return {**({"defaults": defaults} if defaults else {}), **OmegaConf.to_container(values)}


def write_selection(overrides: Sequence[str], conf_dir: Path) -> None:
    """Keep `overrides` as the current selection (no overrides: remove it, so conf/'s defaults apply)."""
    path = selection_file(conf_dir)
    if not overrides:
        remove(path)
        return
    body = OmegaConf.to_yaml(OmegaConf.create(selection_config(overrides, conf_dir)))
    write_text(HEADER.format(args="".join(f" {o}" for o in overrides)) + body, path)


def keep_selection(overrides: Sequence[str], conf_dir: Path, composes: Callable[[], bool]) -> None:
    """Write the selection of `overrides`, then check that every composition gives what they did (`composes`, e.g.
    `compose() == cfg`); when it does not, or a composition is refused, put the previous selection back and raise
    SettingsError, so a refused `python -m pipeline.config` changes no file."""
    path = selection_file(conf_dir)
    previous = path.read_text() if path.is_file() else None
    write_selection(overrides, conf_dir)
    try:
        if not composes():
            raise SettingsError("overrides", list(overrides), f"overrides that {path} keeps (it composes to another "
                                                              f"configuration)")
    except SettingsError:
        if previous is None:
            remove(path)
        else:
            write_text(previous, path)
        raise


def read_selection(conf_dir: Path) -> str:
    """The overrides of the current selection as `pipeline.config` was given them ('' for conf/'s defaults)."""
    path = selection_file(conf_dir)
    if not path.is_file():
        return ""
    first = path.read_text().splitlines()[1]
    return first.partition("python -m pipeline.config")[2].partition("`")[0].strip()


OPTIONAL_GROUPS = ("local", GROUP)     # conf/config.yaml's `optional` groups: files a user writes


def check_optional_groups(cfg: DictConfig, conf_dir: Path) -> None:
    """An optional group's file (conf/local/default.yaml, the selection) without `# @package _global_` as its first
    line lands under its group's key instead of the root: refused naming the file, not as an unknown key (an
    empty file, which sets nothing, is dropped); so is a defaults list in conf/local/default.yaml."""
    for group in OPTIONAL_GROUPS:
        if group in cfg and not cfg[group]:
            with open_dict(cfg):
                del cfg[group]
        elif group in cfg:
            files = sorted(str(p) for p in (conf_dir / group).glob("*.yaml") if "example" not in p.stem)
            raise SettingsError(", ".join(files) or f"conf/{group}", OmegaConf.to_container(cfg[group]),
                                "'# @package _global_' as the first line (as in conf/local/example.yaml), then "
                                "top-level groups such as gnn: {num_threads: 2}")
    local = conf_dir / OPTIONAL_GROUPS[0] / "default.yaml"     # machine settings: a preset there would go unseen
    body = yaml.safe_load(local.read_text(encoding="utf-8")) if local.is_file() else None
    if isinstance(body, Mapping) and "defaults" in body:
        raise SettingsError(str(local), body["defaults"], "machine settings only, no defaults list (a preset is "
                                                          "chosen by `python -m pipeline.config data=...`)")
