"""The results tables of README.md and docs/results.md are generated from the committed metrics files
(`python -m pipeline.summary --show --markdown`): this test fails the day they differ."""
from __future__ import annotations

from conftest import ROOT

from pipeline.config import load_cfg
from pipeline.summary import markdown

README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results.md"
DECISIONS = ROOT / "docs" / "decisions.md"


def generated_tables() -> list[str]:
    cfg = load_cfg([], ROOT / "params.yaml")
    return markdown(cfg).split("\n\n")


def test_the_readme_results_table_is_the_generated_one():
    summary, *_ = generated_tables()
    assert summary.startswith("| model | valid | test |") and "| ceiling |" in summary
    assert summary in README.read_text()


def test_docs_results_hold_every_generated_table():
    text = RESULTS.read_text()
    tables = generated_tables()
    assert len(tables) == 3                                  # models x splits, then one per split
    for table in tables:
        assert table in text, f"docs/results.md lacks (or has a stale copy of):\n{table}"


def test_decisions_name_a_date_and_evidence_for_every_default():
    rows = [line for line in DECISIONS.read_text().splitlines() if line.startswith("| `")]
    assert len(rows) >= 10
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4 and cells[3].startswith("2026-"), row
        assert "±" in cells[2] or "results.md" in cells[2] or "preset" in cells[2], row
