import pandas as pd
import pytest

from pipeline import sweep, synthesize
from pipeline.config import compose


def test_sweep_runs_one_job_per_combination_into_its_own_folder(tmp_path):
    data = [f"paths.synthetic_dir={tmp_path / 'syn'}", "data=programs_ci"]
    synthesize.run(compose(data))
    table = sweep.main(["heuristic", "--collection", "tile-xla", "heuristic.chunk_size=10,20", "seed=1,2",
                        f"paths.multirun_dir={tmp_path / 'multirun'}", *data])
    assert len(table) == 4 and table["job"].tolist() == [0, 1, 2, 3]
    assert table["overrides"].str.contains("heuristic.chunk_size=20").sum() == 2
    folder = tmp_path / "multirun" / "heuristic-tile-xla"
    for job in range(4):
        assert (folder / str(job) / "predictions" / "heuristic" / "tile-xla" / "test.npz").exists()
    assert pd.read_csv(folder / "summary.csv")["valid_score"].notna().all()
    assert not (tmp_path / "predictions").exists()


@pytest.mark.slow
def test_sweep_through_the_submitit_launcher(tmp_path):
    """A tiny sweep of 2 jobs sent through hydra-submitit-launcher's local executor (each job a subprocess)."""
    data = [f"paths.synthetic_dir={tmp_path / 'syn'}", "data=programs_ci"]
    synthesize.run(compose(data))
    table = sweep.main(["heuristic", "--collection", "tile-xla", "seed=1,2", "hydra/launcher=submitit_local",
                        "hydra.launcher.timeout_min=10", f"paths.multirun_dir={tmp_path / 'multirun'}", *data])
    assert table["job"].tolist() == [0, 1] and table["valid_score"].notna().all()
    folder = tmp_path / "multirun" / "heuristic-tile-xla"
    assert list((folder / ".submitit").glob("*/*_result.pkl"))           # the jobs really went through submitit
    for job in range(2):
        assert (folder / str(job) / "predictions" / "heuristic" / "tile-xla" / "test.npz").exists()


@pytest.mark.slow
def test_sweep_through_the_optuna_sweeper(tmp_path):
    """A 2-trial Optuna search (hydra-optuna-sweeper): each job returns its valid score, the best one is reported."""
    import yaml
    data = [f"paths.synthetic_dir={tmp_path / 'syn'}", "data=programs_ci"]
    synthesize.run(compose(data))
    table = sweep.main(["heuristic", "--collection", "tile-xla", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2",
                        "hydra.sweeper.direction=maximize", "hydra.sweeper.sampler.seed=0",
                        "heuristic.chunk_size=choice(10,20)", f"paths.multirun_dir={tmp_path / 'multirun'}", *data])
    assert table["job"].tolist() == [0, 1] and table["valid_score"].notna().all()
    assert table["overrides"].str.contains("heuristic.chunk_size=").all()
    best = yaml.safe_load((tmp_path / "multirun" / "heuristic-tile-xla" / "optimization_results.yaml").read_text())
    assert best["name"] == "optuna" and best["best_value"] == table["valid_score"].max()


def test_an_unknown_collection_is_one_line():
    with pytest.raises(SystemExit, match=r"^error: --collection: unknown collection 'foo': expected one of"):
        sweep.main(["gnn", "--collection", "foo"])
