"""dvc.yaml lists, for every stage, the code it runs: each `pipeline` module the stage imports (transitively, found
with ast) must be one of the stage's deps or lie in a folder that is; and the settings it reads: its params name
exactly the config groups and the `paths.*`/`data.*` keys its code reads (`cfg.<group>`, `cfg.paths.<key>`,
`cfg.data.<key>`, found with ast), less
what cannot change an output (the config layer's own reads and `wandb`, which only steers logging); and, derived
from the settings objects (a recording configuration handed to each stage's builder, pipeline/settings/), every key a
builder reads is among the stage's params, and a param naming one key is read."""
from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from import_graph import ROOT, module_file, stage_module, stages, transitive_files
from pipeline.config import compose
from pipeline.settings.gnn import gnn_settings
from pipeline.settings.lgbm import lgbm_settings
from pipeline.settings.programs import program_settings
from pipeline.settings.prune import prune_settings
from pipeline.settings.templates import template_settings
from pipeline.tpugraphs.dataset import Collection


def covered(path: Path, deps: list[str]) -> bool:
    return any(path == Path(d) or Path(d) in path.parents for d in deps if "${" not in d)


def test_module_file_and_imports_are_resolved():
    assert module_file("pipeline.tpugraphs.schema") == ROOT / "pipeline" / "tpugraphs" / "schema.py"
    assert module_file("pipeline.tpugraphs.schema.SPLITS") is None          # a name, not a module
    files = transitive_files("pipeline.prune")
    assert Path("pipeline/prune.py") in files and Path("pipeline/tpugraphs/errors.py") in files
    assert not covered(Path("pipeline/tpugraphs/errors.py"), ["pipeline/tpugraphs/npz.py", "${data.root}"])
    assert covered(Path("pipeline/tpugraphs/errors.py"), ["pipeline/tpugraphs"])


@pytest.mark.parametrize("name", sorted(stages()))
def test_stage_deps_cover_its_imports(name):
    stage = stages()[name]
    module = stage_module(stage)
    assert module, f"dvc.yaml stage {name}: cmd {stage['cmd']!r} does not run `python -m pipeline.<stage>`"
    deps = [d if isinstance(d, str) else next(iter(d)) for d in stage.get("deps", [])]
    missing = sorted(str(p) for p in transitive_files(module) if not covered(p, deps))
    assert not missing, f"dvc.yaml stage {name}: deps miss {missing} (imported by {module})"


NOT_OUTPUT_AFFECTING = {Path("pipeline/config.py"), Path("pipeline/tracking.py")}   # the config layer; wandb logging


# Groups listed by key (`paths.<key>`, `data.<key>`): data.generator is large and only synthesize and autotune read
# it, and DVC rewrites every stage's params into dvc.lock after each stage it runs.
KEYED_GROUPS = ("paths", "data")
DICT_METHODS = ("get", "items", "keys", "values")


def settings_read(path: Path) -> set[str]:
    """`cfg.<group>` read in a file (as `<group>`), and `cfg.<keyed>.<key>` for the KEYED_GROUPS (as `<keyed>.<key>`);
    a keyed group read whole (`cfg.data` passed on, `cfg.data.get(...)`) counts as the whole group."""
    tree = ast.parse((ROOT / path).read_text())
    parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cfg"):
            continue
        parent = parents.get(id(node))
        if node.attr not in KEYED_GROUPS:
            found.add(node.attr)
        elif isinstance(parent, ast.Attribute) and parent.attr not in DICT_METHODS:
            found.add(f"{node.attr}.{parent.attr}")
        elif node.attr != "paths":                     # `cfg.paths` itself is never a setting
            found.add(node.attr)
    return found


def subsumed(keys: set[str]) -> set[str]:
    """Keys less those of a group that is read whole (`data` subsumes `data.root`)."""
    return {key for key in keys if "." not in key or key.split(".")[0] not in keys}


def listed_settings(stage: dict) -> set[str]:
    """A stage's params as groups (`gnn.lr` -> `gnn`), and the KEYED_GROUPS' keys as listed."""
    return {p if p.split(".")[0] in KEYED_GROUPS else p.split(".")[0] for p in stage.get("params", [])}


