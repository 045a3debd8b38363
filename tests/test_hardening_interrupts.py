"""Hardening (#14): a prune that is killed (SIGTERM) or was killed earlier leaves no temporary output behind."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

from conftest import ROOT, in_split, make_tile_arrays, write_npz

from pipeline.config import compose
from pipeline.prune import prune_collection
from pipeline.settings.prune import prune_settings
from pipeline.tpugraphs.dataset import Collection

SLUG = "tile-xla"


def tile_tree(root):
    for split in ("train", "valid", "test"):
        write_npz(root / "npz/tile/xla" / split / f"{split}_t.npz", in_split(make_tile_arrays(), split))
    return root


def test_stale_temp_of_a_killed_run_is_removed(tmp_path):
    root = tile_tree(tmp_path / "data")
    stale = tmp_path / "pruned" / f"{SLUG}.tmp"
    (stale / "train" / "half_written").mkdir(parents=True)
    params = prune_settings(compose(["data=programs_ci"]), Collection.parse(SLUG))
    prune_collection(root, SLUG, tmp_path / "pruned", params)
    assert not stale.exists() and (tmp_path / "pruned" / SLUG / "index.csv").exists()


def test_sigterm_mid_prune_removes_the_temp_folder(tmp_path):
    root = tile_tree(tmp_path / "data")
    pruned = tmp_path / "pruned"
    script = textwrap.dedent(f"""
        import time
        from pipeline import prune
        prune.prune_file = lambda *args: time.sleep(120)          # a graph that takes long
        prune.main(["--collection", "{SLUG}", "data=programs_ci", "data.root={root}", "paths.pruned_dir={pruned}",
                    "paths.metrics_dir={tmp_path / 'metrics'}"])
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    tmp = pruned / f"{SLUG}.tmp"
    deadline = time.monotonic() + 60
    while not (tmp / "test").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert (tmp / "test").exists(), proc.stderr.read() if proc.poll() is not None else "prune did not start"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert not tmp.exists() and not (pruned / SLUG).exists()
    assert "Traceback" not in proc.stderr.read()
