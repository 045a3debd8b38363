"""Configuration: compose conf/ with Hydra, or read params.yaml (what DVC tracked).

Every stage calls `load_cfg(argv)`: with no `key=value` overrides it reads params.yaml, so `dvc repro` runs exactly
what DVC recorded; with overrides it composes conf/ with them the way `dvc exp run -S` does, and leaves
params.yaml alone. `python -m pipeline.config [overrides]` keeps its overrides as the current selection
(pipeline/selection.py), which every composition includes, and regenerates params.yaml from it.

Either way the configuration is checked against pipeline/settings_schema.py before it is returned (SettingsError:
one line naming the key, the value and what is allowed); `stage_args` and `main` exit on it with status 2.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from collections.abc import Mapping
from typing import Callable, Sequence

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
import yaml
from yaml import YAMLError

from pipeline import selection
from pipeline.choices import PRUNE_WHOLE_GRAPH
from pipeline.errors import run_main
from pipeline.settings_schema import check_overrides, spec_at, validate
from pipeline.settings_types import BySearch, SettingsError

from pipeline.files import blocking_file, resolved, write_text
from pipeline.overrides import split_overrides, value_flags

CONF_DIR = "conf"
CONFIG_NAME = "config"
PARAMS_FILE = "params.yaml"
MODEL_OUTPUT_PATHS = ("models_dir", "predictions_dir", "metrics_dir", "plots_dir", "checkpoints_dir")   # paths.* a
# model stage writes (checkpoints_dir: gnn's resumable state)
STAGE_OUTPUT_PATHS = ("synthetic_dir", "pruned_dir", *MODEL_OUTPUT_PATHS, "submissions_dir")   # every stage's


def stage_output_key(cfg: DictConfig, path: str | os.PathLike, name: str = "") -> str | None:
    """The `paths.<key>` of STAGE_OUTPUT_PATHS whose folder is `path` (given as `name`: `--out`) or holds it, else
    None: tools refuse to write there (DVC owns those folders)."""
    where = resolved(path, name)
    for key in STAGE_OUTPUT_PATHS:
        owned = resolved(cfg.paths[key], f"paths.{key}")
        if where == owned or owned in where.parents:
            return key
    return None


ADHOC_NOTE = ("note: ad-hoc run: overrides given, so conf/ (the selection, conf/local/, the overrides) is composed "
              "instead of params.yaml, and this stage writes over its DVC-tracked outputs (paths.*); `dvc status` "
              "shows them changed, and `dvc repro` puts back what params.yaml gives (from DVC's run cache when it "
              "holds that run, else by running the stage)")


def repo_root() -> Path:
    """The repository root: DVC's DVC_ROOT when set (refused in one line when it holds no conf/), else the folder
    above this package."""
    root = os.environ.get("DVC_ROOT")
    if root and not (Path(root) / CONF_DIR).is_dir():
        raise SettingsError("DVC_ROOT (environment variable)", root,
                            f"unset or the repository root, a folder holding {CONF_DIR}/ (DVC sets it for a stage)")
    return Path(root or Path(__file__).resolve().parent.parent)


def compose(overrides: Sequence[str] = (), conf_dir: Path | None = None, with_selection: bool = True) -> DictConfig:
    """Compose conf/ with Hydra overrides and resolve it, exactly as `dvc exp run -S` does; validated.

    The current selection (pipeline/selection.py) is part of it unless `with_selection` is False."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException

    conf_dir = Path(conf_dir or repo_root() / CONF_DIR).resolve()
    check_overrides(overrides, conf_dir)
    drop = [] if with_selection or not selection.selection_file(conf_dir).is_file() else [selection.DROP]
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base=None):
            cfg = hydra_compose(config_name=CONFIG_NAME, overrides=[*drop, *overrides])
        OmegaConf.resolve(cfg)
    except (HydraException, OmegaConfBaseException) as error:
        raise hydra_error(error, overrides) from None
    except (YAMLError, UnicodeDecodeError) as error:
        raise unreadable_conf(error, conf_dir) from None
    selection.check_optional_groups(cfg, conf_dir)
    return checked(cfg)


