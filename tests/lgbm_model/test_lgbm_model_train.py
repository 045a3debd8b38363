"""pipeline.lgbm_model.train (and its predictions through infer): determinism, convergence and the budget warning,
the global seed, label grades and gains, objectives (the pairwise one by hand)."""
from __future__ import annotations

import numpy as np
import pytest
from lgbm_graphs import COLLECTION, SLUG, lgbm_cfg, write_pruned_collection
from omegaconf import OmegaConf

from pipeline.lgbm_model import infer, rank_data, train
from pipeline.pruned import iter_split
from pipeline.settings.lgbm import lgbm_settings


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return lgbm_cfg(write_pruned_collection(tmp_path_factory.mktemp("pruned")))


def first_metric(history: dict) -> list[float]:
    """Valid values per round of the early-stopping metric (lgbm.eval_metric: score or order, named so)."""
    return next(iter(history.values()))


def train_and_predict(cfg, seed=None, grades=31):
    seed = cfg.seed if seed is None else seed
    settings = lgbm_settings(cfg, COLLECTION)
    spec = settings.features
    rng = np.random.default_rng(seed)
    data = {split: rank_data.build_rank_data(iter_split(cfg.paths.pruned_dir, SLUG, split), "layout", spec, 0,
                                              grades, settings.max_query_rows, rng)
            for split in ("train", "valid")}
    booster, history = train.train_ranker(data["train"], data["valid"], settings, seed)
    convergence = train.convergence(booster.best_iteration, history, settings.early_stopping_rounds)
    preds = {split: infer.predict_split(booster, iter_split(cfg.paths.pruned_dir, SLUG, split), "layout",
                                             spec, 1) for split in ("valid", "test")}
    return preds, history, convergence


def test_predictions_cover_every_config_once_and_are_deterministic(cfg):
    first, history, _ = train_and_predict(cfg)
    assert set(first["test"]) == {"test0", "test1"}
    assert all(len(first["test"][g]) == 60 for g in first["test"])
    assert all(len(first["valid"][g]) == 70 for g in first["valid"])     # expanded through config_inverse
    assert first_metric(history)[-1] > 0.5                                     # learnt the runtime rule
    second, _, _ = train_and_predict(cfg)
    for split in first:
        for g in first[split]:
            assert np.array_equal(first[split][g], second[split][g])


def test_stop_reason_separates_plateau_from_budget():
    assert train.stop_reason(best_iteration=10, last_iteration=40, patience=30) == "plateau"
    assert train.stop_reason(best_iteration=11, last_iteration=40, patience=30) == "budget"
    assert train.stop_reason(best_iteration=300, last_iteration=300, patience=30) == "budget"


def test_convergence_is_recorded_and_a_budget_stop_warns(cfg, capsys):
    _, history, convergence = train_and_predict(cfg)
    last = convergence["last_iteration"]
    assert len(first_metric(history)) == last <= 30
    assert convergence["best_iteration"] == 1 + int(np.argmax(first_metric(history)))      # first best round, 1-based
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
    assert train.lgb_params(lgbm_settings(cfg, COLLECTION), 7)["seed"] == 7 and cfg.lgbm.feature_fraction < 1
    a, _, _ = train_and_predict(cfg, seed=1)
    b, _, _ = train_and_predict(cfg, seed=2)
    assert any(not np.array_equal(a["test"][g], b["test"][g]) for g in a["test"])


def test_label_grades_beyond_31_need_explicit_gains(cfg):
    many = OmegaConf.merge(cfg, {"lgbm": {"layout": {"label_grades": 60}}})
    params = train.lgb_params(lgbm_settings(many, COLLECTION), 0)
    assert params["label_gain"] == [float(g) for g in range(60)]
    _, history, _ = train_and_predict(many, grades=60)       # LightGBM's default gains would refuse label 31
    assert len(first_metric(history)) > 0
    assert train.label_gains("exponential", 4) == [0.0, 1.0, 3.0, 7.0]   # rank_xendcg's 31: the schema's rule


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


