"""Training the LightGBM ranker: parameters per collection kind, objectives, early stopping and convergence.

The objective is set per collection kind (`lgbm.<kind>.objective`): `lambdarank` (pairs weighted by NDCG position
discounts, top-heavy like the tile score), `rank_xendcg`, or `pairwise` (a logistic loss on every pair with
different runtimes, all pairs weighing the same as in Kendall tau; it reads runtimes, not grades). LightGBM's
default label_gain has 31 entries and refuses a label past it; the explicit gains passed here allow any number of
lambdarank grades, while rank_xendcg ignores label_gain and computes 2^label in a 32-bit int (31 grades at most).
Early stopping watches one metric on valid (`first_metric_only`): by default the collection's own score through a
custom eval; `eval_metric=ndcg` uses LightGBM's ndcg@k instead.
"""
from __future__ import annotations

import sys

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.choices import LGBM_LABEL_GAINS, LGBM_OBJECTIVES
from pipeline.lgbm_model.rank_data import LIGHTGBM_MAX_QUERY_ROWS, RankData

LIGHTGBM_XENDCG_GRADES = 31         # rank_xendcg's gain 2^label is an int: labels 0..30
LABEL_GAINS = LGBM_LABEL_GAINS
OBJECTIVES = LGBM_OBJECTIVES   # pairwise: `pairwise_objective`, Kendall tau's pairs


def max_label_grades(objective: str) -> int:
    """The most relevance grades LightGBM accepts for an objective given explicit label gains (see docstring)."""
    return LIGHTGBM_XENDCG_GRADES if objective == "rank_xendcg" else LIGHTGBM_MAX_QUERY_ROWS


def label_gains(kind_name: str, gain: str, grades: int) -> list[float]:
    """LightGBM label_gain for grades 0..grades-1: `linear` (g) or `exponential` (2^g - 1)."""
    if gain == "linear":
        return [float(g) for g in range(grades)]
    if gain == "exponential":
        return [float(2.0 ** g - 1) for g in range(grades)]
    raise ValueError(f"lgbm.{kind_name}.label_gain: expected one of {list(LABEL_GAINS)}, found {gain!r}")


def lgb_params(lgbm: DictConfig, kind: str, seed: int) -> dict:
    """LightGBM parameters of one collection kind; deterministic for a fixed seed and num_threads.

    `seed` seeds every LightGBM generator (feature_fraction, bagging), so runs with different global seeds differ
    whenever feature_fraction or bagging_fraction is below 1.
    """
    settings = lgbm[kind]
    objective = str(settings.objective)
    if objective not in OBJECTIVES:
        raise ValueError(f"lgbm.{kind}.objective: expected one of {list(OBJECTIVES)}, found {objective!r}")
    grades, most = int(settings.label_grades), max_label_grades(objective)
    if not 2 <= grades <= most:
        raise ValueError(f"lgbm.{kind}.label_grades: expected 2..{most} for objective {objective}, found {grades}")
    gains = label_gains(kind, settings.label_gain, grades)
    if lgbm.eval_metric not in ("score", "ndcg"):
        raise ValueError(f"lgbm.eval_metric: expected score or ndcg, found {lgbm.eval_metric!r}")
    return {
        "objective": objective, "num_leaves": int(lgbm.num_leaves), "learning_rate": float(lgbm.learning_rate),
        "min_data_in_leaf": int(lgbm.min_data_in_leaf), "feature_fraction": float(lgbm.feature_fraction),
        "bagging_fraction": float(lgbm.bagging_fraction), "bagging_freq": int(lgbm.bagging_freq),
        "lambda_l2": float(lgbm.lambda_l2), "max_bin": int(lgbm.max_bin), "num_threads": int(lgbm.num_threads),
        "label_gain": gains,
        "lambdarank_truncation_level": int(settings.lambdarank_truncation_level),
        "metric": "ndcg" if lgbm.eval_metric == "ndcg" else "None", "eval_at": list(lgbm.eval_at),
        "seed": int(seed), "deterministic": True, "force_row_wise": True, "verbosity": -1,
    }


