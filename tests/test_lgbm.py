"""pipeline.lgbm and pipeline.lgbm_model: labels, query chunking, coverage of predictions, determinism, stage outputs."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline import lgbm as lgbm_stage
from pipeline.config import compose
from pipeline.lgbm_model import importance, infer, rank_data, train
from pipeline.features.table import FeatureSpec
from pipeline.predictions import load_predictions
from pipeline.pruned import PrunedGraph, collection_dir, graph_dir, iter_split, save_pruned_graph, write_index

SLUG = "layout-xla-random"
SPLIT_GRAPHS = {"train": 6, "valid": 2, "test": 2}
PERMS = [[-1] * 6, [1, 0, -1, -1, -1, -1], [0, 1, -1, -1, -1, -1]]


def random_layout_graph(graph_id: str, split: str, rng: np.random.Generator, n_configs: int = 60) -> PrunedGraph:
    """parameter -> dot -> reshape -> dot, rank 2 everywhere; runtime grows with non-default blocks and copies.

    Valid graphs get 10 extra original configs that duplicate kept rows (config_inverse is not the identity).
    """
    raw = np.full((4, 140), -1, dtype=np.float32)
    raw[:, 21:23] = [[64, 256], [256, 8], [16, 128], [128, 128]]
    raw[:, 134:136] = [1, 0]
    choice = rng.integers(0, len(PERMS), size=(n_configs, 3, 3))            # [configs, NC, tensors]
    node_config_feat = np.array(PERMS, dtype=np.int8)[choice].reshape(n_configs, 3, 18)  # [configs, NC, 18]
    copies = (choice[:, :-1, 0] != choice[:, 1:, 1]).sum(1)
    runtime = 10.0 + (choice > 0).sum((1, 2)) + 3.0 * copies + rng.random(n_configs)
    inverse = np.arange(n_configs)
    if split == "valid":
        inverse = np.concatenate([inverse, rng.integers(0, n_configs, size=10)])
    return PrunedGraph(
        graph_id=graph_id, split=split, node_feat=rng.normal(size=(4, 5)).astype(np.float32), node_feat_raw=raw,
        node_opcode=np.array([63, 34, 75, 34]), edge_index=np.array([[1, 0], [2, 1], [3, 2]]), node_ids=np.arange(4),
        config_runtime=runtime if split != "test" else np.zeros(n_configs), config_count=np.ones(n_configs, np.int64),
        config_inverse=inverse, node_config_ids=np.array([1, 2, 3]), node_config_feat=node_config_feat)


@pytest.fixture(scope="module")
def pruned_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("pruned")
    rng = np.random.default_rng(0)
    rows = []
    for split, n in SPLIT_GRAPHS.items():
        for i in range(n):
            graph = random_layout_graph(f"{split}{i}", split, rng)
            save_pruned_graph(graph, graph_dir(root, SLUG, split, graph.graph_id))
            rows.append({"split": split, "graph_id": graph.graph_id, "source_file": f"{graph.graph_id}.npz",
                         "nodes": 4, "edges": 3, "nodes_pruned": 4, "edges_pruned": 3,
                         "configs": graph.n_configs, "configs_dedup": graph.n_kept})
    write_index(rows, collection_dir(root, SLUG) / "index.csv")
    return root


@pytest.fixture(scope="module")
def cfg(pruned_dir):
    return compose(["data=programs_ci", f"paths.pruned_dir={pruned_dir}", "lgbm.num_threads=1",
                    "lgbm.num_boost_round=30", "lgbm.max_query_rows=25", "lgbm.min_data_in_leaf=5"])


def test_relevance_labels_are_runtime_quantile_grades():
    labels = rank_data.relevance_labels(np.array([3.0, 1.0, 2.0, 2.0]), grades=4)
    assert labels.tolist() == [0, 3, 2, 2]                   # fastest highest, ties share a grade
    labels = rank_data.relevance_labels(np.random.default_rng(0).random(1000), grades=31)
    assert labels.min() == 0 and labels.max() == 30


def test_query_chunking_respects_the_row_limit():
    rng = np.random.default_rng(0)
    rows = np.arange(25001)
    queries = rank_data.split_queries(rows, 10000, rng)
    assert len(queries) == 3 and max(len(q) for q in queries) <= 10000
    assert np.array_equal(np.sort(np.concatenate(queries)), rows)
    with pytest.raises(ValueError, match="max_query_rows"):
        rank_data.split_queries(rows, 10001, rng)


def test_rank_data_queries_never_exceed_max_query_rows(cfg):
    spec = FeatureSpec.from_cfg(cfg.lgbm)
    data = rank_data.build_rank_data(iter_split(cfg.paths.pruned_dir, SLUG, "train"), "layout", spec,
                                      configs_per_graph=50, label_grades=31, max_query_rows=25,
                                      rng=np.random.default_rng(0))
    assert max(data.group) <= 25 and sum(data.group) == len(data.label) == 6 * 50
    assert data.features.shape == (300, len(data.names))


def test_graph_bars_show_totals(cfg, capsys):
    spec = FeatureSpec.from_cfg(cfg.lgbm)
    graphs = list(iter_split(cfg.paths.pruned_dir, SLUG, "train"))
    rank_data.build_rank_data(iter(graphs), "layout", spec, 10, 31, 25, np.random.default_rng(0), desc="bar",
                               total=6)
    assert "0/6" in capsys.readouterr().err                          # n/N on a lazy iterator, not `0graph`


def train_and_predict(cfg, seed=None, grades=31):
    seed = cfg.seed if seed is None else seed
    spec = FeatureSpec.from_cfg(cfg.lgbm)
    rng = np.random.default_rng(seed)
    data = {split: rank_data.build_rank_data(iter_split(cfg.paths.pruned_dir, SLUG, split), "layout", spec, 0,
                                              grades, int(cfg.lgbm.max_query_rows), rng)
            for split in ("train", "valid")}
    booster, history = train.train_ranker(data["train"], data["valid"], cfg.lgbm, "layout", seed)
    convergence = train.convergence(booster.best_iteration, history, int(cfg.lgbm.early_stopping_rounds))
    preds = {split: infer.predict_split(booster, iter_split(cfg.paths.pruned_dir, SLUG, split), "layout",
                                             spec, 1) for split in ("valid", "test")}
    return preds, history, convergence


def test_predictions_cover_every_config_once_and_are_deterministic(cfg):
    first, history, _ = train_and_predict(cfg)
    assert set(first["test"]) == {"test0", "test1"}
    assert all(len(first["test"][g]) == 60 for g in first["test"])
    assert all(len(first["valid"][g]) == 70 for g in first["valid"])     # expanded through config_inverse
    assert history["score"][-1] > 0.5                                     # learnt the runtime rule
    second, _, _ = train_and_predict(cfg)
    for split in first:
        for g in first[split]:
            assert np.array_equal(first[split][g], second[split][g])


def test_run_writes_the_stage_outputs(cfg, tmp_path, monkeypatch):
    from pipeline.scoring import evaluate
    from pipeline.tpugraphs.dataset import Collection

    out = compose(["data=programs_ci", f"paths.pruned_dir={cfg.paths.pruned_dir}", "lgbm.num_threads=1",
                   "lgbm.num_boost_round=10", *[f"paths.{k}={tmp_path / k}" for k in
                                                ("models_dir", "plots_dir", "predictions_dir", "metrics_dir")]])
    monkeypatch.setattr(evaluate, "evaluate_and_write",
                        lambda cfg, stage, collection, preds, extra=None: {**extra, "per_graph": []})
    result = lgbm_stage.run(out, Collection.parse(SLUG))
    assert result["train_rows"] == 6 * 60
    assert 1 <= result["best_iteration"] <= result["last_iteration"] <= 10 and result["stopped"] in ("plateau", "budget")
    assert (tmp_path / "models_dir" / "lgbm" / SLUG / "model.txt").stat().st_size > 0
    assert (tmp_path / "plots_dir" / "lgbm" / SLUG / "importance.png").stat().st_size > 0
    assert "disagree_edges" in (tmp_path / "plots_dir" / "lgbm" / SLUG / "importance.csv").read_text()
    test = load_predictions(tmp_path / "predictions_dir" / "lgbm" / SLUG / "test.npz")
    assert sorted(test) == ["test0", "test1"] and len(test["test0"]) == 60


def test_split_size_counts_the_split_rows_of_the_index(cfg, pruned_dir):
    from pipeline.lgbm import split_size

    graphs = {split: sum(1 for _ in iter_split(pruned_dir, SLUG, split)) for split in ("train", "valid")}
    assert {split: split_size(pruned_dir, SLUG, split) for split in graphs} == graphs and graphs["train"] > 0


def test_stop_reason_separates_plateau_from_budget():
    assert train.stop_reason(best_iteration=10, last_iteration=40, patience=30) == "plateau"
    assert train.stop_reason(best_iteration=11, last_iteration=40, patience=30) == "budget"
    assert train.stop_reason(best_iteration=300, last_iteration=300, patience=30) == "budget"


def test_convergence_is_recorded_and_a_budget_stop_warns(cfg, capsys):
    from omegaconf import OmegaConf

    _, history, convergence = train_and_predict(cfg)
    last = convergence["last_iteration"]
    assert len(history["score"]) == last <= 30
    assert convergence["best_iteration"] == 1 + int(np.argmax(history["score"]))      # first best round, 1-based
    assert convergence["stopped"] == train.stop_reason(convergence["best_iteration"], last, 30)
    assert train.convergence(3, {"score": [0.1] * 9}, 5) == {"best_iteration": 3, "last_iteration": 9,
                                                                  "stopped": "plateau"}
    short = OmegaConf.merge(cfg, {"lgbm": {"num_boost_round": 2, "early_stopping_rounds": 5}})
    _, _, stopped = train_and_predict(short)
    assert stopped == {"best_iteration": stopped["best_iteration"], "last_iteration": 2, "stopped": "budget"}
    assert train.warn_budget("lgbm x", stopped, 2)
    assert "lgbm.num_boost_round=2" in capsys.readouterr().err
    assert not train.warn_budget("lgbm x", {**stopped, "stopped": "plateau"}, 2)


def test_global_seed_reaches_lightgbm_randomness(cfg):
    """feature_fraction < 1 draws columns from LightGBM's seed: two seeds give two models, one seed one model."""
    assert train.lgb_params(cfg.lgbm, "layout", 7)["seed"] == 7 and cfg.lgbm.feature_fraction < 1
    a, _, _ = train_and_predict(cfg, seed=1)
    b, _, _ = train_and_predict(cfg, seed=2)
    assert any(not np.array_equal(a["test"][g], b["test"][g]) for g in a["test"])


