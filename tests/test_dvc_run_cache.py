"""Every stage can be restored from DVC's run cache (switching presets and back retrains nothing).

DVC 3 saves a stage's run to its run cache only when no output is persistent and every `cache: false` output is a
metric or a plot (dvc/stage/__init__.py `Stage.run`: `no_cache_outs`; dvc/stage/cache.py `_can_hash`). These tests
fail the day a stage's dvc.yaml entry breaks either rule; that the outputs hold no wall-clock time (so the restored
run is the run) is tests/test_gnn.py's identical-rerun test.
"""
from __future__ import annotations

import pytest
from test_dvc_deps import stages


def entries(stage: dict, section: str) -> list[tuple[str, dict]]:
    """(path, options) of each entry of a stage's outs / metrics / plots."""
    return [(e, {}) if isinstance(e, str) else next(iter(e.items())) for e in stage.get(section, [])]


@pytest.mark.parametrize("name", sorted(stages()))
def test_no_output_keeps_the_stage_out_of_the_run_cache(name):
    stage = stages()[name]
    outs = entries(stage, "outs")
    assert outs or entries(stage, "metrics"), f"dvc.yaml stage {name}: no outputs"
    for path, options in outs:
        options = options or {}
        assert options.get("cache", True), f"dvc.yaml stage {name}: out {path} has cache: false (declare it a metric)"
        assert not options.get("persist", False), f"dvc.yaml stage {name}: out {path} is persistent"


def test_the_check_reads_the_options():
    """The parser above sees `cache: false` and `persist: true` where dvc.yaml writes them."""
    stage = {"outs": ["a", {"b": {"cache": False}}, {"c": {"persist": True}}], "metrics": [{"m": {"cache": False}}]}
    assert entries(stage, "outs") == [("a", {}), ("b", {"cache": False}), ("c", {"persist": True})]
    assert entries(stage, "metrics") == [("m", {"cache": False})]