def unreadable_conf(error: Exception, conf_dir: Path) -> SettingsError:
    """A one-line SettingsError naming the file of conf/ that is not YAML text (invalid YAML, not UTF-8)."""
    for path in sorted(conf_dir.rglob("*.yaml")):
        try:
            yaml.safe_load(path.read_text(encoding="utf-8"))
        except (YAMLError, UnicodeDecodeError) as found:
            return SettingsError(str(path), "<unreadable>", f"UTF-8 YAML text ({first_line(found)})")
    return SettingsError(str(conf_dir), "<unreadable>", f"UTF-8 YAML text ({first_line(error)})")


def hydra_error(error: Exception, overrides: Sequence[str]) -> SettingsError:
    """A one-line SettingsError for an override Hydra refused (syntax, or a key inside a single value)."""
    for override in overrides:
        key, _, value = override.lstrip("~+").partition("=")
        parent = key.rpartition(".")[0]
        if f"Could not override '{key}'" in str(error) and isinstance(spec_at(parent), BySearch):
            return SettingsError(key, value, f"an entry of a mapping, but {parent} holds one value here: set it "
                                             f"whole, e.g. '{parent}={{tile: ..., random: ..., default: ...}}'")
    cause = f"; {first_line(error.__cause__)}" if error.__cause__ is not None else ""
    return SettingsError("overrides", list(overrides), f"overrides Hydra accepts ({first_line(error)}{cause})")


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception message (or its type name)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def checked(cfg: DictConfig, source: str = "conf/") -> DictConfig:
    """cfg after validating every key and value against the settings schema (SettingsError on the first fault)."""
    try:
        plain = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as error:
        raise SettingsError(source, "<unresolvable>", f"a resolvable configuration ({first_line(error)})") from None
    validate(plain)
    return cfg


def load_cfg(argv: Sequence[str] | None = None, params_file: Path | None = None) -> DictConfig:
    """The configuration a stage runs with: params.yaml, or conf/ composed with the overrides in argv."""
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides, _ = split_overrides(argv)
    if overrides:
        return compose(overrides)
    path = Path(params_file or PARAMS_FILE)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no params.yaml here; run `python -m pipeline.config` from the repo root")
    try:
        cfg = OmegaConf.load(path)
    except (OmegaConfBaseException, YAMLError, UnicodeDecodeError) as error:
        raise SettingsError(str(path), "<unreadable>", f"a YAML mapping ({first_line(error)})") from None
    if not isinstance(cfg, DictConfig):
        raise SettingsError(str(path), "<not a mapping>", "a YAML mapping of the config groups")
    return checked(cfg, str(path))


def stage_args(description: str, argv: Sequence[str] | None = None, collection: bool = True,
               add_flags: Callable[[argparse.ArgumentParser], None] | None = None, group: str | None = None,
               dvc_outputs: bool = True):
    """Parse a stage's own flags (`--collection`, plus any `add_flags` adds) and load its config from the overrides.

    Returns (args, cfg). Used by every `pipeline.<stage>.main`. A setting the schema refuses exits with one line.
    `--help` lists the settings of conf/<group>/default.yaml (group: the running module's name unless given);
    `--cfg job` prints the resolved configuration and exits. An ad-hoc run (overrides given) of a stage whose
    outputs DVC tracks (`dvc_outputs`) says on stderr that it writes over them.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    group = group or main_module_group()
    parser = argparse.ArgumentParser(prog=module_prog(group), description=description, epilog=group_help(group),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cfg", choices=["job"], default=None,
                        help="print the resolved configuration (as Hydra's --cfg job does) and exit")
    if collection:
        parser.add_argument("--collection", required=not any(a.startswith("--cfg") for a in argv),
                            help="e.g. layout-xla-random or layout:xla:random")
    if add_flags is not None:
        add_flags(parser)
    overrides, rest = split_overrides(argv, value_flags(parser))
    args = parser.parse_args(rest)
    if collection and args.collection is not None:
        from pipeline.tpugraphs.dataset import Collection
        try:
            Collection.parse(args.collection)
        except ValueError as error:
            raise SystemExit(f"error: --collection: {error}") from None
    cfg = cli_cfg(overrides)
    if args.cfg == "job":
        print(OmegaConf.to_yaml(cfg, resolve=True), end="")
        raise SystemExit(0)
    check_output_paths(cfg)
    if overrides and dvc_outputs:
        print(ADHOC_NOTE, file=sys.stderr)
    exit_on_terminate()
    return args, cfg


def main_module_group() -> str | None:
    """The config group of the running `python -m pipeline.<stage>` (its module name), None when unknown."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", "") or ""
    return name.rpartition(".")[2] if name.startswith("pipeline.") else None