def test_label_grades_beyond_31_need_explicit_gains_and_xendcg_stops_at_31(cfg):
    from omegaconf import OmegaConf

    many = OmegaConf.merge(cfg, {"lgbm": {"layout": {"label_grades": 60}}})
    params = train.lgb_params(many.lgbm, "layout", 0)
    assert params["label_gain"] == [float(g) for g in range(60)]
    _, history, _ = train_and_predict(many, grades=60)       # LightGBM's default gains would refuse label 31
    assert len(history["score"]) > 0
    assert train.label_gains("layout", "exponential", 4) == [0.0, 1.0, 3.0, 7.0]
    xendcg = OmegaConf.merge(many, {"lgbm": {"layout": {"objective": "rank_xendcg"}}})
    with pytest.raises(ValueError, match=r"label_grades: expected 2\.\.31 for objective rank_xendcg, found 60"):
        train.lgb_params(xendcg.lgbm, "layout", 0)
    with pytest.raises(ValueError, match="label_gain"):
        train.label_gains("layout", "cubic", 4)


def test_round_progress_counts_rounds_against_the_budget():
    from types import SimpleNamespace

    progress = train.round_progress(5, "boost x")
    progress(SimpleNamespace(iteration=2, evaluation_result_list=[("valid", "score", 0.51234, True)]))
    assert (progress.bar.n, progress.bar.total) == (3, 5)
    assert progress.bar.postfix == "score=0.5123"
    progress.close()


