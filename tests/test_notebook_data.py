"""pipeline.notebook_data on tiny hand-written stage outputs (values checked by hand)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline import notebook_data as reports
from pipeline.predictions import Predictions, predictions_path, save_predictions
from pipeline.pruned import PrunedGraph, graph_dir, save_pruned_graph, write_index

TILE, LAYOUT = "tile-xla", "layout-xla-random"


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def write_csv(path: Path, table: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)


def index_row(split, graph_id, nodes, nodes_pruned, configs, configs_dedup):
    return {"split": split, "graph_id": graph_id, "source_file": f"{split}/{graph_id}.npz", "nodes": nodes,
            "edges": nodes - 1, "nodes_pruned": nodes_pruned, "edges_pruned": nodes_pruned - 1,
            "configs": configs, "configs_dedup": configs_dedup}


def tiny_graph(graph_id: str, split: str, runtime: list[float]) -> PrunedGraph:
    n = len(runtime)
    return PrunedGraph(graph_id=graph_id, split=split, node_feat=np.zeros((2, 3), np.float32),
                       node_feat_raw=np.zeros((2, 140), np.float32), node_opcode=np.array([1, 2]),
                       edge_index=np.array([[1, 0]]), node_ids=np.array([0, 1]),
                       config_runtime=np.array(runtime, np.float64), config_count=np.ones(n, np.int64),
                       config_inverse=np.arange(n))


@pytest.fixture
def pruned(tmp_path):
    """Layout collection pruned (3 graphs); tile collection not pruned (missing)."""
    root = tmp_path / "pruned"
    (root / LAYOUT).mkdir(parents=True)
    write_index([index_row("train", "a", 10, 4, 6, 5), index_row("train", "b", 20, 6, 4, 4),
                 index_row("valid", "c", 8, 8, 3, 2)], root / LAYOUT / "index.csv")
    for graph_id, split, runtime in (("a", "train", [2.0, 4.0, 8.0]), ("b", "train", [5.0, 5.0]),
                                     ("c", "valid", [3.0, 1.0])):
        save_pruned_graph(tiny_graph(graph_id, split, runtime), graph_dir(root, LAYOUT, split, graph_id))
    write_json(root / LAYOUT / "report.json", {"node_feat_columns": 75, "skipped": ["x.npz"],
                                                "params": {"hops": 1, "dedup": "min"}})
    return root


def test_pruned_index_counts_and_keep_ratios(pruned):
    index, missing = reports.pruned_index(pruned, [TILE, LAYOUT])
    assert missing == [pruned / TILE / "index.csv"]
    assert list(index["collection"].unique()) == [LAYOUT] and len(index) == 3
    counts = reports.split_counts(index).set_index("split")
    assert counts.loc["train", ["graphs", "nodes", "nodes_pruned", "configs", "configs_dedup"]].tolist() == \
        [2, 30, 10, 10, 9]
    ratios = reports.keep_ratios(counts.reset_index()).set_index("split")
    assert ratios.loc["train", "node_keep"] == pytest.approx(10 / 30)
    assert ratios.loc["train", "edge_keep"] == pytest.approx(8 / 28)   # edges = nodes - 1 per graph
    assert ratios.loc["valid", "config_keep"] == pytest.approx(2 / 3)


def test_prune_params(pruned):
    params, missing = reports.prune_params(pruned, [LAYOUT, TILE])
    assert missing == [pruned / TILE / "report.json"]
    row = params.iloc[0]
    assert (row["collection"], row["node_feat_columns"], row["skipped"], row["prune.hops"], row["prune.dedup"]) == \
        (LAYOUT, 75, 1, 1, "min")


def test_runtime_summary_spread_and_quantiles(pruned):
    index, _ = reports.pruned_index(pruned, [LAYOUT])
    per_graph, dist = reports.runtime_summary(pruned, index, quantiles=3)
    a = per_graph.set_index("graph_id").loc["a"]
    assert (a["configs"], a["best"], a["median"], a["worst"], a["spread"]) == (3, 2.0, 4.0, 8.0, 4.0)
    assert per_graph.set_index("graph_id").loc["c", "spread"] == 3.0
    assert dist[dist["graph_id"] == "a"]["ratio"].tolist() == [1.0, 2.0, 4.0]
    only_train, _ = reports.runtime_summary(pruned, index, splits=("train",))
    assert sorted(only_train["graph_id"]) == ["a", "b"]


def test_runtime_summary_rejects_nonpositive_runtimes(pruned):
    save_pruned_graph(tiny_graph("b", "train", [0.0, 5.0]), graph_dir(pruned, LAYOUT, "train", "b"))
    index, _ = reports.pruned_index(pruned, [LAYOUT])
    with pytest.raises(ValueError, match=r"b/config_runtime\.npy.*positive runtimes"):
        reports.runtime_summary(pruned, index)


@pytest.fixture
def metrics_dir(tmp_path):
    root = tmp_path / "metrics"
    write_json(root / "heuristic" / f"{TILE}.json", {"collection": "tile:xla", "valid": {"score": 0.5, "graphs": 3},
                                                     "test": {"score": 0.25, "graphs": 2}})
    write_json(root / "heuristic" / f"{LAYOUT}.json", {"valid": {"score": -0.1, "graphs": 2}})
    write_json(root / "ensemble" / f"{TILE}.json", {"valid": {"score": 0.75, "graphs": 3},
                                                    "weights": {"lgbm": 0.8, "gnn": 0.2},
                                                    "member_valid_scores": {"lgbm": 0.7, "gnn": 0.1}})
    write_json(root / "submit.json", {"model": "ensemble", "rows": 5,
                                      "test": {"collections": {"tile:xla": 0.9, "layout:xla:random": 0.3},
                                               "kaggle_score": 0.6}})
    return root


def test_scores_long_and_pivoted(metrics_dir):
    long, missing = reports.scores(metrics_dir, [TILE, LAYOUT])
    assert len(long) == 4
    names = {p.relative_to(metrics_dir).as_posix() for p in missing}
    assert names == {f"{s}/{c}.json" for s in ("lgbm", "gnn") for c in (TILE, LAYOUT)} | \
        {f"ensemble/{LAYOUT}.json"}
    table = reports.score_table(long)
    assert list(table.columns) == ["heuristic", "ensemble"]
    assert table.loc[(TILE, "test"), "heuristic"] == 0.25 and table.loc[(TILE, "valid"), "ensemble"] == 0.75
    assert np.isnan(table.loc[(LAYOUT, "valid"), "ensemble"])


def test_overall_row_is_the_mean_over_collections_per_split():
    long = pd.DataFrame({"collection": [TILE, LAYOUT, TILE, LAYOUT, TILE],
                         "model": ["lgbm", "lgbm", "gnn", "gnn", "lgbm"],
                         "split": ["valid", "valid", "valid", "valid", "test"],
                         "score": [-2.5, 0.5, 0.25, 0.75, 0.125]})
    table = reports.with_overall(reports.score_table(long))
    assert table.loc[("overall", "valid"), "lgbm"] == -1.0           # a negative tile score counts as it is
    assert table.loc[("overall", "valid"), "gnn"] == 0.5
    assert np.isnan(table.loc[("overall", "test"), "lgbm"])           # layout test missing: no partial mean
    assert list(table.index[-2:]) == [("overall", "valid"), ("overall", "test")]


def test_scores_show_the_dataset_ceiling_beside_every_model(metrics_dir):
    write_json(metrics_dir / "lgbm" / f"{TILE}.json", {"valid": {"score": 0.5, "graphs": 2},
                                                       "ceiling": {"valid": 0.9}})
    long, _ = reports.scores(metrics_dir, [TILE, LAYOUT])
    table = reports.score_table(long)
    assert list(table.columns) == ["heuristic", "lgbm", "ensemble", "ceiling"]
    assert table.loc[(TILE, "valid"), "ceiling"] == 0.9 and table.loc[(TILE, "valid"), "lgbm"] == 0.5
    assert np.isnan(table.loc[(TILE, "test"), "ceiling"])


def test_scores_rejects_a_malformed_split(metrics_dir):
    write_json(metrics_dir / "gnn" / f"{TILE}.json", {"valid": 0.3})
    with pytest.raises(ValueError, match=r"gnn/tile-xla\.json: key 'valid'"):
        reports.scores(metrics_dir, [TILE])


def test_ensemble_weights_and_submit(metrics_dir):
    weights, missing = reports.ensemble_weights(metrics_dir, [TILE, LAYOUT])
    assert missing == [metrics_dir / "ensemble" / f"{LAYOUT}.json"]
    assert weights.set_index("member")[["weight", "valid_score"]].to_dict("index") == \
        {"lgbm": {"weight": 0.8, "valid_score": 0.7}, "gnn": {"weight": 0.2, "valid_score": 0.1}}
    table, score = reports.submit_scores(metrics_dir)
    assert score == 0.6 and dict(zip(table["collection"], table["score"])) == {"tile:xla": 0.9,
                                                                               "layout:xla:random": 0.3}


def test_submit_scores_without_test_truth(tmp_path):
    assert reports.submit_scores(tmp_path)[1] is None                       # submit not run
    write_json(tmp_path / "submit.json", {"model": "ensemble", "rows": 5})  # real data: nothing to score
    table, score = reports.submit_scores(tmp_path)
    assert score is None and table.empty


def test_all_metrics_flattens_numbers_only(metrics_dir):
    table = reports.all_metrics(metrics_dir)
    found = {(f, m): v for f, m, v in table.itertuples(index=False)}
    assert found[("ensemble/tile-xla.json", "weights.lgbm")] == 0.8
    assert found[("submit.json", "test.kaggle_score")] == 0.6
    assert ("heuristic/tile-xla.json", "collection") not in found and ("submit.json", "model") not in found


def test_read_json_names_the_file(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        reports.read_json(tmp_path / "bad.json")


@pytest.fixture
def plots_dir(tmp_path):
    root = tmp_path / "plots"
    write_csv(root / "heuristic" / f"{TILE}_per_graph.csv",
              pd.DataFrame({"split": ["valid", "valid", "test"], "graph_id": ["001", "g2", "g3"],
                            "score": [1.0, -2.0, 0.5]}))
    write_csv(root / "lgbm" / f"{TILE}_per_graph.csv",
              pd.DataFrame({"split": ["valid"], "graph_id": ["001"], "score": [0.9]}))
    write_csv(root / "gnn" / TILE / "curve.csv", pd.DataFrame({"seed": [0, 0], "epoch": [0, 1], "loss": [0.5, 0.25],
                                                               "valid_score": [0.1, 0.3], "lr": [1e-3, 5e-4]}))
    write_csv(root / "lgbm" / TILE / "importance.csv",
              pd.DataFrame({"feature": ["f1", "f2", "f3"], "gain": [1.0, 3.0, 2.0], "split": [4, 2, 1]}))
    write_csv(root / "ensemble" / f"{TILE}_scatter.csv",
              pd.DataFrame({"graph_id": ["g"], "true_rank": [0.0], "predicted_rank": [1.0]}))
    return root


def test_per_graph_keeps_graph_ids_as_text(plots_dir):
    table, missing = reports.per_graph(plots_dir, [TILE])
    assert list(table.columns) == ["collection", "model", "split", "graph_id", "score"]
    assert sorted(table["model"].unique()) == ["heuristic", "lgbm"] and len(table) == 4
    assert table.loc[table["model"] == "lgbm", "graph_id"].tolist() == ["001"]
    assert {p.parent.name for p in missing} == {"gnn", "ensemble"}


def test_per_graph_rejects_wrong_columns(plots_dir):
    write_csv(plots_dir / "ensemble" / f"{TILE}_per_graph.csv", pd.DataFrame({"graph_id": ["g"], "tau": [0.1]}))
    with pytest.raises(ValueError, match=r"ensemble/tile-xla_per_graph\.csv: columns \['split', 'score'\] missing"):
        reports.per_graph(plots_dir, [TILE])


def test_curves_importance_and_scatter(plots_dir):
    curves, missing = reports.gnn_curves(plots_dir, [TILE, LAYOUT])
    assert curves["valid_score"].tolist() == [0.1, 0.3] and missing == [plots_dir / "gnn" / LAYOUT / "curve.csv"]
    top, _ = reports.lgbm_importance(plots_dir, [TILE], top_k=2)
    assert top["feature"].tolist() == ["f2", "f3"]
    scatter, missing = reports.rank_scatter_points(plots_dir, [TILE], model="ensemble")
    assert scatter["predicted_rank"].tolist() == [1.0] and missing == []


def test_prediction_counts(tmp_path):
    preds = Predictions()
    preds["g1"], preds["g2"] = [0.1, 0.2, 0.3], [1.0]
    save_predictions(preds, predictions_path(tmp_path, "lgbm", TILE, "valid"))
    table, missing = reports.prediction_counts(tmp_path, [TILE], models=("lgbm",))
    assert table[["split", "graphs", "configs"]].values.tolist() == [["valid", 2, 4]]
    assert missing == [predictions_path(tmp_path, "lgbm", TILE, "test")]


def test_missing_note():
    assert reports.missing_note([], "gnn") == ""
    assert reports.missing_note([Path("plots/gnn/x/curve.csv")], "gnn") == \
        "Note: 1 gnn output(s) not found (stage not run?): plots/gnn/x/curve.csv"


def test_nothing_pruned_gives_empty_tables(tmp_path):
    index, missing = reports.pruned_index(tmp_path, [TILE])
    assert index.empty and missing == [tmp_path / TILE / "index.csv"]
    assert reports.split_counts(index).empty and reports.runtime_summary(tmp_path, index)[0].empty


def test_autotune_runtimes_per_program(tmp_path):
    table, missing = reports.autotune_runtimes(tmp_path)
    assert missing == [tmp_path / "autotune.json"] and list(table.columns) == list(reports.AUTOTUNE_COLUMNS)
    row = {"program": "unet", "collection": "layout:xla:random", "t_default_ns": 200.0, "t_pick_ns": 150.0,
           "t_oracle_ns": 100.0, "t_random_search_ns": 180.0, "t_featurizer_sample_ns": 200.0, "share": 0.5,
           "guard_kept_pick": True, "unguarded": {}}
    write_json(tmp_path / "autotune.json", {"programs": [row, {**row, "program": "mlp", "t_pick_ns": 200.0,
                                                                "share": 0.0, "guard_kept_pick": False}]})
    table, missing = reports.autotune_runtimes(tmp_path)
    assert missing == [] and table["program"].tolist() == ["unet", "mlp"]
    assert table["t_pick_ns"].tolist() == [150.0, 200.0] and table["share"].tolist() == [0.5, 0.0]
    write_json(tmp_path / "autotune.json", {"programs": [{"program": "unet"}]})
    with pytest.raises(ValueError, match="autotune.json: key 'programs' must list rows with"):
        reports.autotune_runtimes(tmp_path)


def test_autotune_ratios_put_each_search_over_the_default():
    runtimes = pd.DataFrame([{"program": "unet", "collection": "layout:xla:random", "t_default_ns": 200.0,
                              "t_pick_ns": 150.0, "t_oracle_ns": 100.0, "t_random_search_ns": 180.0,
                              "t_featurizer_sample_ns": 200.0},
                             {"program": "mlp", "collection": "layout:nlp:default", "t_default_ns": 40.0,
                              "t_pick_ns": 40.0, "t_oracle_ns": 30.0, "t_random_search_ns": 40.0,
                              "t_featurizer_sample_ns": 50.0}])
    long = reports.autotune_ratios(runtimes)
    assert list(long.columns) == ["program", "search", "runtime_vs_default"]
    assert long.values.tolist() == [
        ["unet | layout:xla:random", "pick", 0.75], ["mlp | layout:nlp:default", "pick", 1.0],
        ["unet | layout:xla:random", "oracle", 0.5], ["mlp | layout:nlp:default", "oracle", 0.75],
        ["unet | layout:xla:random", "random search", 0.9], ["mlp | layout:nlp:default", "random search", 1.0],
        ["unet | layout:xla:random", "featurizer sample", 1.0], ["mlp | layout:nlp:default", "featurizer sample", 1.25]]
    empty = reports.autotune_ratios(reports.autotune_runtimes(Path("/nonexistent"))[0])
    assert empty.empty and list(empty.columns) == ["program", "search", "runtime_vs_default"]


@pytest.mark.parametrize("cell, found", [("abc", "expected numbers, found 'abc'"),
                                         ("", "expected a number in every row, found an empty cell in row 1")])
def test_pruned_index_refuses_a_count_that_is_no_number(pruned, cell, found):
    """A count that is text was a TypeError traceback in keep_ratios; an empty one (a file cut short) was summed
    as if absent."""
    path = pruned / LAYOUT / "index.csv"
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    table.loc[0, "nodes"] = cell
    table.to_csv(path, index=False)
    with pytest.raises(ValueError, match=rf"index\.csv: column 'nodes' {found}"):
        reports.pruned_index(pruned, [LAYOUT, TILE])


def test_pruned_index_refuses_an_unknown_split(pruned):
    path = pruned / LAYOUT / "index.csv"
    path.write_text(path.read_text().replace("valid,c", "foo,c"))
    with pytest.raises(ValueError, match=r"index\.csv: column 'split' expected one of \['train', 'valid', 'test'\], "
                                         r"found 'foo'"):
        reports.pruned_index(pruned, [LAYOUT])


@pytest.mark.parametrize("key, value", [("params", [1]), ("skipped", 3)])
def test_prune_params_refuses_a_report_of_another_shape(pruned, key, value):
    """Was a TypeError traceback (object of type 'int' has no len()) or an AttributeError."""
    report = pruned / LAYOUT / "report.json"
    write_json(report, {**json.loads(report.read_text()), key: value})
    with pytest.raises(ValueError, match=rf"report\.json: key '{key}' expected a JSON"):
        reports.prune_params(pruned, [LAYOUT])


@pytest.mark.parametrize("payload, key", [({"valid": {"score": "x"}}, "valid.score"),
                                          ({"valid": {"score": None}}, "valid.score"),
                                          ({"valid": {"score": float("nan")}}, "valid.score"),
                                          ({"valid": {"score": True}}, "valid.score"),
                                          ({"valid": {"score": 0.1}, "ceiling": {"valid": "a"}}, "ceiling.valid")])
def test_scores_refuse_a_score_that_is_no_finite_number(metrics_dir, payload, key):
    """A string score was 'could not convert string to float' without the file, null a TypeError traceback, NaN
    and true were shown as scores."""
    write_json(metrics_dir / "gnn" / f"{TILE}.json", payload)
    with pytest.raises(ValueError, match=rf"gnn/tile-xla\.json: key '{key}' expected a finite number"):
        reports.scores(metrics_dir, [TILE])


def test_scores_refuse_a_ceiling_that_is_no_object(metrics_dir):
    """A list was silently ignored (no ceiling row)."""
    write_json(metrics_dir / "gnn" / f"{TILE}.json", {"valid": {"score": 0.1}, "ceiling": [0.9]})
    with pytest.raises(ValueError, match=r"gnn/tile-xla\.json: key 'ceiling' expected \{split: score\}"):
        reports.scores(metrics_dir, [TILE])


def test_ensemble_weights_and_submit_scores_refuse_values_that_are_no_numbers(metrics_dir):
    ensemble = metrics_dir / "ensemble" / f"{TILE}.json"
    write_json(ensemble, {"weights": {"lgbm": "x"}})
    with pytest.raises(ValueError, match=r"ensemble/tile-xla\.json: key 'weights\.lgbm' expected a finite number"):
        reports.ensemble_weights(metrics_dir, [TILE])
    write_json(metrics_dir / "submit.json", {"test": {"collections": {"tile:xla": None}, "kaggle_score": 0.5}})
    with pytest.raises(ValueError, match=r"submit\.json: key 'test\.collections\.tile:xla' expected a finite"):
        reports.submit_scores(metrics_dir)
    write_json(metrics_dir / "submit.json", {"test": [0.5]})
    with pytest.raises(ValueError, match=r"submit\.json: key 'test' expected"):
        reports.submit_scores(metrics_dir)


@pytest.mark.parametrize("text, found", [("split,graph_id,score\nvalid,g,abc\n", "expected numbers, found 'abc'"),
                                         ("split,graph_id,score\nvalid,g,1.0\nvalid,h", "found an empty cell in row 2"),
                                         ("", "expected a CSV the pipeline wrote")])
def test_per_graph_refuses_a_malformed_file_naming_it(plots_dir, text, found):
    """A text score was accepted (an object column the charts misread), a file cut short mid-row read as NaN, an
    empty file was pandas' EmptyDataError without the file's name."""
    from pipeline.errors import PipelineError

    (plots_dir / "lgbm" / f"{TILE}_per_graph.csv").write_text(text)
    with pytest.raises(PipelineError, match=rf"lgbm/tile-xla_per_graph\.csv: .*{found}"):   # one line in stage summary
        reports.per_graph(plots_dir, [TILE])


@pytest.mark.parametrize("key, value, found", [("t_default_ns", "x", "expected a finite number, found 'x'"),
                                               ("t_pick_ns", None, "expected a finite number, found None"),
                                               ("t_default_ns", 0, "expected a runtime > 0, found 0"),
                                               ("share", "x", "expected a finite number, found 'x'")])
def test_autotune_runtimes_refuse_a_runtime_that_is_no_positive_number(tmp_path, key, value, found):
    """A text runtime was 'could not convert string to float' naming no file (a traceback in stage summary, which
    reads these rows); null or 0 went into the chart as a NaN or inf ratio; a text share was shown as is. The
    refusal is a PipelineError, one line in stage summary."""
    from pipeline.errors import PipelineError

    row = {"program": "unet", "collection": "layout:xla:random", "t_default_ns": 200.0, "t_pick_ns": 150.0,
           "t_oracle_ns": 100.0, "t_random_search_ns": 180.0, "t_featurizer_sample_ns": 200.0, "share": -0.5,
           "guard_kept_pick": True}
    write_json(tmp_path / "autotune.json", {"programs": [row, {**row, "share": None}]})   # an oracle without gain
    assert reports.autotune_runtimes(tmp_path)[0]["share"].isna().tolist() == [False, True]
    write_json(tmp_path / "autotune.json", {"programs": [row, {**row, key: value}]})
    with pytest.raises(PipelineError, match=rf"autotune\.json: key 'programs\[1\]\.{key}' {found}"):
        reports.autotune_runtimes(tmp_path)
