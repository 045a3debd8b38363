"""benchmarks/gpu_check.sh with its skip flag (--cpu-only) on tiny sizes, and its pass/fail logic."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gpu_check import checks

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_gpu_check_cpu_only_tiny(tmp_path):
    out = tmp_path / "gpu.md"
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", "GPU_CHECK_TIMEOUT": "240"}
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh"), "--cpu-only", "--tiny", "--threads",
                           "1", "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    assert "Device: CPU only" in text and "| train, cpu |" in text and "| inference, cpu |" in text
    assert "- [x] DDP ran (gloo)" in text and "- [x] training losses finite" in text
    assert "GPU figures not measured in this run" in text
    assert "Tile model (gnn=kaggle) on a generated kernel graph of 40 nodes: cpu training step of" in text


def test_checks_flag_disagreement_and_failed_ddp():
    result = {"ddp": {"ok": False}, "train": {"cpu": {"loss_finite": True}},
              "agreement": {"cpu_gpu_max_rel": 0.5, "cpu_gpu_tau": 0.2, "repeat_max_rel": 0.0,
                            "deterministic_bitwise": True}}
    failed = [name for name, ok in checks(result) if not ok]
    assert failed == ["DDP ran (failed)", "CPU vs GPU fp32 scores within 0.001 relative",
                      "CPU vs GPU ranking Kendall tau >= 0.99"]
