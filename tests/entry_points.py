"""Helpers for tests that run a command through its real entry point (`python -m pipeline.<module>`) and check
that bad input ends in one `error:` line on stderr, exit status 2, and no output written."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

from pipeline.errors import EXIT_BAD_INPUT


def run_entry(module: str, *args, cwd: Path = ROOT, timeout: int = 300) -> subprocess.CompletedProcess:
    """`python -m <module> args` as a user runs it (no wandb, no OpenMP spinning)."""
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def error_line(done: subprocess.CompletedProcess) -> str:
    """The one `error:` line of a refused run (notes and progress bars aside), after checking the exit status,
    that it is the last thing printed and that no traceback was."""
    assert done.returncode == EXIT_BAD_INPUT, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and done.stderr.rstrip().endswith(errors[0]), done.stderr[-3000:]
    return errors[0]


def written(folder: Path) -> list[Path]:
    """Every file or folder under `folder` (an empty parent folder is no output DVC could take)."""
    return sorted(Path(folder).rglob("*")) if Path(folder).exists() else []