def module_prog(module: str | None) -> str | None:
    """The usage line's program, `python -m pipeline.<module>` (None: argparse's default, the script's name)."""
    return None if module is None else f"python -m pipeline.{module}"


def group_help(group: str | None, conf_dir: Path | None = None) -> str | None:
    """The text of conf/<group>/default.yaml (keys, defaults, comments) for --help, with how to override them."""
    if group is None:
        return None
    path = Path(conf_dir or repo_root() / CONF_DIR) / group / "default.yaml"
    if not path.is_file():
        return None
    body = "\n".join(f"  {line}" for line in path.read_text().splitlines())
    return (f"settings (conf/{group}/default.yaml; override as {group}.<key>=<value>, or see every group with "
            f"--cfg job):\n{body}")


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, else os.cpu_count())."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def warn_threads(key: str, threads: int, cores: int | None = None) -> bool:
    """Say on stderr when a thread setting (e.g. gnn.num_threads=8 of gnn=kaggle) exceeds the machine's cores,
    which oversubscribes them and slows the run down; returns whether it warned."""
    cores = available_cores() if cores is None else cores
    if threads <= cores:
        return False
    print(f"warning: {key}={threads} but this machine has {cores} core(s); set {key}={cores} "
          f"(or in conf/local/default.yaml) to avoid oversubscribing them", file=sys.stderr)
    return True


def exit_on_terminate() -> None:
    """SIGTERM / SIGHUP (a `kill`, a closed terminal, a cancelled job) raise SystemExit in the main thread, so the
    stages' try/finally blocks remove their temporary outputs instead of the process dying in place."""
    import signal
    import threading

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)


def cli_cfg(overrides: Sequence[str]) -> DictConfig:
    """load_cfg for a command line: a refused setting exits (status 2 under run_main) with one line, no traceback."""
    try:
        check_environment()
        return load_cfg(overrides)
    except SettingsError as error:
        raise SystemExit(f"error: {error}") from None


def check_environment() -> None:
    """Environment variables the stages act on, checked before any work: WANDB_MODE, which wins over wandb.mode
    (pipeline/tracking.py), must be one of wandb.mode's values (else the stage would fail after its work)."""
    mode = os.environ.get("WANDB_MODE")
    allowed = spec_at("wandb.mode").choices
    if mode and mode not in allowed:
        raise SettingsError("WANDB_MODE (environment variable)", mode, f"unset or one of {list(allowed)}")


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


def prune_hops(value, collection) -> int | None:
    """`prune.hops` (a number, `all`, or a mapping by search) -> hops for `collection` (a Collection), None = whole
    graph; tile graphs are always kept whole, so a mapping needs no tile entry (the schema checked the value)."""
    if isinstance(value, Mapping):
        if collection.kind == "tile":
            return None
        value = by_search(value, "prune.hops", collection.kind, collection.search)
    return None if str(value) == PRUNE_WHOLE_GRAPH else int(value)


def groups_help(conf_dir: Path | None = None) -> str:
    """`group: option, option ...` for every folder of conf/ (what `group=option` may choose)."""
    conf_dir = Path(conf_dir or repo_root() / CONF_DIR)
    lines = [f"  {d.name}: {', '.join(sorted(p.stem for p in d.glob('*.yaml')))}"
             for d in sorted(conf_dir.iterdir()) if d.is_dir()]
    return "config groups (group=option; keys: python -m pipeline.<stage> --help):\n" + "\n".join(lines)


FINGERPRINT_HEX_CHARS = 16      # of the sha256 of the data settings: enough to tell presets apart


def data_fingerprint(data: DictConfig) -> str:
    """`<data.name>:<hash>` of the settings that decide a collection's graphs (the `data` group less
    `collections`): stage ensemble records it with its weights, `predict --model ensemble` compares it."""
    plain = OmegaConf.to_container(data, resolve=True)
    plain.pop("collections", None)
    digest = hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()
    return f"{plain.get('name')}:{digest[:FINGERPRINT_HEX_CHARS]}"


