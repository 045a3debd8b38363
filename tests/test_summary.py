"""Stage summary: per-model Kaggle score from hand-written per-collection metrics files."""
import json

import pytest

from pipeline.scoring import leaderboard
from pipeline.summary import model_summary, read_collection_metrics, summarize, summary_file
from pipeline.tpugraphs.dataset import Collection

TILE, XLA_RANDOM = Collection.parse("tile-xla"), Collection.parse("layout-xla-random")


def write_metrics(root, model, slug, payload):
    path = root / model / f"{slug}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def test_summarize_means_the_collection_scores_per_split(tmp_path):
    write_metrics(tmp_path, "lgbm", "tile-xla", {"valid": {"score": 0.9, "graphs": 3}, "test": {"score": 0.5}})
    write_metrics(tmp_path, "lgbm", "layout-xla-random", {"valid": {"score": 0.3}, "test": {"score": 0.1}})
    summary = summarize(tmp_path, ["lgbm"], [TILE, XLA_RANDOM], ["valid", "test"])
    assert summary["lgbm"]["valid"] == {"kaggle": pytest.approx(0.6), "collections": 2, "tile-xla": 0.9,
                                        "layout-xla-random": 0.3}
    assert summary["lgbm"]["test"]["kaggle"] == pytest.approx(0.3)
    assert summary_file(tmp_path) == tmp_path / "summary.json"


def test_a_split_without_truth_is_left_out_not_zero():
    summary = model_summary({"tile-xla": {"valid": {"score": 0.8}}}, ["valid", "test"], "m")
    assert list(summary) == ["valid"] and summary["valid"]["kaggle"] == pytest.approx(0.8)


def test_a_split_scored_in_only_some_collections_is_refused():
    with pytest.raises(ValueError, match="'test' is scored in \\['a'\\] but not in \\['b'\\]"):
        model_summary({"a": {"valid": {"score": 1.0}, "test": {"score": 1.0}}, "b": {"valid": {"score": 0.0}}},
                      ["valid", "test"], "m")


def test_missing_or_broken_metrics_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="gnn/tile-xla.json: no metrics file"):
        summarize(tmp_path, ["gnn"], [TILE], ["valid"])
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        read_collection_metrics(tmp_path / "bad.json")


def write_plots(root, stage, slug, scores, points, curve=None):
    """A model stage's plot files: per-graph scores {graph: (valid, test)}, rank scatter points, a GNN curve."""
    folder = root / stage
    folder.mkdir(parents=True, exist_ok=True)
    rows = [f"valid,{g},{v}" for g, (v, _) in scores.items()] + [f"test,{g},{t}" for g, (_, t) in scores.items()]
    (folder / f"{slug}_per_graph.csv").write_text("split,graph_id,score\n" + "\n".join(rows) + "\n")
    (folder / f"{slug}_scatter.csv").write_text("graph_id,true_rank,predicted_rank\n" +
                                                "\n".join(f"g1,{t},{p}" for t, p in points) + "\n")
    if curve is not None:
        (folder / slug).mkdir(exist_ok=True)
        (folder / slug / "curve.csv").write_text("seed,epoch,loss,valid_score,lr\n" +
                                                 "\n".join(f"{k},{e},{l},{s},0.1" for k, e, l, s in curve) + "\n")


def test_review_tables_put_every_model_side_by_side_per_collection(tmp_path):
    from pipeline.summary import review_tables

    write_plots(tmp_path, "lgbm", "tile-xla", {"g1": (0.5, 0.1), "g2": (-1.5, 0.2)}, [(0.0, 1.0)])
    write_plots(tmp_path, "gnn", "tile-xla", {"g1": (0.75, 0.3), "g2": (1.0, 0.4)}, [(1.0, 0.0), (0.0, 0.5)],
                curve=[(0, 0, 0.9, -2.0), (0, 1, 0.5, 0.25), (1, 0, 0.8, -1.0), (1, 1, 0.4, 0.5)])
    tables = review_tables(tmp_path, ["lgbm", "gnn"], ["tile-xla"])
    assert sorted(tables) == ["gnn_curves.csv", "models/tile-xla.csv", "ranks/tile-xla.csv"]
    models = tables["models/tile-xla.csv"]
    assert list(models.columns) == ["graph_id", "model", "score"]
    assert models.values.tolist() == [["g1", "lgbm", 0.5], ["g2", "lgbm", -1.5], ["g1", "gnn", 0.75],
                                      ["g2", "gnn", 1.0]]                      # valid only, negatives kept
    ranks = tables["ranks/tile-xla.csv"]
    assert ranks[["model", "true_rank", "predicted_rank"]].values.tolist() == [["lgbm", 0.0, 1.0],
                                                                              ["gnn", 1.0, 0.0], ["gnn", 0.0, 0.5]]
    curves = tables["gnn_curves.csv"]
    assert curves.values.tolist() == [["tile-xla", 0, 0, 0.9, -2.0], ["tile-xla", 0, 1, 0.5, 0.25],
                                      ["tile-xla", 1, 0, 0.8, -1.0], ["tile-xla", 1, 1, 0.4, 0.5]]   # a line per seed


