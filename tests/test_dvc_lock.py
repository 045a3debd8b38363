"""dvc.lock records only the stages of dvc.yaml.

DVC never drops the lock entry of a stage that was removed or renamed, and it parses and rewrites the whole
dvc.lock (pure-Python round-trip YAML) after every stage it runs, so each stale entry costs every stage of every
`dvc repro` time (docs/results.md, "Start-up"). Removing one: delete its block from dvc.lock.
"""
from __future__ import annotations

import yaml

from import_graph import ROOT, stages


def stale_entries(lock: dict, defined: set[str]) -> list[str]:
    """Lock entries whose stage (`name` or foreach `name@item`) dvc.yaml does not define."""
    return sorted(name for name in lock.get("stages", {}) if name.split("@")[0] not in defined)


def test_stale_entries_are_found():
    lock = {"stages": {"gnn@tile-xla": {}, "train_gnn@tile-xla": {}, "summary": {}, "old": {}}}
    assert stale_entries(lock, {"gnn", "summary"}) == ["old", "train_gnn@tile-xla"]


def test_dvc_lock_holds_only_stages_of_dvc_yaml():
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())
    stale = stale_entries(lock, set(stages()))
    assert not stale, f"dvc.lock: entries of stages dvc.yaml no longer defines: {stale} (delete their blocks)"
