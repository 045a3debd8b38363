"""Every command of the README's ```bash blocks, run as written (`bash -c` on the README's own text).

One clone goes through the README like a user: a copy of the `repo` fixture (where `dvc repro` ran on
data=programs_ci), with a machine-local conf/local/default.yaml that keeps every training short (the README's own
way to set a machine's settings; the command line still wins). The workspace holds what a user's does: many W&B
offline runs (the fixture's `dvc repro`), so a command that globs them must take several. Commands run in an order
in which each finds the state the README assumes: set-up and quick start, day to day, your own program (predict,
then featurize, whose `dvc repro` must train on the built-in splits it linked and leave data/synthetic whole: real
data has no synthesize stage), then real data and Kaggle.

Stand-ins for what CI lacks: the network and Kaggle credentials (a `kaggle` on PATH that serves a zip laid out like
Kaggle's, made from the built-in graphs, and records the submission), PyPI (a `python3` whose `-m venv .venv`
links the installed interpreter and tools, with a `pip` that checks every `==` pin of requirements.txt against
what is installed), the user's own files (`train.py`, `path/to/graph.npz`, `path/to/folder/`).

The commands that re-run the pipeline (marked HEAVY below: a recomputing `dvc repro`, each `dvc exp run`) run only
with README_HEAVY=1 (`README_HEAVY=1 OMP_WAIT_POLICY=PASSIVE python -m pytest -q -s tests/test_readme_commands.py`;
`-s` prints each step's seconds): on 2026-12-02 the whole file took 1166.57 s (heavy steps 847.7 s, light 101.7
s, the rest the repo fixture) on a 2-core machine, far beyond CI's budget. CI runs every other command.
The real-data block's `dvc exp run -S data=tpugraphs` checks out that experiment's outputs, which do not include
data/synthetic (no stage tracks it there), so it leaves the workspace like a `git checkout` would: the dataset
stays in DVC's cache and `dvc checkout` on a built-in preset's params.yaml/dvc.lock brings it back.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from conftest import BIN, ROOT, copy_repo_run

NOT_RUN = {   # README commands CI cannot run, each with why; everything else must be run below
    '.venv/bin/python -m pytest -q -n 2 -m "not slow"': "the fast tier of the test suite itself",
    "requirements-dev.txt && .venv/bin/python -m pytest -q -n 2": "the test suite itself: .ci/run runs this line "
                                                             "(test_ci_runs_the_readme_test_command)",
}
LOCAL = """\
# @package _global_
# The README test's machine: the three collections the README's predict and featurize lines use, and short
# training, so every experiment of the README fits in CI.
data:
  collections: [tile-xla, layout-xla-random, layout-xla-default]
gnn:
  seeds: [0, 1]        # the members the repo fixture trained (conftest.CI_LOCAL_CONF): predict loads these
  epochs: 1
  tta: 1
  num_threads: 1
lgbm:
  num_boost_round: 5
  num_threads: 1
autotune:
  stage_budget: 300    # as the repo fixture's (conftest.CI_LOCAL_CONF)