def test_review_tables_name_a_missing_stage_output(tmp_path):
    from pipeline.summary import review_tables

    write_plots(tmp_path, "lgbm", "tile-xla", {"g1": (0.5, 0.1)}, [(0.0, 1.0)])
    with pytest.raises(FileNotFoundError, match=r"gnn/tile-xla_per_graph.csv: no per-graph score file"):
        review_tables(tmp_path, ["lgbm", "gnn"], ["tile-xla"])


def test_autotune_summary_carries_the_mean_share(tmp_path):
    from pipeline.files import write_json
    from pipeline.summary import autotune_summary

    with pytest.raises(FileNotFoundError, match="autotune.json: no metrics file"):
        autotune_summary(tmp_path)
    mean = {"mean": 0.5, "std": 0.1, "n": 3}
    shares = {"share": mean, "min_share": 0.2, "share_featurizer_sample": {**mean, "mean": 0.25},
              "share_random_search": {**mean, "mean": 0.125}}
    write_json({"all": shares}, tmp_path / "autotune.json")                  # written before log_share existed
    with pytest.raises(ValueError, match="autotune.json: key 'all.log_share' missing; re-run stage autotune"):
        autotune_summary(tmp_path)
    write_json({"all": {**shares, "log_share": {"pick": 0.25, "random_search": 0.5}}}, tmp_path / "autotune.json")
    assert autotune_summary(tmp_path) == {"share": 0.5, "programs": 3, "log_share": 0.25}


def test_autotune_chart_reads_stage_autotune_rows(tmp_path):
    from pipeline.files import write_json
    from pipeline.summary import autotune_table

    with pytest.raises(FileNotFoundError, match="autotune.json: no autotune metrics file"):
        autotune_table(tmp_path)
    row = {"program": "unet", "collection": "layout:xla:random", "t_default_ns": 400.0, "t_pick_ns": 300.0,
           "t_oracle_ns": 100.0, "t_random_search_ns": 400.0, "t_featurizer_sample_ns": 500.0, "share": 1 / 3,
           "guard_kept_pick": True}
    write_json({"programs": [row]}, tmp_path / "autotune.json")
    table = autotune_table(tmp_path)
    assert table.values.tolist() == [["unet | layout:xla:random", "pick", 0.75],
                                     ["unet | layout:xla:random", "oracle", 0.25],
                                     ["unet | layout:xla:random", "random search", 1.0],
                                     ["unet | layout:xla:random", "featurizer sample", 1.25]]
    write_json({"programs": []}, tmp_path / "autotune.json")             # real data: no built-in program
    assert autotune_table(tmp_path).empty


def test_summary_json_is_flat_with_the_ceiling_beside_the_models():
    detail = {"lgbm": {"valid": {"kaggle": 0.6, "collections": 2, "tile-xla": 0.9}},
              "gnn": {"valid": {"kaggle": 0.7, "collections": 2}, "test": {"kaggle": 0.5, "collections": 2}}}
    assert leaderboard.flat_summary(detail, {"valid": 0.95, "test": None}) == {
        "lgbm": {"valid": 0.6}, "gnn": {"valid": 0.7, "test": 0.5}, "ceiling": {"valid": 0.95}}
    per_collection = {"a": {"ceiling": {"valid": 1.0, "test": 0.8}}, "b": {"ceiling": {"valid": 0.5}}}
    assert leaderboard.split_ceiling(per_collection, "valid") == pytest.approx(0.75)
    assert leaderboard.split_ceiling(per_collection, "test") is None        # b has no test ceiling


def test_workspace_table_ranks_the_models_below_the_ceiling():
    summary = {"heuristic": {"valid": 0.2, "test": 0.1}, "ensemble": {"valid": 0.61234, "test": 0.4},
               "lgbm": {"valid": 0.5}, "ceiling": {"valid": 0.9, "test": 0.8}}
    assert leaderboard.workspace_table(summary, ["valid", "test"], "valid").splitlines() == [
        "model       valid    test",
        "ceiling    0.9000  0.8000",
        "ensemble   0.6123  0.4000",
        "lgbm       0.5000       -",
        "heuristic  0.2000  0.1000"]


