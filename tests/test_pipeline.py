"""End-to-end: `dvc repro` on the programs_ci preset in a temporary copy of the repository."""
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import BIN, copy_repo_run, run

from pipeline.tpugraphs.dataset import Collection


@pytest.mark.slow
def test_dvc_repro_writes_a_valid_submission(repo):
    dest, env = repo
    submission = dest / "submissions" / "submission.csv"
    table = pd.read_csv(submission, dtype=str)
    assert list(table.columns) == ["ID", "TopConfigs"] and len(table) > 0
    out = run([str(BIN / "python"), "-m", "pipeline.submit", "--check", str(submission)], dest, env)
    assert "valid submission" in out.stdout
    metrics = run([str(BIN / "dvc"), "metrics", "show", "--json"], dest, env).stdout
    assert "kaggle_score" in metrics


@pytest.mark.slow
def test_check_rejects_a_broken_submission(repo):
    dest, env = repo
    table = pd.read_csv(dest / "submissions" / "submission.csv", dtype=str)
    broken = dest / "broken.csv"
    table.iloc[1:].to_csv(broken, index=False)
    result = subprocess.run([str(BIN / "python"), "-m", "pipeline.submit", "--check", str(broken)], cwd=dest,
                            env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "missing ID" in result.stderr


@pytest.mark.slow
def test_offline_wandb_runs_land_in_the_repo(repo):
    dest, _ = repo
    assert list((dest / "wandb").glob("offline-run-*")), "no offline wandb run written"


def write_download_like(synthetic_npz: Path, dest: Path) -> None:
    """Re-write a synthetic npz tree the way the real download varies: Kaggle's npz_all/npz/ folder, int32 indices
    and runtimes, (1, S) node_splits, tile test files without normalizers, half the files compressed."""
    import numpy as np

    for i, src in enumerate(sorted(synthetic_npz.rglob("*.npz"))):
        with np.load(src, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        for key in ("edge_index", "node_config_ids", "node_splits"):
            if key in arrays:
                arrays[key] = arrays[key].astype(np.int32)
        if "node_config_feat" in arrays:
            arrays["config_runtime"] = arrays["config_runtime"].astype(np.int32)
        if src.parent.name == "test":
            arrays.pop("config_runtime_normalizers", None)
        out = dest / src.relative_to(synthetic_npz.parent)
        out.parent.mkdir(parents=True, exist_ok=True)
        (np.savez_compressed if i % 2 else np.savez)(out, **arrays)


@pytest.mark.slow
def test_real_download_layout_gives_the_same_submission(repo, tmp_path_factory):
    """`dvc exp run -S data=tpugraphs -S data.root=...` on a download-like copy of the same graphs (dtype
    variants, npz_all/ layout, compressed members) reproduces the synthetic run's submission byte for byte.

    Two collections, one of each kind (the layout one with int32 indices and runtimes, the tile one without test
    normalizers), keep the second pipeline run short: every stage runs for them as for five, and the rows of the
    submission they give are the synthetic run's rows of those collections, in its order."""
    shared, env = repo
    collections = ["tile-xla", "layout-xla-default"]
    selection = f"data.collections=[{','.join(collections)}]"
    header, *rows = (shared / "submissions" / "submission.csv").read_text().splitlines(keepends=True)
    prefixes = tuple(f"{Collection.parse(c).name}:" for c in collections)   # IDs are "<collection name>:<graph>"
    expected = header + "".join(row for row in rows if row.startswith(prefixes))
    assert len(expected) > len(header) + 100              # both collections have rows in the synthetic run
    dest = tmp_path_factory.mktemp("exp") / "repo"
    copy_repo_run(shared, dest)                           # leave the shared run as it is for other tests
    download = tmp_path_factory.mktemp("download") / "npz_all"
    write_download_like(dest / "data" / "synthetic" / "npz", download)
    run([str(BIN / "dvc"), "exp", "run", "-S", "data=tpugraphs", "-S", f"data.root={download}",
         "-S", selection], dest, env)
    assert (dest / "submissions" / "submission.csv").read_text() == expected
    out = run([str(BIN / "python"), "-m", "pipeline.submit", "--check", str(dest / "submissions" / "submission.csv"),
               "data=tpugraphs", f"data.root={download}", selection], dest, env)
    assert "valid submission" in out.stdout
    shown = run([str(BIN / "dvc"), "exp", "show", "--csv"], dest, env).stdout
    assert "tpugraphs" in shown


@pytest.mark.slow
def test_leaderboard_prints_the_summary_for_the_workspace_and_its_experiments(repo):
    """`python -m pipeline.summary --show` (models x splits beside the ceiling) and `--show --experiments` (one row
    per experiment from `dvc exp show --json`) print summary.json's scores; `dvc metrics show` prints it in one
    short row."""
    import json

    dest, env = repo
    summary = json.loads((dest / "metrics" / "summary.json").read_text())
    assert set(summary) == {"heuristic", "lgbm", "gnn", "ensemble", "ceiling", "autotune"}
    shown = run([str(BIN / "python"), "-m", "pipeline.summary", "--show"], dest, env).stdout.splitlines()
    assert shown[0].split() == ["model", "valid", "test"] and shown[1].split()[0] == "ceiling"
    ensemble = next(line.split() for line in shown if line.startswith("ensemble"))
    assert float(ensemble[1]) == pytest.approx(summary["ensemble"]["valid"], abs=5e-5)
    table = run([str(BIN / "python"), "-m", "pipeline.summary", "--show", "--experiments"], dest, env).stdout
    header, *rows = table.splitlines()
    assert header.split() == ["experiment", "ceiling.valid", "heuristic.valid", "lgbm.valid", "gnn.valid",
                              "ensemble.valid"]
    workspace = next(r.split() for r in rows if r.startswith("workspace"))
    assert float(workspace[-1]) == pytest.approx(summary["ensemble"]["valid"], abs=5e-5)
    metrics = run([str(BIN / "dvc"), "metrics", "show", "metrics/summary.json"], dest, env).stdout
    assert "ensemble.valid" in metrics and max(map(len, metrics.splitlines())) < 300


@pytest.mark.slow
def test_plots_page_is_grouped_and_renders_offline(repo):
    """`dvc plots show` (as the README runs it) writes one page with Vega inlined (no script from a CDN), the
    per-collection model comparisons, rank scatters, one GNN curve chart (a line per collection and member seed),
    stage autotune's chart and LightGBM's importance images."""
    import re

    dest, env = repo
    run([str(BIN / "dvc"), "plots", "show"], dest, env)
    page = (dest / "dvc_plots" / "index.html").read_text()
    assert not re.search(r"<script[^>]*\bsrc=", page) and "cdn.jsdelivr" not in page
    assert "window.vegaEmbed=" in page.replace(" ", "")
    charts = re.findall(r'<div id = "([^"]+)"', page)
    slugs = ["layout-nlp-default", "layout-nlp-random", "layout-xla-default", "layout-xla-random", "tile-xla"]
    assert charts == [f"plots_summary_models_{s}_csv" for s in slugs] + \
        [f"plots_summary_ranks_{s}_csv" for s in slugs] + ["plots_summary_gnn_curves_csv", "plots_summary_autotune_csv"]
    images = re.findall(r'<img src="(static/[^"]+\.png)"', page)
    assert images == [f"static/workspace_plots_lgbm_{s}_importance.png" for s in slugs]
    assert all((dest / "dvc_plots" / image).stat().st_size > 1000 for image in images)
    spec = page[page.index('<div id = "plots_summary_models_tile-xla_csv"'):]
    assert all(f'"model": "{m}"' in spec[:spec.index("vegaEmbed")] for m in ("heuristic", "lgbm", "gnn", "ensemble"))
    curves = page[page.index('<div id = "plots_summary_gnn_curves_csv"'):]
    curves = curves[:curves.index("vegaEmbed")]            # the fixture trains gnn.seeds [0, 1]: a line per member
    assert '"seed": "0"' in curves and '"seed": "1"' in curves
    assert '"detail": {"field": "seed"' in curves and '"color": {"field": "collection"' in curves
    tuned = page[page.index('<div id = "plots_summary_autotune_csv"'):]
    tuned = tuned[:tuned.index("vegaEmbed")]               # stage autotune's rows: every search of every program
    assert all(f'"search": "{s}"' in tuned for s in ("pick", "oracle", "random search", "featurizer sample"))
    assert '"runtime_vs_default"' in tuned and '"datum": 1' in tuned
