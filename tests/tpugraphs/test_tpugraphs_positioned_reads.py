"""docs/tpugraphs-format.md: positioned reads of node_config_feat skip the zip CRC, and no module outside
pipeline/tpugraphs reads by position. This test fails the day one does (give that reader a full pass first)."""
from __future__ import annotations

import ast
from pathlib import Path

from pipeline.config import repo_root

POSITIONED_READS = ("read_node_config_feat", "read_rows", "member_memmap")   # no CRC check (see the docs)
DATA_LAYER = Path("pipeline/tpugraphs")


def positioned_reads(path: Path) -> list[str]:
    """`name:line` of every call (or reference) to a POSITIONED_READS function in a Python file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        name = (node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else
                None)
        if name in POSITIONED_READS:
            found.append(f"{name}:{node.lineno}")
    return found


def test_no_module_outside_the_data_layer_reads_node_config_feat_by_position():
    root = repo_root()
    readers = {str(path.relative_to(root)): positioned_reads(path)
               for path in sorted((root / "pipeline").rglob("*.py")) if DATA_LAYER not in path.relative_to(root).parents}
    assert {path: calls for path, calls in readers.items() if calls} == {}


def test_the_scan_finds_positioned_reads(tmp_path):
    sample = tmp_path / "reader.py"
    sample.write_text("def f(graph, member):\n    graph.read_node_config_feat([0, 3])\n    return member_memmap(member)\n")
    assert positioned_reads(sample) == ["read_node_config_feat:2", "member_memmap:3"]