def exp_state(rev, name, ensemble, gnn, experiments=None):
    metrics = {"metrics/summary.json": {"data": {"ensemble": {"valid": ensemble}, "gnn": {"valid": gnn}}}}
    return {"rev": rev, "name": name, "data": {"rev": rev, "metrics": metrics}, "error": None,
            "experiments": experiments}


def test_experiments_table_has_one_row_per_experiment_best_first():
    """The shape `dvc exp show --json` prints (DVC 3): workspace, baseline commit, its experiments in ranges."""
    exps = [{"revs": [exp_state("b" * 40, "slow-lr", 0.50, 0.45)], "name": "slow-lr", "executor": None},
            {"revs": [exp_state("c" * 40, "wide", 0.70, 0.65)], "name": "wide", "executor": None},
            {"revs": [{"rev": "d" * 40, "name": "queued", "data": None, "experiments": None}], "name": "queued"}]
    states = [exp_state("workspace", None, 0.60, 0.55), exp_state("a" * 40, "main", 0.60, 0.55, exps)]
    table = leaderboard.experiments_table(states, "metrics/summary.json", ["gnn", "ensemble"], ("ensemble", "valid"))
    lines = table.splitlines()
    assert lines[0].split() == ["experiment", "ceiling.valid", "gnn.valid", "ensemble.valid"]
    assert [line.split()[0] for line in lines[1:]] == ["wide", "workspace", "main", "slow-lr"]
    assert lines[1].split() == ["wide", "-", "0.6500", "0.7000"]


def test_show_prints_the_leaderboard_or_names_the_missing_summary(tmp_path, capsys):
    from pipeline import summary as stage

    args = [f"paths.metrics_dir={tmp_path}", "data=programs_ci"]
    with pytest.raises(SystemExit, match=f"{tmp_path / 'summary.json'}: no summary; run `dvc repro`"):
        stage.main(["--show", *args])
    (tmp_path / "summary.json").write_text(json.dumps({"lgbm": {"valid": 0.5, "test": 0.25}}))
    stage.main(["--show", *args])
    captured = capsys.readouterr()
    assert captured.out.splitlines()[:2] == ["model   valid    test", "lgbm   0.5000  0.2500"]
    assert "ad-hoc run" not in captured.err                 # --show writes nothing
    for flag in ("--markdown", "--experiments"):             # without --show the stage would run and rewrite
        with pytest.raises(SystemExit, match=f"^error: {flag} prints a table: expected it with --show"):
            stage.main([flag, *args])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


@pytest.mark.parametrize("entry", [{"score": float("nan")}, {"score": "x"}, {}, 3, {"score": True}])
def test_a_metrics_score_the_stage_never_writes_is_named(tmp_path, entry):
    """A model's metrics file with a NaN valid score made summary.json hold NaN (no JSON, 'nan' on the
    leaderboard); a split that is a number a TypeError traceback, one without 'score' a KeyError traceback."""
    from pipeline.errors import PipelineError

    write_metrics(tmp_path, "gnn", "tile-xla", {"valid": entry})
    with pytest.raises(PipelineError) as refusal:
        summarize(tmp_path, ["gnn"], [TILE], ["valid"])
    assert str(refusal.value).startswith(f"{tmp_path / 'gnn' / 'tile-xla.json'}: key 'valid.score': expected a "
                                         f"finite score as the stage writes it; found ")


@pytest.mark.parametrize("summary, key", [({"gnn": 3}, "gnn"), ({"gnn": {"valid": "x"}}, "gnn"),
                                          ({"gnn": {"valid": float("nan")}}, "gnn"), ({"autotune": 5}, "autotune"),
                                          ({"autotune": {"share": "x"}}, "autotune"),
                                          ({"gnn": {"valid": {"kaggle": "x"}}}, "gnn")])
def test_show_names_a_summary_the_stage_never_writes(tmp_path, summary, key):
    """--show on a summary.json edited by hand: an AttributeError traceback (a model that is a number), a line
    without the file ('could not convert string to float'), or NaN shown as 'nan'."""
    from pipeline import summary as stage

    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    with pytest.raises(SystemExit, match=f"^error: {path}: key '{key}': expected "):
        stage.main(["--show", f"paths.metrics_dir={tmp_path}", "data=programs_ci"])
    path.write_text(json.dumps({"gnn": {"valid": {"kaggle": 0.5}, "test": None}, "ceiling": {"valid": {"kaggle": None}},
                                "autotune": {"share": 0.2}}))        # the nested layout of earlier runs, nulls
    stage.main(["--show", f"paths.metrics_dir={tmp_path}", "data=programs_ci"])