"""
TRAIN_PY = """\
import jax
import jax.numpy as jnp
print(jax.jit(lambda x, w: jnp.tanh(x @ w).sum())(jnp.ones((8, 16)), jnp.ones((16, 4))))
"""


def readme_commands(text: str) -> list[str]:
    """The commands of the ```bash blocks: comment-only and blank lines dropped, a line ending in `\\` or with an
    open quote joined with the next (as bash reads them)."""
    commands, current = [], ""
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            current = f"{current}\n{line}" if current else line
            code = current.split("   #")[0] if current.count('"') % 2 == 0 else current
            if current.endswith("\\") or code.count('"') % 2 or code.count("'") % 2:
                continue
            commands.append(current)
            current = ""
    return commands


COMMANDS = readme_commands((ROOT / "README.md").read_text())


def pick(fragment: str) -> str:
    """The one README command containing `fragment`."""
    found = [c for c in COMMANDS if fragment in c]
    assert len(found) == 1, f"README commands with {fragment!r}: {found}"
    return found[0]


def write_standins(bin_dir: Path, kaggle_zip: Path, submissions: Path) -> None:
    """`kaggle` (download serves kaggle_zip, submit records its file) and `python3` (venv of the installed tools)."""
    bin_dir.mkdir(parents=True)
    (bin_dir / "kaggle").write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import shutil, sys
        args = sys.argv[1:]
        opt = lambda flag: args[args.index(flag) + 1]
        if args[:2] == ["competitions", "download"]:
            shutil.copy({str(kaggle_zip)!r}, f"{{opt('-p')}}/{{opt('-c')}}.zip")
            print("Downloading", opt("-c"))
        elif args[:2] == ["competitions", "submit"]:
            header = open(opt("-f")).readline().strip()
            if header != "ID,TopConfigs":
                sys.exit(f"400 bad submission header {{header!r}}")
            open({str(submissions)!r}, "a").write(f"{{opt('-c')}} {{opt('-f')}} {{opt('-m')}}\\n")
            print("Successfully submitted to", opt("-c"))
        else:
            sys.exit(f"kaggle stand-in: unexpected {{args}}")
        """))
    tools = " ".join(sorted(p.name for p in BIN.iterdir() if p.name in {"python", "dvc", "jupyter", "kaggle"}))
    (bin_dir / "python3").write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1 $2 $3" != "-m venv .venv" ]; then exec {sys.executable} "$@"; fi
        mkdir -p .venv/bin
        for tool in {tools}; do printf '#!/bin/sh\\nexec {BIN}/%s "$@"\\n' $tool > .venv/bin/$tool; done
        printf 'export PATH="%s/.venv/bin:$PATH"\\n' "$PWD" > .venv/bin/activate
        printf '#!/bin/sh\\nexec {sys.executable} {ROOT / "tests" / "test_readme_commands.py"} pip "$@"\\n' \\
            > .venv/bin/pip
        chmod +x .venv/bin/*
        """))
    for script in bin_dir.iterdir():
        script.chmod(0o755)


def pip_standin(argv: list[str]) -> int:
    """`pip install -r FILE [-r FILE ...]` offline: every `name==version` pin must be what is installed."""
    from importlib.metadata import PackageNotFoundError, version

    files = argv[2::2]
    if argv[:2] != ["install", "-r"] or argv[1::2] != ["-r"] * len(files):
        print(f"pip stand-in: unexpected {argv}", file=sys.stderr)
        return 2
    wrong = []
    for line in (l for f in files for l in Path(f).read_text().splitlines()):
        pin = line.split("#")[0].strip()
        if pin:
            name, _, wanted = pin.partition("==")
            try:
                found = version(name).split("+")[0]
            except PackageNotFoundError:
                found = "not installed"
            if not wanted or found != wanted:
                wrong.append(f"{pin} (installed: {found})")
    print("\n".join(wrong) or "every pin of requirements.txt is installed", file=sys.stderr if wrong else sys.stdout)
    return 1 if wrong else 0


def graph_ids(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.npz")}


def trained_on_the_linked_splits(out: str, dest: Path) -> bool:
    """After `dvc repro` on data/mine: data/synthetic still holds the built-in dataset, and the pipeline pruned (so
    trained and ranked) exactly its train/valid graphs, linked into data/mine, and the user's test graphs."""
    built_in, mine = (dest / "data" / root / "npz" / "tile" / "xla" for root in ("synthetic", "mine"))
    with open(dest / "data" / "pruned" / "tile-xla" / "index.csv", newline="") as index:
        pruned = [(row["split"], row["graph_id"]) for row in csv.DictReader(index)]
    expected = {(split, g) for split in ("train", "valid") for g in graph_ids(built_in / split)}
    assert graph_ids(built_in / "train") and graph_ids(mine / "test"), "no built-in train graphs or no user graphs"
    assert set(pruned) == expected | {("test", g) for g in graph_ids(mine / "test")}, sorted(pruned)
    assert (dest / "metrics" / "lgbm" / "tile-xla.json").is_file()
    return json.loads((dest / "data" / "synthetic" / "stats.json").read_text())["synthesized"] is True


def kaggle_like_zip(npz: Path, path: Path) -> Path:
    """Kaggle's predict-ai-model-runtime.zip layout (npz_all/npz/...) holding the built-in graphs."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for file in sorted(npz.rglob("*.npz")):
            zf.write(file, f"npz_all/npz/{file.relative_to(npz).as_posix()}")
        zf.writestr("sample_submission.csv", "ID,TopConfigs\n")
    return path


@pytest.fixture(scope="module")
def clone(repo, tmp_path_factory):
    """(dest, env, run): a copy of the repo fixture with conf/local, stand-ins on PATH and the user's files."""
    shared, env = repo
    dest = tmp_path_factory.mktemp("readme") / "repo"
    copy_repo_run(shared, dest)
    standins = dest.parent / "standins"
    npz = dest / "data" / "synthetic" / "npz"
    write_standins(standins / "bin", kaggle_like_zip(npz, dest.parent / "kaggle.zip"), standins / "submitted.txt")
    (dest / "conf" / "local" / "default.yaml").write_text(LOCAL)
    (dest / "train.py").write_text(TRAIN_PY)
    (dest / "path" / "to" / "folder").mkdir(parents=True)
    shutil.copy(sorted((npz / "tile" / "xla" / "test").glob("*.npz"))[0], dest / "path" / "to" / "graph.npz")
    for graph in sorted((npz / "layout" / "xla" / "random" / "test").glob("*.npz"))[:2]:
        shutil.copy(graph, dest / "path" / "to" / "folder" / graph.name)
    env = {**env, "PATH": f"{standins / 'bin'}{os.pathsep}{env['PATH']}"}

    def run(command: str) -> str:
        result = subprocess.run(["bash", "-c", command], cwd=dest, env=env, capture_output=True, text=True)
        assert result.returncode == 0, f"{command}\nfailed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result.stdout + result.stderr

    return dest, standins, run


def test_every_readme_command_is_run_or_says_why_not():
    run_here = [c for c in COMMANDS if not any(f in c for f in NOT_RUN)]
    assert len(COMMANDS) == len(run_here) + sum(any(f in c for c in COMMANDS) for f in NOT_RUN)
    assert set(run_here) == set(STEPS_RUN), sorted(set(run_here) ^ set(STEPS_RUN))


def test_ci_runs_the_readme_test_command():
    [line] = [c for c in COMMANDS if c.endswith("-m pytest -q -n 2")]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv" in line and "python3 -m venv .venv" in ci
    assert ".venv/bin/pip install" in ci and "-r requirements.txt -r requirements-dev.txt" in ci
    assert ".venv/bin/python -m pytest -q -n 2\n" in ci


def test_test_only_tools_are_pinned_apart_from_the_product():
    product, dev = ((ROOT / name).read_text() for name in ("requirements.txt", "requirements-dev.txt"))
    pins = {name: {line.split("#")[0].strip().partition("==")[0] for line in text.splitlines()} - {""}
            for name, text in (("product", product), ("dev", dev))}
    assert {"pytest", "hypothesis"} <= pins["dev"] and not pins["dev"] & pins["product"]
    assert all("==" in line.split("#")[0] for line in dev.splitlines() if line.split("#")[0].strip())


def test_pip_standin_refuses_a_pin_that_is_not_installed(tmp_path, capsys):
    (tmp_path / "r.txt").write_text("pytest==0.0.1   # wrong\n")
    assert pip_standin(["install", "-r", str(tmp_path / "r.txt")]) == 1
    assert "pytest==0.0.1 (installed:" in capsys.readouterr().err
    (tmp_path / "ok.txt").write_text("pytest\n")
    assert pip_standin(["install", "-r", str(tmp_path / "ok.txt"), "-r", str(tmp_path / "r.txt")]) == 1
    assert pip_standin(["install", "-r", str(tmp_path / "r.txt"), "--upgrade"]) == 2


# Steps that re-run the pipeline (a `dvc repro` that recomputes, a `dvc exp run`): each takes minutes on a 2-core
# machine, more than CI's budget holds for all of them, so they run when README_HEAVY=1 is set; CI runs the rest,
# and `dvc repro` / `dvc exp run -S data=tpugraphs ...` are run end to end by tests/test_pipeline.py.
HEAVY, LIGHT = True, False
HEAVY_ENV = "README_HEAVY"
# (README fragment, check of the output and the clone, heavy) in the order they run; see the module docstring
STEPS = [
    ("python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && . .venv/bin/activate",
     lambda out, d: "every pin of requirements.txt is installed" in out, LIGHT),
    ("pipeline.config +experiment=smoke && dvc repro", lambda out, d: "ceiling" in out, HEAVY),
    ("jupyter nbconvert", lambda out, d: (d / "runs" / "notebooks" / "02-results.ipynb").is_file(), LIGHT),
    ("pipeline.summary --show  ", lambda out, d: out.splitlines()[0].split() == ["model", "valid", "test"]
     and "ceiling" in out, LIGHT),
    ("pipeline.gnn --collection layout-xla-default gnn.lr=3e-4", None, LIGHT),
    ("pipeline.config data=programs_ci", None, LIGHT),
    ("dvc repro    ", None, HEAVY),
    ("dvc exp run -S gnn.hidden=128", None, HEAVY),
    ("dvc exp run -S gnn=kaggle -S lgbm.num_leaves=63", None, HEAVY),
    ("dvc exp run -S gnn=gst -S prune.hops=all", None, HEAVY),
    ("dvc exp run --queue -S 'gnn.lr=1e-3,3e-4' && dvc exp run --run-all", None, HEAVY),
    ("pipeline.summary --show --experiments", lambda out, d: "workspace" in out and "ensemble.valid" in out, LIGHT),
    ("dvc metrics show metrics/summary.json", lambda out, d: "ensemble.valid" in out
     and max(map(len, out.splitlines())) < 300, LIGHT),
    ("dvc metrics show --md; dvc metrics diff; dvc plots show",
     lambda out, d: "cdn.jsdelivr" not in (d / "dvc_plots" / "index.html").read_text(), LIGHT),
    ("pipeline.synthesize --stats", lambda out, d: "layout-xla-random" in out, LIGHT),
    ("pipeline.sweep lgbm --collection tile-xla lgbm.num_leaves=15,63", None, LIGHT),
    ("pipeline.gnn --help", lambda out, d: "conf/gnn/default.yaml" in out and "usage: python -m pipeline.gnn" in out,
     LIGHT),
    ("--cfg job gnn.lr=3e-4", lambda out, d: "lr: 0.0003" in out and "name: programs_ci" in out, LIGHT),
    ("pipeline.config --help", lambda out, d: "config groups" in out, LIGHT),
    ("cp conf/local/example.yaml", lambda out, d: (d / "conf" / "local" / "default.yaml").read_text()
     == (d / "conf" / "local" / "example.yaml").read_text(), LIGHT),
    ("wandb leet inspect --summary wandb/latest-run", lambda out, d: "state    finished" in out
     and len(list(d.glob("wandb/offline-run-*"))) > 1, LIGHT),   # several runs: a glob of them breaks `inspect`
    ("for run in wandb/offline-run-*", lambda out, d: out.count("state    finished") == len(list(
        d.glob("wandb/offline-run-*"))), LIGHT),                 # one summary per run
    ("import jax, jax.numpy", lambda out, d: (d / "mlp_opt.hlo.txt").is_file(), LIGHT),
    ("XLA_FLAGS=", None, LIGHT),
    ("pipeline.predict mlp_opt.hlo.txt", None, LIGHT),
    ("pipeline.predict path/to/graph.npz", None, LIGHT),
    ("pipeline.predict path/to/folder/", lambda out, d: (d / "ranks.csv").is_file(), LIGHT),
    ("pipeline.autotune mlp.hlo.txt", lambda out, d: "predicted" in out and {"layouts", "tiles"} <= set(json.loads(
        (d / "runs" / "autotune" / "mlp.json").read_text())), LIGHT),
    ("dvc repro synthesize", None, HEAVY),
    ("pipeline.featurize mlp.hlo.txt", lambda out, d: (d / "data" / "mine" / "npz").is_dir(), LIGHT),
    ("data.root=data/mine", trained_on_the_linked_splits, HEAVY),
    ("submit --check submissions/submission.csv   #", lambda out, d: "valid submission" in out, HEAVY),
    ("python -m pipeline.download", lambda out, d: "unpacked" in out, LIGHT),
    ("pipeline.config data=tpugraphs gnn=kaggle && dvc repro", None, HEAVY),
    ("dvc exp run -S data=tpugraphs -S gnn=kaggle", None, HEAVY),
    ("submit --check submissions/submission.csv data=tpugraphs", lambda out, d: "valid submission" in out, HEAVY),
    ("kaggle competitions submit", lambda out, d: "Successfully submitted" in out, LIGHT),
]
STEPS_RUN = [pick(fragment) for fragment, _, _ in STEPS]


@pytest.mark.slow
def test_readme_commands_run_as_written(clone):
    dest, standins, run = clone
    heavy = os.environ.get(HEAVY_ENV) == "1"
    seconds = {HEAVY: 0.0, LIGHT: 0.0}
    for (fragment, check, is_heavy), command in zip(STEPS, STEPS_RUN):
        if is_heavy and not heavy:
            continue
        start = time.perf_counter()
        out = run(command)
        seconds[is_heavy] += time.perf_counter() - start
        print(f"README step {time.perf_counter() - start:8.1f} s  {'HEAVY' if is_heavy else 'light'}  "
              f"{command.splitlines()[0][:100]}", flush=True)   # per-step seconds, shown with `pytest -s`
        if check is not None:
            assert check(out, dest), f"{command}\nran, but its result is not what the README says:\n{out[-3000:]}"
        if fragment.startswith("cp conf/local"):
            (dest / "conf" / "local" / "default.yaml").write_text(LOCAL)   # back to this machine's settings
    print(f"README steps: heavy {seconds[HEAVY]:.1f} s, light {seconds[LIGHT]:.1f} s")
    submitted = (standins / "submitted.txt").read_text()
    assert submitted == 'predict-ai-model-runtime submissions/submission.csv tpugraphs-pipeline\n'
    assert (dest / "data" / "tpugraphs" / "npz_all" / "npz" / "tile" / "xla" / "train").is_dir()


if __name__ == "__main__":          # the `pip` of the stand-in venv
    sys.exit(pip_standin(sys.argv[2:]))
