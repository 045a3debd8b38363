"""benchmarks/autotune_unseen.py: a pick read back from the tool's JSON is timed on the program's own space."""
import pytest

from benchmarks.autotune_unseen import parse_timing, summarise, table, verify
from pipeline.config import load_cfg

NARROW = """HloModule narrow, entry_computation_layout={(f32[256,64]{1,0}, f32[64,4]{1,0})->f32[256,4]{1,0}}

ENTRY main.5 {
  Arg_0.1 = f32[256,64]{1,0} parameter(0)
  Arg_1.2 = f32[64,4]{1,0} parameter(1)
  dot.3 = f32[256,4]{1,0} dot(Arg_0.1, Arg_1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT tanh.4 = f32[256,4]{1,0} tanh(dot.3)
}
"""


@pytest.fixture(scope="module")
def cfg():
    return load_cfg(["autotune.oracle.budget=300", "autotune.oracle.random_samples=20"])


def test_default_pick_verifies_at_one_and_the_oracle_is_faster(tmp_path, cfg):
    text = tmp_path / "narrow.hlo.txt"
    text.write_text(NARROW)
    cache = {}
    row = verify(text, {"layouts": [], "predicted_runtime_ratio": 1.0, "guarded": True, "beyond_max_gain": 0,
                        "evaluations": 3}, cache, "own", cfg)
    assert row["verified_ratio"] == 1.0 and row["guarded"]
    assert row["oracle_ratio"] < 0.99                       # a 4-wide minor dim wastes lanes: the oracle moves it
    assert row["share"] == 0.0
    output_swapped = {"computation": "main.5", "instruction": "dot.3", "output": [0, 1], "input": None, "kernel": None}
    moved = verify(text, {"layouts": [output_swapped], "predicted_runtime_ratio": 0.5, "guarded": False,
                          "beyond_max_gain": 2, "evaluations": 3}, cache, "own", cfg)
    assert moved["t_oracle_ns"] == row["t_oracle_ns"]        # the oracle ran once per program
    assert moved["verified_ratio"] != 1.0 and moved["share"] == pytest.approx(
        (1 - moved["verified_ratio"]) / (1 - moved["oracle_ratio"]))
    lines = table([{"program": "narrow", "seed": 0, **moved}, {"program": "fft", "seed": 0, "error": "error: x"}])
    assert lines[2].startswith("| narrow | 0 | 0.5000 |") and lines[2].endswith("| False | 2 of 3 |")
    assert "refused: `error: x`" in lines[3]


def test_another_world_times_the_same_pick_with_its_own_constants_and_oracle(tmp_path, cfg):
    text = tmp_path / "narrow.hlo.txt"
    text.write_text(NARROW)
    pick = {"layouts": [{"computation": "main.5", "instruction": "dot.3", "output": [0, 1], "input": None,
                         "kernel": None}], "predicted_runtime_ratio": 0.5, "guarded": False, "beyond_max_gain": 0,
            "evaluations": 3}
    other = load_cfg(["autotune.oracle.budget=300", "autotune.oracle.random_samples=20",
                      "synthesize.layout_cost.bytes_per_ns=4500.0", "synthesize.layout_cost.launch_overhead_ns=0.0"])
    cache = {}
    own, far = verify(text, pick, cache, "own", cfg), verify(text, pick, cache, "far", other)
    assert set(cache) == {"narrow", ("own", "narrow"), ("far", "narrow")}   # one space; one oracle per world
    assert far["t_default_ns"] < own["t_default_ns"]                  # ten times the bandwidth, no launch cost
    assert far["verified_ratio"] != pytest.approx(own["verified_ratio"])
    rows = [{"program": "narrow", "seed": 0, **own}, {"program": "narrow", "seed": 1, **{**own, "t_pick_ns":
            own["t_default_ns"] * 1.5, "verified_ratio": 1.5}}, {"program": "fft", "seed": 0, "error": "error: x"}]
    summary = summarise(rows, {"narrow": None, "fft": None, "scan": None})
    assert summary["programs"] == 3 and summary["refused"] == ["fft"]
    assert summary["slower_than_default"] == 1 and summary["slower"] == ["narrow"] and summary["worst_ratio"] == 1.5


@pytest.mark.parametrize("text", ["fast", "fast=", "own=synthesize.layout_cost.tile=[8,128]", "=x",
                                  "fast=gnn.lr=0.1", "fast=synthesize.layout_cost.tile=[8,128] seed=2"])
def test_a_timing_world_must_name_layout_cost_overrides(text):
    with pytest.raises(SystemExit, match="--timing"):
        parse_timing(text)
    assert parse_timing("fast=synthesize.layout_cost.bytes_per_ns=900 synthesize.layout_cost.tile=[8,128]") == (
        "fast", ["synthesize.layout_cost.bytes_per_ns=900", "synthesize.layout_cost.tile=[8,128]"])


def test_a_program_of_tiles_only_counts_as_refused_not_timed(tmp_path, monkeypatch):
    """The tool gives a program with fused kernels but no configurable node a JSON of tiles only: no layout to time
    (verify would refuse the space), so the benchmark records it as refused, naming why."""
    import json
    import subprocess

    from benchmarks import autotune_unseen

    text, out = tmp_path / "fft.hlo.txt", tmp_path / "out"
    why = f"{text}: no configurable node (convolution, dot, reshape) to lay out"          # as the tool writes it

    def tool(cmd, **kwargs):
        out.mkdir()
        (out / "fft.json").write_text(json.dumps({"layouts": [], "layouts_not_searched": why, "tiles": []}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(autotune_unseen.subprocess, "run", tool)
    row = autotune_unseen.autotune(text, tmp_path / "fft_opt.hlo.txt", out, "ensemble", 0, [])
    assert row == {"error": "layouts not searched: <dump>/fft.hlo.txt: no configurable node (convolution, dot, "
                            "reshape) to lay out", "rc": 0}
