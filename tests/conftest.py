"""Shared fixtures: tiny hand-built TpuGraphs files in the official schema.

`tiny_layout_arrays` / `tiny_tile_arrays` return fresh dicts of arrays (mutate them to corrupt a file);
`tiny_npz` writes one valid layout and one valid tile file under `tmp_path/npz/...` and returns their paths.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# Before any test imports LightGBM or torch: no OpenMP spin-waiting on a busy 2-core box, and no wandb runs
# unless a test asks for them (tests of logging set WANDB_MODE themselves).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("WANDB_MODE", "disabled")


@pytest.fixture(autouse=True)
def no_wandb_service_after_the_test():
    """A wandb run opened in the test process exports WANDB_SERVICE (its service's socket): a command that a later
    test starts would inherit it and log into that service, gone by then, instead of its own (its offline run never
    gets its .wandb file). Dropped after every test."""
    yield
    os.environ.pop("WANDB_SERVICE", None)


def make_layout_arrays() -> dict[str, np.ndarray]:
    """A 5-node chain-with-skip layout graph, 2 configurable nodes (1 and 3), 4 configurations."""
    node_feat = np.zeros((5, 140), np.float32)
    node_feat[:, 21] = [8, 8, 16, 16, 4]                       # shape_dimensions_0
    node_feat[:, 134:136] = [[1, 0], [1, 0], [0, 1], [1, 0], [0, 1]]  # layout_minor_to_major_0..1
    node_config_feat = np.full((4, 2, 18), -1, np.float32)       # [configs, config nodes, 18], -1 = default
    node_config_feat[1, 0, :2] = [0, 1]                          # config 1: node 1 output layout {0, 1}
    node_config_feat[2, 1, 6:8] = [1, 0]                         # config 2: node 3 input layout {1, 0}
    node_config_feat[3, :, :2] = [[1, 0], [0, 1]]                # config 3: both outputs set
    return {
        "node_feat": node_feat,
        "node_opcode": np.array([63, 26, 41, 34, 98], np.uint8),   # parameter, convolution, fusion, dot, transpose
        "edge_index": np.array([[1, 0], [2, 1], [3, 2], [4, 3], [4, 1]], np.int64),  # (consumer, producer)
        "node_config_ids": np.array([1, 3], np.int64),
        "node_config_feat": node_config_feat,
        "config_runtime": np.array([300, 100, 200, 400], np.int64),
        "node_splits": np.array([[0, 5]], np.int64),              # stored (1, S) as in the real files
    }


def make_tile_arrays() -> dict[str, np.ndarray]:
    """A 3-node tile graph with 3 configurations."""
    config_feat = np.zeros((3, 24), np.float32)
    config_feat[:, 8:10] = [[8, 128], [16, 128], [8, 256]]         # output_bounds_0..1
    config_feat[:, 14] = config_feat[:, 8:10].sum(1)               # output_bounds_sum
    config_feat[:, 15] = config_feat[:, 8:10].prod(1)              # output_bounds_product
    return {
        "node_feat": np.ones((3, 140), np.float32),
        "node_opcode": np.array([63, 63, 34], np.int32),
        "edge_index": np.array([[2, 0], [2, 1]], np.int32),
        "config_feat": config_feat,
        "config_runtime": np.array([1200, 900, 1500], np.int64),
        "config_runtime_normalizers": np.array([1000, 1010, 990], np.int64),
    }


def write_npz(path: Path, arrays: dict[str, np.ndarray], compress: bool = False) -> Path:
    """Write `arrays` the way the official files were written (numpy savez), creating folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    (np.savez_compressed if compress else np.savez)(path, **arrays)
    return path


SPLIT_MARK_COLUMN = 139        # a node_feat column the tiny graphs leave constant on train (so normalisation drops it)


def in_split(arrays: dict[str, np.ndarray], split: str) -> dict[str, np.ndarray]:
    """`arrays` as a graph of `split`: a valid or test graph gets a mark in SPLIT_MARK_COLUMN, so that it differs
    in content from the train graph built from the same arrays (prune warns of a valid copy of a train graph)."""
    if split != "train":
        arrays["node_feat"] = arrays["node_feat"].copy()
        arrays["node_feat"][:, SPLIT_MARK_COLUMN] += 1 + (split == "test")
    return arrays



def write_layout_splits(folder: Path) -> Path:
    """One tiny layout graph per split under `folder/<split>/` (a, b, c), told apart by `in_split`; the test graph
    unlabelled (runtimes zero, as in the official test files)."""
    for split, stem in {"train": "a", "valid": "b", "test": "c"}.items():
        arrays = in_split(make_layout_arrays(), split)
        if split == "test":
            arrays["config_runtime"][:] = 0
        write_npz(folder / split / f"{stem}.npz", arrays)
    return folder

@pytest.fixture
def tiny_layout_arrays() -> dict[str, np.ndarray]:
    return make_layout_arrays()


@pytest.fixture
def tiny_tile_arrays() -> dict[str, np.ndarray]:
    return make_tile_arrays()


@pytest.fixture
def tiny_npz(tmp_path: Path) -> dict[str, Path]:
    """{"root": folder holding npz/, "layout": layout:xla:random train file, "tile": tile:xla train file}."""
    npz = tmp_path / "npz"
    return {
        "root": tmp_path,
        "layout": write_npz(npz / "layout" / "xla" / "random" / "train" / "tiny_layout.npz", make_layout_arrays()),
        "tile": write_npz(npz / "tile" / "xla" / "train" / "tiny_tile.npz", make_tile_arrays()),
    }


# --- end-to-end: one `dvc repro` on programs_ci shared by every test that needs stage outputs ---
ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
OUTPUT_FOLDERS = ("data/", "models/", "predictions/", "metrics/", "plots/", "submissions/")  # stage outputs: not copied


def run(cmd, cwd, env):
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


CI_LOCAL_CONF = "# @package _global_\ngnn:\n  seeds: [0, 1]\n  epochs: 5\nautotune:\n  stage_budget: 300\n"


def copy_repo(dest: Path) -> None:
    """Copy what a fresh clone would hold (tracked + untracked-not-ignored files), no outputs or venv."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for name in files:
        src = ROOT / name
        if src.is_file() and not name.startswith(OUTPUT_FOLDERS):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


NEEDS_REPO = ("repo", "outputs_repo")     # fixtures that build the repo fixture (test_notebooks: unless told a folder)


def needs_repo(item) -> bool:
    return any(name in item.fixturenames for name in NEEDS_REPO)


def module_order(items) -> list:
    """`items` in the order `pytest -n 2` should take their modules (pytest.ini: --dist loadfile, each module on one
    worker, in this order): the first module that needs the repo fixture first, so that its `dvc repro`, the
    longest chain of the suite, starts at once while the other worker takes the modules that need no repo; the other
    modules that need it last, when it is built. The order inside a module stays."""
    def module(item) -> str:
        return item.nodeid.split("::")[0]                              # the scope of --dist loadfile

    with_repo = list(dict.fromkeys(module(item) for item in items if needs_repo(item)))
    return sorted(items, key=lambda item: 0 if module(item) in with_repo[:1] else 2 if module(item) in with_repo else 1)


def pytest_collection_modifyitems(items):
    items[:] = module_order(items)


def build_once(folder: Path, name: str, build) -> Path:
    """`folder / name`, made by `build(path)` once for every process that asks (the pytest-xdist workers share
    `folder`): the first builds it under a lock while the others wait; after a failed build every later call fails
    at once with its message instead of building again."""
    import fcntl

    path, done, failed = folder / name, folder / f"{name}.done", folder / f"{name}.failed"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            pytest.fail(f"{name}: the build failed in another test process:\n{failed.read_text()}")
        if not done.exists():
            try:
                build(path)
            except BaseException as error:
                failed.write_text(str(error) or type(error).__name__)
                raise
            done.write_text("")
    return path


@pytest.fixture(scope="session")
def repo(tmp_path_factory):
    """(dest, env): a temporary copy of the repository where `dvc repro` ran on data=programs_ci, built once per
    test run and shared by the pytest-xdist workers. Tests only read it; one that changes it works on
    `copy_repo_run(dest, ...)`."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base   # the workers' common folder
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "WANDB_MODE": "offline",
           "WANDB_SILENT": "true", "OMP_WAIT_POLICY": "PASSIVE", "DVC_NO_ANALYTICS": "1"}
    env.pop("DVC_ROOT", None)                 # (WANDB_SERVICE: no_wandb_service_after_the_test keeps it out)
    return build_once(shared, "repo", lambda dest: build_repo(dest, env)), env


