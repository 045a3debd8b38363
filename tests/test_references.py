"""The project refers only to files inside itself: no absolute paths of a development machine, no notes kept
outside the repository, and every `docs/*.md` named anywhere exists."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = (".py", ".md", ".yaml", ".yml", ".ipynb", ".sh", ".ini", ".txt", ".cfg")
OUTSIDE = re.compile(r"(/work/|/root/|\.\./shared|shared/docs)")
DOC = re.compile(r"(?<![\w/.])docs/[\w.-]+\.md")


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / n for n in names if n.endswith(TEXT) and n != "tests/test_references.py" and (ROOT / n).is_file()]


def test_no_reference_outside_the_repository():
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in tracked_text_files()
             for m in OUTSIDE.finditer(p.read_text(errors="replace"))]
    assert not found, found


def test_every_named_doc_exists():
    named = {m.group(0) for p in tracked_text_files() for m in DOC.finditer(p.read_text(errors="replace"))}
    assert named, "no docs/ reference found: the scan is broken"
    assert not sorted(d for d in named if not (ROOT / d).is_file())