def test_settings_read_finds_groups_and_paths():
    found = settings_read(Path("pipeline/summary.py"))
    assert {"summary", "paths.metrics_dir", "paths.plots_dir"} <= found and "paths" not in found


@pytest.mark.parametrize("name", sorted(stages()))
def test_stage_params_are_the_settings_it_reads(name):
    stage = stages()[name]
    files = transitive_files(stage_module(stage)) - NOT_OUTPUT_AFFECTING
    read = subsumed(set().union(*(settings_read(f) for f in files)))
    assert "wandb" not in read and not {"wandb", "paths"} & set(stage.get("params", []))
    assert listed_settings(stage) == read, (f"dvc.yaml stage {name}: params {sorted(listed_settings(stage))}, "
                                            f"code reads {sorted(read)}")


class Recorder(Mapping):
    """A plain configuration mapping that records the dotted key of every value read from it (as an attribute or
    an item); sub-mappings are Recorders too, so a builder's reads are recorded down to the leaves."""

    def __init__(self, data: dict, prefix: str = "", seen: set | None = None):
        self._data, self._prefix, self.seen = data, prefix, set() if seen is None else seen

    def __getitem__(self, key):
        value, dotted = self._data[key], f"{self._prefix}{key}"
        if isinstance(value, dict):
            return Recorder(value, f"{dotted}.", self.seen)
        self.seen.add(dotted)
        return value

    def __getattr__(self, name):
        if name.startswith("_") or name not in self._data:
            raise AttributeError(name)
        return self[name]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


def synthesize_builder(cfg, _collection):
    generator = cfg.data.generator
    build = program_settings if generator.builder == "programs" else template_settings
    return build(generator, cfg.synthesize)


BUILDERS = {"prune": prune_settings, "gnn": gnn_settings, "lgbm": lgbm_settings, "synthesize": synthesize_builder}
PRESETS = ("programs_ci", "synthetic_full")      # the program zoo's and the template generator's


def builder_reads(stage: str) -> set[str]:
    """The dotted keys the stage's settings builder reads, over every collection of PRESETS."""
    seen = set()
    for preset in PRESETS:
        plain = OmegaConf.to_container(compose([f"data={preset}"]), resolve=True)
        for slug in plain["data"]["collections"]:
            recorder = Recorder(plain, seen=seen)
            BUILDERS[stage](recorder, Collection.parse(slug))
    return seen


def dotted_reads(path: Path) -> set[str]:
    """`cfg.a.b...` chains read in a file, as `a.b...` (every prefix of a chain too)."""
    found = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id == "cfg" and parts:
            found.add(".".join(reversed(parts)))
    return found


def within(key: str, param: str) -> bool:
    return key == param or key.startswith(param + ".")


def test_the_recorder_records_leaves():
    recorder = Recorder({"gnn": {"lr": {"tile": 1.0}, "hidden": 8}, "seed": 0})
    assert recorder.gnn.hidden == 8 and recorder["gnn"]["lr"]["tile"] == 1.0 and dict(recorder.gnn.lr)
    assert recorder.seen == {"gnn.hidden", "gnn.lr.tile"}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_stage_params_cover_the_keys_its_settings_builder_reads(name):
    """Derived from the settings objects: every key the stage's builder reads is one of its params (a group covers
    its keys), and a param naming a single key (`prune.hops` for gnn) is read by the builder or the stage's code."""
    params = stages()[name].get("params", [])
    read = builder_reads(name)
    assert read and not sorted(k for k in read if not any(within(k, p) for p in params)), \
        f"dvc.yaml stage {name}: its settings builder reads keys its params miss"
    direct = set().union(*(dotted_reads(f) for f in transitive_files(stage_module(stages()[name]))))
    single = [p for p in params if "." in p and not p.startswith("paths.")]
    assert not [p for p in single if not any(within(k, p) for k in read | direct)], \
        f"dvc.yaml stage {name}: params name keys no code reads"