def test_score_eval_order_does_not_saturate_where_the_tile_score_does():
    # one tile graph of 7 configs, runtime i + 1; predictions are relevance (higher = predicted faster)
    data = rank_data.RankData(features=np.zeros((7, 1), np.float32), label=np.zeros(7, np.int32), group=[7],
                               graph_offsets=np.array([0, 7]), runtime=np.arange(1.0, 8.0), names=["x"])
    right = -np.arange(1.0, 8.0)                     # the whole order right
    best_only = np.array([7.0, 1, 2, 3, 4, 5, 6])    # the best first, the rest reversed: tau (6 - 15) / 21
    score, order = train.score_eval("tile", data, "score"), train.score_eval("tile", data, "order")
    assert score(right, None) == ("score", 1.0, True) and score(best_only, None) == ("score", 1.0, True)
    assert order(right, None) == ("order", pytest.approx(1.0), True)
    assert order(best_only, None) == ("order", pytest.approx(-3 / 7), True)


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


def test_pairwise_objective_in_threads_is_bit_for_bit_one_thread():
    rng = np.random.default_rng(1)
    group = [40, 1, 57, 2, 33, 64]                    # queries of 1 row (no pair) and 2 rows among larger ones
    rows = sum(group)
    runtime = rng.integers(0, 20, rows).astype(np.float64)   # ties inside queries
    data = rank_data.RankData(np.zeros((rows, 1), np.float32), np.zeros(rows, np.int32), group,
                               np.cumsum([0, *group]), runtime, ["x"])
    score = rng.normal(size=rows)
    grad_1, hess_1 = train.pairwise_objective(data, threads=1)(score, None)
    grad_3, hess_3 = train.pairwise_objective(data, threads=3)(score, None)
    assert np.count_nonzero(grad_1) > rows - 10 and np.all(hess_1 >= 0)
    assert np.array_equal(grad_1, grad_3) and np.array_equal(hess_1, hess_3)
    alone = [train.pairwise_objective(rank_data.RankData(np.zeros((b - a, 1), np.float32), np.zeros(b - a, np.int32),
                                                         [b - a], np.array([0, b - a]), runtime[a:b], ["x"]))(
        score[a:b], None)[0] for a, b in zip(np.cumsum([0, *group])[:-1], np.cumsum(group))]
    assert np.array_equal(grad_3, np.concatenate(alone))   # each query's rows hold its own gradients


@pytest.mark.parametrize("objective", ["lambdarank", "rank_xendcg"])
def test_listwise_objectives_learn_the_runtime_rule(cfg, objective):
    assert cfg.lgbm.layout.objective == "pairwise"                      # the default, trained by the tests above
    _, history, _ = train_and_predict(OmegaConf.merge(cfg, {"lgbm": {"layout": {"objective": objective}}}))
    assert max(first_metric(history)) > 0.5


def test_schema_objectives_are_the_modules():
    from pipeline.settings_schema import LGBM_OBJECTIVES

    assert LGBM_OBJECTIVES == train.OBJECTIVES


def test_no_feature_to_split_is_one_line_naming_min_data_in_leaf(cfg):
    from pipeline.errors import PipelineError

    settings = lgbm_settings(cfg, COLLECTION)
    rng = np.random.default_rng(0)
    data = {split: rank_data.build_rank_data(iter_split(cfg.paths.pruned_dir, SLUG, split), "layout",
                                              settings.features, 0, 31, settings.max_query_rows, rng)
            for split in ("train", "valid")}
    rows = len(data["train"].label)
    too_few = OmegaConf.to_container(OmegaConf.merge(cfg, {"lgbm": {"min_data_in_leaf": rows}}))
    settings = lgbm_settings(OmegaConf.create(too_few), COLLECTION)      # a leaf needs every row: nothing splits
    with pytest.raises(PipelineError, match=rf"^boost: no feature can split the {rows} train rows of \d+ graph\(s\)"
                                            rf".*lgbm.min_data_in_leaf={rows}; expected more"):
        train.train_ranker(data["train"], data["valid"], settings, 0, desc="boost")