def pairwise_objective(data: RankData):
    """A LightGBM objective: logistic loss on every pair of a query with different runtimes, all pairs weighing
    the same (as in Kendall tau), each row's gradient averaged over its query's other rows.

    Relevance s should order faster first: pair (i faster than j) costs log(1 + exp(-(s_i - s_j))).
    """
    from scipy.special import expit

    bounds = np.cumsum([0, *data.group])

    def objective(preds: np.ndarray, _dataset) -> tuple[np.ndarray, np.ndarray]:
        grad, hess = np.zeros_like(preds), np.zeros_like(preds)
        for a, b in zip(bounds[:-1], bounds[1:]):
            if b - a < 2:
                continue
            runtime, score = data.runtime[a:b], preds[a:b]
            faster = runtime[:, None] < runtime[None, :]                  # [rows, rows] i faster than j
            push = expit(score[None, :] - score[:, None]) * faster        # sigma(-(s_i - s_j)) on ordered pairs
            curve = push * (1.0 - push)
            grad[a:b] = (push.sum(0) - push.sum(1)) / (b - a - 1)
            hess[a:b] = (curve.sum(0) + curve.sum(1)) / (b - a - 1)
        return grad, hess
    return objective


def score_eval(kind: str, data: RankData):
    """A LightGBM feval: the collection's mean per-graph score (higher is better) of minus the predictions."""
    from pipeline.scoring.metrics import graph_score

    bounds = [(a, b) for a, b in zip(data.graph_offsets[:-1], data.graph_offsets[1:]) if b > a]

    def feval(preds: np.ndarray, _dataset) -> tuple[str, float, bool]:
        return "score", float(np.mean([graph_score(kind, -preds[a:b], data.runtime[a:b]) for a, b in bounds])), True
    return feval


def stop_reason(best_iteration: int, last_iteration: int, patience: int) -> str:
    """`plateau` when the last `patience` rounds did not improve on the best one, else `budget`."""
    return "plateau" if last_iteration - best_iteration >= patience else "budget"


def round_progress(total: int, desc: str):
    """A LightGBM callback drawing a `round n/N` bar with the latest valid metrics; `.close()` it after training."""
    bar = tqdm(total=total, desc=desc, unit="round", leave=False)

    def callback(env) -> None:
        bar.update(env.iteration + 1 - bar.n)
        bar.set_postfix({name: f"{value:.4f}" for _, name, value, _ in env.evaluation_result_list}, refresh=False)
    callback.bar, callback.close = bar, bar.close
    return callback


def train_ranker(train: RankData, valid: RankData, lgbm: DictConfig, kind: str, seed: int, desc: str = ""):
    """Fit with early stopping on valid's first metric, drawing a `round n/N` bar.

    Returns (booster, {metric name: [value per round]}); the booster keeps the best round's trees only.
    """
    import lightgbm as lgb

    params = lgb_params(lgbm, kind, seed)
    if params["objective"] == "pairwise":
        params["objective"] = pairwise_objective(train)
    dtrain = lgb.Dataset(train.features, train.label, group=train.group, feature_name=train.names)
    dvalid = lgb.Dataset(valid.features, valid.label, group=valid.group, reference=dtrain)
    history: dict = {}
    progress = round_progress(int(lgbm.num_boost_round), desc or "boost")
    try:
        booster = lgb.train(params, dtrain, num_boost_round=int(lgbm.num_boost_round), valid_sets=[dvalid],
                            valid_names=["valid"],
                            feval=score_eval(kind, valid) if lgbm.eval_metric == "score" else None,
                            callbacks=[lgb.early_stopping(int(lgbm.early_stopping_rounds), first_metric_only=True,
                                                          verbose=False), lgb.record_evaluation(history), progress])
    finally:
        progress.close()
    return booster, history.get("valid", {})


def convergence(best_iteration: int, history: dict, patience: int) -> dict:
    """{best_iteration, last_iteration, stopped} of a run: its rounds are those `history` recorded."""
    last = len(next(iter(history.values()))) if history else 0
    return {"best_iteration": int(best_iteration), "last_iteration": last,
            "stopped": stop_reason(int(best_iteration), last, patience)}


def warn_budget(where: str, convergence: dict, budget: int) -> bool:
    """Say on stderr when training stopped at the round budget, not at a plateau; returns whether it warned."""
    if convergence["stopped"] != "budget":
        return False
    print(f"warning: {where}: LightGBM stopped at the budget lgbm.num_boost_round={budget} (best round "
          f"{convergence['best_iteration']}); it may not have converged, raise num_boost_round or learning_rate",
          file=sys.stderr)
    return True
