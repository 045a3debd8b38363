"""dvc.yaml lists, for every stage, the code it runs: each `pipeline` module the stage imports (transitively, found
with ast) must be one of the stage's deps or lie in a folder that is."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from pipeline.config import repo_root

ROOT = repo_root()
PACKAGE = "pipeline"


def module_file(module: str) -> Path | None:
    """The file of a `pipeline...` module (a module or a package's __init__), None when there is none."""
    base = ROOT / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_modules(path: Path, module: str) -> set[str]:
    """`pipeline...` modules imported anywhere in the file (top level or inside functions), relative ones resolved."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:                               # relative: from the module's package, level - 1 up
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}   # `from pipeline.x import y`: y may be a module
    return {m for m in found if (m == PACKAGE or m.startswith(PACKAGE + ".")) and module_file(m) is not None}


def has_code(path: Path) -> bool:
    """False for an __init__.py holding at most a docstring (nothing runs when the package is imported)."""
    body = ast.parse(path.read_text()).body
    return any(not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) for n in body)


def transitive_files(module: str) -> set[Path]:
    """Every file of `pipeline` the module runs when imported: itself, what it imports, and their packages."""
    seen, todo, files = set(), [module], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]     # parent packages run first
        path = module_file(name)
        if path is None:
            continue
        if path.name != "__init__.py" or has_code(path):
            files.add(path.relative_to(ROOT))
        todo += sorted(imported_modules(path, name))
    return files


def stages() -> dict[str, dict]:
    """Stage name -> its definition (the `do` body of foreach stages)."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {name: stage.get("do", stage) for name, stage in spec.items()}


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
    command = re.search(r"python -m (pipeline(?:\.\w+)+)", stage["cmd"])
    assert command, f"dvc.yaml stage {name}: cmd {stage['cmd']!r} does not run `python -m pipeline.<stage>`"
    deps = [d if isinstance(d, str) else next(iter(d)) for d in stage.get("deps", [])]
    missing = sorted(str(p) for p in transitive_files(command.group(1)) if not covered(p, deps))
    assert not missing, f"dvc.yaml stage {name}: deps miss {missing} (imported by {command.group(1)})"
