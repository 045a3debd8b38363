"""What imports what, read with ast (nothing is imported): the helpers of tests/test_dvc_deps.py and
tests/test_structure.py."""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

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


def stages() -> dict[str, dict]:
    """Stage name -> its definition (the `do` body of foreach stages)."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return {name: stage.get("do", stage) for name, stage in spec.items()}


def stage_module(stage: dict) -> str | None:
    """The `pipeline.X` module a dvc.yaml stage runs (`python -m pipeline.X`), None when its cmd runs none."""
    command = re.search(r"python -m (pipeline(?:\.\w+)+)", stage["cmd"])
    return command.group(1) if command else None


def has_code(path: Path) -> bool:
    """False for an __init__.py holding at most a docstring (nothing runs when the package is imported)."""
    body = ast.parse(path.read_text()).body
    return any(not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) for n in body)


@lru_cache(maxsize=None)
def transitive_files(module: str) -> frozenset[Path]:
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
    return frozenset(files)