def check_data_root(cfg: DictConfig) -> None:
    """Exit with one line when data.root names no folder (missing, or a file; any preset but a generated one at
    paths.synthetic_dir, which its synthesize stage writes) or, for data=tpugraphs, holds no dataset or lacks a
    collection of data.collections (the line names the ones it holds), before DVC reads params.yaml (DVC itself
    would stop on the missing dependency, after removing outputs)."""
    generated = cfg.data.kind == "synthetic" and Path(cfg.data.root) == Path(cfg.paths.synthetic_dir)
    if cfg.data.kind != "tpugraphs" and not generated and not Path(cfg.data.root).is_dir():
        raise SystemExit(f"error: data.root={cfg.data.root}: no such folder (preset data={cfg.data.name}); set "
                         f"data.root=<an existing folder>, or the preset's root in conf/local/default.yaml")
    if cfg.data.kind != "tpugraphs":
        return
    from pipeline.tpugraphs.dataset import Collection, npz_root
    from pipeline.tpugraphs.errors import TpuGraphsFormatError

    try:
        root = npz_root(cfg.data.root)
    except TpuGraphsFormatError as error:
        raise SystemExit(f"error: data.root={cfg.data.root}: no TpuGraphs data there ({error}); run "
                         f"`python -m pipeline.download` or set data.root=<folder holding npz/>") from None
    chosen = [Collection.parse(c) for c in cfg.data.collections]
    missing = [c.slug for c in chosen if not (root / c.subdir).is_dir()]
    if missing:
        present = ",".join(c.slug for c in chosen if c.slug not in missing)
        raise SystemExit(f"error: data.root={cfg.data.root}: no {', '.join(missing)} folder(s) under {root}; name "
                         f"the collections it holds: 'data.collections=[{present}]'")


def check_output_paths(cfg: DictConfig) -> None:
    """Exit in one line when a STAGE_OUTPUT_PATHS folder is (or lies under) a file or a loop of symbolic links,
    before any work."""
    for key in STAGE_OUTPUT_PATHS:
        resolved(cfg.paths[key], f"paths.{key}")
        found = blocking_file(cfg.paths[key])
        if found is not None:
            raise SystemExit(f"error: paths.{key}={cfg.paths[key]}: {found} is a file; expected a folder, or a "
                             f"path where one can be made")


def write_params(cfg: DictConfig, path: Path | str = PARAMS_FILE) -> None:
    """Write cfg to params.yaml the way DVC's Hydra integration does (resolved, no comments)."""
    write_text(OmegaConf.to_yaml(cfg, resolve=True), path)


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m pipeline.config [overrides]`: keep the overrides as the current selection, which every entry
    point composes from (`dvc repro`, `dvc exp run -S`, ad-hoc stages, sweep, predict), and write params.yaml
    (what `dvc repro` runs), e.g. `data=programs_ci`, `gnn=kaggle`, `gnn.lr=3e-4`; none: conf/'s defaults."""
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides, rest = split_overrides(argv)
    parser = argparse.ArgumentParser(prog="python -m pipeline.config", description=main.__doc__,
                                     epilog=groups_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cfg", choices=["job"], default=None,
                        help="print the params.yaml these overrides would write (a new selection), write nothing")
    args = parser.parse_args(rest)
    conf_dir = repo_root() / CONF_DIR
    try:
        if args.cfg == "job":                  # what the same command would write: the overrides replace the selection
            print(OmegaConf.to_yaml(compose(overrides, with_selection=False), resolve=True), end="")
            return
        cfg = compose(overrides, with_selection=False)
        selection.selection_config(overrides, conf_dir)          # refuses what a selection cannot keep
    except SettingsError as error:
        raise SystemExit(f"error: {error}") from None
    check_data_root(cfg)
    check_output_paths(cfg)
    try:
        selection.keep_selection(overrides, conf_dir, lambda: compose() == cfg)
    except SettingsError as error:
        raise SystemExit(f"error: {error}") from None
    write_params(cfg)
    if overrides:
        print(f"wrote {PARAMS_FILE} and {selection.selection_file(CONF_DIR)} (selection: {' '.join(overrides)})")
    else:
        print(f"wrote {PARAMS_FILE} (selection cleared: conf/ defaults; {selection.selection_file(CONF_DIR)} removed)")


if __name__ == "__main__":
    run_main(main)
