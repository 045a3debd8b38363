"""`synthesize.workers`: programs built in spawned processes give the same dataset, byte for byte, as one process."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipeline.config import compose
from pipeline.settings.programs import program_settings
from pipeline.settings_types import SettingsError
from pipeline.synth.programs import build


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_two_workers_write_the_dataset_of_one(tmp_path):
    cfg = compose(["data=programs_ci"])
    s = program_settings(cfg.data.generator, cfg.synthesize)
    # a few programs of both sources, layout and tile, train and test (test files get random stems and truth)
    s = dataclasses.replace(s, programs={"xla": {"train": 2, "test": 1}, "nlp": {"valid": 1}},
                            tile_programs={"train": 1, "test": 1})
    collections = list(cfg.data.collections)
    one = build(s, collections, tmp_path / "one", progress=False, workers=1)
    two = build(s, collections, tmp_path / "two", progress=False, workers=2)
    assert one == two
    written_one, written_two = files(tmp_path / "one"), files(tmp_path / "two")
    assert len([f for f in written_one if f.endswith(".npz")]) >= 8       # 2 xla + 1 nlp layout x 2 + kernels
    assert any("/test/" in f for f in written_one) and any("tile" in f for f in written_one)
    assert written_one == written_two


def test_workers_must_be_a_positive_integer():
    assert compose(["data=programs_ci", "synthesize.workers=3"]).synthesize.workers == 3
    for bad in ("0", "-2", "1.5", "two", "null"):
        with pytest.raises(SettingsError, match=r"setting synthesize\.workers="):
            compose(["data=programs_ci", f"synthesize.workers={bad}"])
    with pytest.raises(SettingsError, match=r"synthesize\.noise"):
        compose(["synthesize.noise=-0.1"])
