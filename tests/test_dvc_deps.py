"""dvc.yaml lists, for every stage, the code it runs: each `pipeline` module the stage imports (transitively, found
with ast) must be one of the stage's deps or lie in a folder that is; and the settings it reads: its params name
exactly the config groups and `paths.*` keys its code reads (`cfg.<group>`, `cfg.paths.<key>`, found with ast), less
what cannot change an output (the config layer's own reads and `wandb`, which only steers logging)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from import_graph import ROOT, module_file, stage_module, stages, transitive_files


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