def test_schema_grade_limit_is_the_modules():
    from pipeline.settings_schema import LIGHTGBM_MAX_GRADES

    assert LIGHTGBM_MAX_GRADES == train.max_label_grades("lambdarank") == 10000
    assert train.max_label_grades("rank_xendcg") == 31


def test_pairwise_objective_gradients_by_hand_and_by_finite_differences():
    data = rank_data.RankData(features=np.zeros((5, 1), np.float32), label=np.zeros(5, np.int32), group=[3, 2],
                               graph_offsets=np.array([0, 3, 5]), runtime=np.array([1.0, 2.0, 2.0, 5.0, 5.0]),
                               names=["x"])
    grad, hess = train.pairwise_objective(data)(np.zeros(5), None)
    # query 1: pairs (0,1), (0,2) at sigma(0) = 0.5 each, (1,2) tied; per row / (3 - 1). query 2: tied, no pair.
    np.testing.assert_allclose(grad, [-0.5, 0.25, 0.25, 0.0, 0.0])
    np.testing.assert_allclose(hess, [0.25, 0.125, 0.125, 0.0, 0.0])

    rng = np.random.default_rng(0)
    runtime, score = rng.random(6), rng.normal(size=6)
    one = rank_data.RankData(np.zeros((6, 1), np.float32), np.zeros(6, np.int32), [6], np.array([0, 6]), runtime,
                              ["x"])

    def loss(s):   # sum over ordered pairs of log(1 + exp(-(s_fast - s_slow))), per row / (rows - 1)
        return sum(np.log1p(np.exp(-(s[i] - s[j]))) for i in range(6) for j in range(6)
                   if runtime[i] < runtime[j]) / 5
    grad, _ = train.pairwise_objective(one)(score, None)
    numeric = [(loss(score + 1e-6 * e) - loss(score - 1e-6 * e)) / 2e-6 for e in np.eye(6)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("objective", ["lambdarank", "rank_xendcg"])
def test_listwise_objectives_learn_the_runtime_rule(cfg, objective):
    from omegaconf import OmegaConf

    assert cfg.lgbm.layout.objective == "pairwise"                      # the default, trained by the tests above
    _, history, _ = train_and_predict(OmegaConf.merge(cfg, {"lgbm": {"layout": {"objective": objective}}}))
    assert max(history["score"]) > 0.5


def test_schema_objectives_are_the_modules():
    from pipeline.settings_schema import LGBM_OBJECTIVES

    assert LGBM_OBJECTIVES == train.OBJECTIVES


def test_importance_plot_leaves_out_zero_gain_features(tmp_path, monkeypatch):
    import pandas as pd
    from matplotlib.figure import Figure

    table = pd.DataFrame({"feature": ["f_a", "f_b", "f_c", "f_d"], "gain": [5.0, 2.0, 0.0, 0.0],
                          "split": [3, 1, 0, 0]})
    shown, unused = importance.plotted_importance(table, top=3)
    assert shown["feature"].tolist() == ["f_a", "f_b"] and unused == 2
    assert importance.plotted_importance(table, top=1)[0]["feature"].tolist() == ["f_a"]
    drawn = {}
    save = Figure.savefig

    def record(fig, *args, **kwargs):
        ax = fig.axes[0]
        drawn.update(bars=[t.get_text() for t in ax.get_yticklabels()], title=ax.get_title())
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", record)
    importance.write_importance(table, tmp_path / "importance.csv", tmp_path / "importance.png", 30, "top features")
    assert drawn["bars"] == ["f_b", "f_a"]                       # most important at the top of the chart
    assert drawn["title"] == "top features\n(2 of 4 features with zero gain not shown)"
    assert len(pd.read_csv(tmp_path / "importance.csv")) == 4   # the CSV keeps every feature
    assert (tmp_path / "importance.png").stat().st_size > 0


def test_load_booster_names_the_missing_model(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"lgbm/tile-xla/model.txt: missing; run stage lgbm"):
        infer.load_booster(tmp_path / "lgbm" / "tile-xla")