def build_repo(dest: Path, env: dict) -> None:
    """Copy the repository to `dest` and run `dvc repro` on data=programs_ci there."""
    dest.mkdir()
    copy_repo(dest)
    # the GNN's seed ensemble and epoch budget and stage autotune's budget sized for the CI's time (two members keep
    # predict's averaging tested); in conf/local, so `dvc exp run -S ...` in the copy composes them too
    (dest / "conf" / "local" / "default.yaml").write_text(CI_LOCAL_CONF)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy"]):
        run(cmd, dest, env)
    run([str(BIN / "python"), "-m", "pipeline.config", "data=programs_ci"], dest, env)
    run([str(BIN / "dvc"), "repro"], dest, env)


def copy_repo_run(shared: Path, dest: Path) -> Path:
    """Copy the repo fixture's folder to `dest` for a test that changes it. Another worker may be running a command
    in `shared` meanwhile: its byte-code caches are left out and a file that vanishes during the copy (a temporary
    one) is skipped."""
    def copy(src, dst):
        try:
            return shutil.copy2(src, dst)
        except FileNotFoundError:
            return dst

    shutil.copytree(shared, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"), copy_function=copy)
    return dest


# --- HLO text of a small JAX program (tests/hlo, tests/test_featurize.py) ---
def jax_program(x, w, kernel):
    """A dense layer, a while loop, a conditional, a call (jnp.pad), reductions and a convolution in bf16: every
    kind of computation the featurizer meets."""
    import jax
    import jax.numpy as jnp

    h = jnp.tanh(x @ w)
    _, h = jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, h))
    h = jax.lax.cond(h.sum() > 0, lambda a: a + 1.0, lambda a: jnp.pad(a, ((0, 0), (1, 1)))[:, 2:], h)
    img = h.reshape(1, *h.shape, 1).astype(jnp.bfloat16)
    y = jax.lax.conv_general_dilated(img, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return h.sum(axis=1), y


@pytest.fixture(scope="session")
def jax_hlo() -> dict[str, str]:
    """{"lowered": .lower(...).as_text(dialect="hlo"), "compiled": .compile().as_text()} of `jax_program`."""
    import jax
    import jax.numpy as jnp

    lowered = jax.jit(jax_program).lower(jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((3, 3, 1, 4), jnp.bfloat16))
    return {"lowered": lowered.as_text(dialect="hlo"), "compiled": lowered.compile().as_text()}
