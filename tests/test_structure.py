"""The code's structure, read with ast: the packages of `pipeline` import each other without a cycle, no module
imports a stage module or a command (only tests do: they run them), the benchmarks import each other without a
cycle either (their shared helpers live in benchmarks/common.py), and the fast test tier (`pytest -m "not slow"`)
imports every module of `pipeline`."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from import_graph import PACKAGE, ROOT, imported_modules, stage_module, stages, transitive_files

CONFIG_LAYER = "pipeline.config"      # a command (`python -m pipeline.config`) that is also the library every stage reads


def module_name(path: Path) -> str:
    """`pipeline/graphnet/gst.py` -> `pipeline.graphnet.gst`; a package's __init__.py is the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def code_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def is_command(path: Path) -> bool:
    """A module run as `python -m ...`: it has an `if __name__ == "__main__":` block."""
    return any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in ast.parse(path.read_text()).body)


def package_of(module: str) -> str:
    """The top-level unit of `pipeline` a module belongs to: its package (`pipeline.graphnet`) or itself."""
    return ".".join(module.split(".")[:2])


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def package_edges() -> dict[str, set[str]]:
    """pipeline package -> the other pipeline packages its modules import (top level or inside functions)."""
    edges: dict[str, set[str]] = {}
    for path in code_files(PACKAGE):
        module = module_name(path)
        edges.setdefault(package_of(module), set()).update(
            package_of(m) for m in imported_modules(path, module) if m != PACKAGE)
    return {node: targets - {node} for node, targets in edges.items()}


def benchmark_edges() -> dict[str, set[str]]:
    """benchmark module -> the benchmark modules it imports."""
    edges = {}
    for path in code_files("benchmarks"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks."):
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("benchmarks.")}
        edges[module_name(path)] = found
    return edges


def entry_points() -> set[str]:
    """The stage modules dvc.yaml runs and the commands (`python -m pipeline.X`), minus the config layer."""
    commands = {module_name(p) for p in code_files(PACKAGE) if is_command(p)}
    return ({stage_module(s) for s in stages().values()} | commands) - {CONFIG_LAYER}


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_entry_points_are_known():
    points = entry_points()
    assert {"pipeline.lgbm", "pipeline.gnn", "pipeline.prune", "pipeline.predict", "pipeline.featurize",
            "pipeline.sweep"} <= points and CONFIG_LAYER not in points


def test_no_import_cycle_between_pipeline_packages():
    edges = package_edges()
    assert {"pipeline.graphnet", "pipeline.hlo", "pipeline.costmodel", "pipeline.tpugraphs"} <= set(edges)
    assert not cycles(edges), f"import cycles between packages: {cycles(edges)}"


def test_no_import_cycle_between_benchmarks():
    edges = benchmark_edges()
    assert "benchmarks.common" in edges
    assert not cycles(edges), f"import cycles between benchmarks: {cycles(edges)}"


@pytest.mark.parametrize("folder", [PACKAGE, "benchmarks"])
def test_no_module_imports_a_stage_or_a_command(folder):
    """Stages and commands are thin: what another module needs lives in a library package."""
    points = entry_points()
    offenders = sorted(f"{module_name(path)} imports {sorted(hit)}" for path in code_files(folder)
                       if (hit := (imported_modules(path, module_name(path)) & points) - {module_name(path)}))
    assert not offenders, offenders


def is_slow(node: ast.AST) -> bool:
    return any("slow" in ast.unparse(d) for d in getattr(node, "decorator_list", []))


def fast_tests(path: Path) -> bool:
    """Whether a test file holds a test the fast tier runs (one not marked slow, in a module not marked slow)."""
    tree = ast.parse(path.read_text())
    if any(isinstance(n, ast.Assign) and "pytestmark" in ast.unparse(n) and "slow" in ast.unparse(n.value)
           for n in tree.body):
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name.startswith("test") and not is_slow(n) for n in tree.body)


def modules_used(path: Path) -> set[str]:
    """`pipeline` modules a test file imports, or runs (`python -m pipeline.X`, a `"pipeline.X"` string)."""
    named = set(re.findall(r"\bpipeline(?:\.\w+)+", path.read_text()))
    return imported_modules(path, "tests") | {m for m in named if (ROOT / Path(*m.split("."))).with_suffix(".py").is_file()
                                             or (ROOT / Path(*m.split(".")) / "__init__.py").is_file()}


def test_the_fast_tier_touches_every_module():
    touched = set()
    for path in code_files("tests"):
        if path.name.startswith("test_") and fast_tests(path):
            for module in modules_used(path):
                touched |= transitive_files(module)
    every = {p.relative_to(ROOT) for p in code_files(PACKAGE) if p.name != "__init__.py" or p.read_text().strip()}
    untouched = sorted(str(p) for p in every - touched if p.name != "__init__.py")
    assert not untouched, f"no fast test imports {untouched}"
