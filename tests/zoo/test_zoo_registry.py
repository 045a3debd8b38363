"""The registry: at least 8 families, both sources, test programs larger than train programs; extra programs of
the families outside the rotation."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import EXIT_BAD_INPUT, PipelineError
from pipeline.zoo.registry import EXTRA_SOURCES, FAMILIES, SOURCES, extra_programs, grid_sizes, programs

GRIDS = {"train": {"batch": [2, 4], "width": [16, 32], "depth": [1, 2], "extent": [16], "dtype": ["f32", "bf16"]},
         "test": {"batch": [8], "width": [64], "depth": [3], "extent": [16], "dtype": ["f32", "bf16"]}}
ROOT = Path(__file__).resolve().parents[2]
COUNTS = {"xla": {"train": 22, "valid": 11, "test": 11}, "nlp": {"train": 4, "valid": 2, "test": 2}}


def test_registry_covers_families_and_sources():
    assert len(FAMILIES) >= 8
    assert set(SOURCES) == {"xla", "nlp"}
    assert set(SOURCES["xla"]) | set(EXTRA_SOURCES["xla"]) == set(FAMILIES)
    assert not set(SOURCES["xla"]) & set(EXTRA_SOURCES["xla"])
    assert set(SOURCES["nlp"]) == {"transformer_encoder", "transformer_decoder"}
    listed = programs(COUNTS, GRIDS, seed=0)
    assert {p.family for p in listed if p.source == "xla" and p.split == "train"} == set(SOURCES["xla"])
    assert {p.source for p in listed} == {"xla", "nlp"}
    assert {p.size.dtype for p in listed} == {"f32", "bf16"}


def test_test_programs_are_larger_than_train_programs():
    listed = programs(COUNTS, GRIDS, seed=0)
    train = [p.size for p in listed if p.split in ("train", "valid")]
    test = [p.size for p in listed if p.split == "test"]
    for key in ("batch", "width", "depth"):
        assert min(getattr(s, key) for s in test) > max(getattr(s, key) for s in train), key


def test_names_unique_across_splits_and_deterministic():
    a, b = programs(COUNTS, GRIDS, seed=0), programs(COUNTS, GRIDS, seed=0)
    assert a == b and programs(COUNTS, GRIDS, seed=1) != a
    for source in COUNTS:
        for split in ("train", "valid", "test"):
            assert len([p for p in a if p.source == source and p.split == split]) == COUNTS[source][split]
        names = [p.name for p in a if p.source == source]      # train and valid share a grid: no program in both
        assert len(names) == len(set(names))
    one_size = {"train": {**GRIDS["train"], "batch": [2], "width": [16], "depth": [1], "dtype": ["f32"]},
                "test": GRIDS["test"]}
    with pytest.raises(PipelineError, match="more than"):    # one size per family: train takes both, none left for valid
        programs({"nlp": {"train": 2, "valid": 2}}, one_size, seed=0)


def test_grid_and_counts_errors_name_the_key():
    assert len(grid_sizes(GRIDS["train"])) == 16
    with pytest.raises(PipelineError, match="extent"):
        grid_sizes({k: v for k, v in GRIDS["train"].items() if k != "extent"})
    with pytest.raises(PipelineError, match=r"^data.generator.sizes: expected lists of integers"):
        grid_sizes({**GRIDS["train"], "batch": ["two"]})
    with pytest.raises(PipelineError, match=r"^data.generator.sizes: expected lists of integers"):
        grid_sizes({**GRIDS["train"], "width": 16})
    with pytest.raises(PipelineError, match=r"^data.generator.sizes: dtype \['f16'\]; expected among"):
        grid_sizes({**GRIDS["train"], "dtype": ["f32", "f16"]})
    with pytest.raises(PipelineError, match=r"^data.generator.programs.nlp.test: asks for 5 programs, more than"):
        programs({"nlp": {"test": 5}}, GRIDS, seed=0)
    with pytest.raises(PipelineError, match="source"):
        programs({"vision": {"train": 1}}, GRIDS, seed=0)
    with pytest.raises(PipelineError, match="unknown splits"):
        programs({"nlp": {"training": 1}}, GRIDS, seed=0)


@pytest.mark.parametrize("override,expected", [
    ("+data.generator.programs.tpu={train: 1}", "error: data.generator.programs: unknown source 'tpu'"),
    ("data.generator.programs.xla.train=100", "error: data.generator.programs.xla.train: asks for 100 programs"),
    ("data.generator.sizes.train.dtype=[f16]",                 # the schema's (pipeline/settings_synth.py)
     "error: setting data.generator.sizes.train.dtype[0]='f16': expected one of ['f32', 'bf16']"),
])
def test_stage_synthesize_refuses_a_bad_generator_in_one_line(tmp_path, override, expected):
    """The command a user runs: one error line (after the ad-hoc run's note), exit status 2, no traceback, no npz."""
    out = tmp_path / "synthetic"
    done = subprocess.run([sys.executable, "-m", "pipeline.synthesize", "data=programs_ci", override,
                           f"paths.synthetic_dir={out}"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    *notes, last = done.stderr.strip().splitlines()
    assert last.startswith(expected) and all(line.startswith("note: ") for line in notes), done.stderr
    assert not out.exists() or not any(out.rglob("*.npz"))


def test_programs_large_preset_is_a_larger_development_signal():
    """conf/data/programs_large.yaml composes, validates, draws its programs, and is larger than the default."""
    from pipeline.config import compose
    large, default = compose(["data=programs_large"]).data, compose([]).data
    g = large.generator
    listed = programs(g.programs, g.sizes, int(g.seed))
    for source in ("xla", "nlp"):                              # >= 10 test graphs per layout collection
        assert len([p for p in listed if p.source == source and p.split == "test"]) >= 10
        assert sum(g.programs[source].values()) > sum(default.generator.programs[source].values())
    train = {p.size for p in listed if p.split != "test"}
    test = {p.size for p in listed if p.split == "test"}
    assert not train & test                                    # no test program is a train program
    assert len({s.extent for s in train}) > len(set(default.generator.sizes.train.extent))
    assert {p.family for p in listed if p.source == "xla" and p.split == "train"} == set(SOURCES["xla"])


def test_programs_heldout_preset_has_the_held_out_size():
    """conf/data/programs_heldout.yaml composes and draws about 50 layout graphs of 1000 configs (two per program),
    every xla program compiled for tile kernels."""
    from pipeline.config import compose
    g = compose(["data=programs_heldout"]).data.generator
    listed = programs(g.programs, g.sizes, int(g.seed))
    assert 45 <= 2 * len(listed) <= 60
    assert list(g.layout_configs) == list(g.test_configs) == [1000, 1000]
    assert dict(g.tile_programs) == dict(g.programs.xla)


def test_valid_takes_its_families_in_the_test_rotation():
    """Valid holds the families test holds (in test's order), whatever the seed; sizes stay valid's own draws."""
    counts = {"xla": {"train": 12, "valid": 4, "test": 4}, "nlp": {"train": 4, "valid": 3, "test": 3}}
    for seed in range(6):
        listed = programs(counts, GRIDS, seed=seed)
        for source in counts:
            valid = [p for p in listed if p.source == source and p.split == "valid"]
            test = [p for p in listed if p.source == source and p.split == "test"]
            assert [p.family for p in valid] == [p.family for p in test], (seed, source)
            assert {p.size for p in valid}.isdisjoint({p.size for p in test})
    # more valid than test programs: valid continues test's rotation
    listed = programs({"xla": {"train": 11, "valid": 6, "test": 3}}, GRIDS, seed=0)
    families = list(SOURCES["xla"])
    test = [p.family for p in listed if p.split == "test"]
    start = families.index(test[0])
    assert [p.family for p in listed if p.split == "valid"] == [families[(start + i) % len(families)] for i in range(6)]


def test_train_and_test_programs_do_not_depend_on_the_valid_split():
    with_valid = programs({"xla": {"train": 12, "valid": 4, "test": 4}}, GRIDS, seed=3)
    without = programs({"xla": {"train": 12, "test": 4}}, GRIDS, seed=3)
    assert [p for p in with_valid if p.split != "valid"] == without


def test_extra_programs_come_from_the_extra_families_and_leave_the_core_draw_alone():
    """Extras cycle the EXTRA_SOURCES families from a seeded start, draw sizes of their split's grid without
    replacement, and never share a name with the core programs; the core draw does not see them."""
    extras = extra_programs({"xla": {"train": 7}}, GRIDS, seed=0)
    families = EXTRA_SOURCES["xla"]
    assert [p.split for p in extras] == ["train"] * 7 and {p.source for p in extras} == {"xla"}
    start = families.index(extras[0].family)
    assert [p.family for p in extras] == [families[(start + i) % len(families)] for i in range(7)]
    assert len({p.name for p in extras}) == 7
    assert {p.size for p in extras} <= set(grid_sizes(GRIDS["train"]))
    assert extras == extra_programs({"xla": {"train": 7}}, GRIDS, seed=0) != extra_programs(
        {"xla": {"train": 7}}, GRIDS, seed=1)
    core = programs(COUNTS, GRIDS, seed=0)
    assert not {p.name for p in core} & {p.name for p in extras}
    assert {p.size for p in extra_programs({"xla": {"test": 2}}, GRIDS, seed=0)} <= set(grid_sizes(GRIDS["test"]))
    assert extra_programs({}, GRIDS, seed=0) == []


def test_extra_programs_errors_name_the_key():
    with pytest.raises(PipelineError, match=r"^data.generator.extra_programs: source 'nlp' has no extra families"):
        extra_programs({"nlp": {"train": 1}}, GRIDS, seed=0)
    with pytest.raises(PipelineError, match=r"^data.generator.extra_programs.xla: unknown splits \['training'\]"):
        extra_programs({"xla": {"training": 1}}, GRIDS, seed=0)
    one_size = {"train": {**GRIDS["train"], "batch": [2], "width": [16], "depth": [1], "dtype": ["f32"]},
                "test": GRIDS["test"]}
    with pytest.raises(PipelineError,
                       match=r"^data.generator.extra_programs.xla.train: asks for 4 programs, more than the train"):
        extra_programs({"xla": {"train": len(EXTRA_SOURCES["xla"]) + 1}}, one_size, seed=0)
