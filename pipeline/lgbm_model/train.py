"""Training the LightGBM ranker: parameters per collection kind, objectives, early stopping and convergence.

The objective is set per collection kind (`lgbm.<kind>.objective`): `lambdarank` (pairs weighted by NDCG position
discounts, top-heavy like the tile score), `rank_xendcg`, or `pairwise` (a logistic loss on every pair with
different runtimes, all pairs weighing the same as in Kendall tau; it reads runtimes, not grades). LightGBM's
default label_gain has 31 entries and refuses a label past it; the explicit gains passed here allow any number of
lambdarank grades, while rank_xendcg ignores label_gain and computes 2^label in a 32-bit int (31 grades at most).
Early stopping watches one metric on valid (`first_metric_only`): by default the collection's own score through a
custom eval; `eval_metric=order` the mean per-graph Kendall tau for every kind (for layout the same as `score`; for
tile it does not saturate where the top-5 tile score is 1.0 from the first round on); `eval_metric=ndcg` uses
LightGBM's ndcg@k instead.
"""
from __future__ import annotations

import sys

import numpy as np
from tqdm import tqdm

from pipeline.choices import LGBM_LABEL_GAINS, LGBM_OBJECTIVES, LIGHTGBM_XENDCG_GRADES
from pipeline.errors import PipelineError
from pipeline.lgbm_model.rank_data import LIGHTGBM_MAX_QUERY_ROWS, RankData
from pipeline.lgbm_model.settings import LgbmSettings

LABEL_GAINS = LGBM_LABEL_GAINS
OBJECTIVES = LGBM_OBJECTIVES   # pairwise: `pairwise_objective`, Kendall tau's pairs
NO_FEATURE_CHECK = "num_features()) > (0)"   # LightGBM's failed check when its pre-filter left no feature


def max_label_grades(objective: str) -> int:
    """The most relevance grades LightGBM accepts for an objective given explicit label gains (see docstring)."""
    return LIGHTGBM_XENDCG_GRADES if objective == "rank_xendcg" else LIGHTGBM_MAX_QUERY_ROWS


def label_gains(gain: str, grades: int) -> list[float]:
    """LightGBM label_gain for grades 0..grades-1: `linear` (g) or `exponential` (2^g - 1)."""
    gains = {"linear": lambda g: float(g), "exponential": lambda g: float(2.0 ** g - 1)}[gain]   # LABEL_GAINS
    return [gains(g) for g in range(grades)]


def lgb_params(settings: LgbmSettings, seed: int) -> dict:
    """LightGBM parameters of one collection kind; deterministic for a fixed seed and num_threads.

    `seed` seeds every LightGBM generator (feature_fraction, bagging), so runs with different global seeds differ
    whenever feature_fraction or bagging_fraction is below 1. The schema checked the objective's grades
    (`max_label_grades`).
    """
    s = settings
    return {
        "objective": s.objective, "num_leaves": s.num_leaves, "learning_rate": s.learning_rate,
        "min_data_in_leaf": s.min_data_in_leaf, "feature_fraction": s.feature_fraction,
        "bagging_fraction": s.bagging_fraction, "bagging_freq": s.bagging_freq,
        "lambda_l2": s.lambda_l2, "max_bin": s.max_bin, "num_threads": s.num_threads,
        "label_gain": label_gains(s.label_gain, s.label_grades),
        "lambdarank_truncation_level": s.lambdarank_truncation_level,
        "metric": "ndcg" if s.eval_metric == "ndcg" else "None", "eval_at": list(s.eval_at),
        "seed": int(seed), "deterministic": True, "force_row_wise": True, "verbosity": -1,
    }


def pairwise_objective(data: RankData, threads: int = 1):
    """A LightGBM objective: logistic loss on every pair of a query with different runtimes, all pairs weighing
    the same (as in Kendall tau), each row's gradient averaged over its query's other rows.

    Relevance s should order faster first: pair (i faster than j) costs log(1 + exp(-(s_i - s_j))). The queries
    are independent: `threads` > 1 computes them in that many threads (numpy's loops release the GIL), each query's
    arithmetic unchanged, so the gradients are bit for bit those of one thread.
    """
    from concurrent.futures import ThreadPoolExecutor

    from scipy.special import expit

    bounds = np.cumsum([0, *data.group])
    queries = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b - a >= 2]

    def query(a: int, b: int, preds: np.ndarray, grad: np.ndarray, hess: np.ndarray) -> None:
        # pairs in float32 (2.3x faster), sums in float64: the gradients agree with float64 throughout to
        # ~1e-8 relative, below the float32 LightGBM rounds them to
        runtime, score = data.runtime[a:b], preds[a:b].astype(np.float32)
        faster = runtime[:, None] < runtime[None, :]                      # [rows, rows] i faster than j
        push = expit(score[None, :] - score[:, None])                     # [rows, rows] sigma(-(s_i - s_j))
        push *= faster                                                    # on ordered pairs only
        curve = push * (1.0 - push)
        grad[a:b] = (push.sum(0, dtype=np.float64) - push.sum(1, dtype=np.float64)) / (b - a - 1)
        hess[a:b] = (curve.sum(0, dtype=np.float64) + curve.sum(1, dtype=np.float64)) / (b - a - 1)

    def objective(preds: np.ndarray, _dataset) -> tuple[np.ndarray, np.ndarray]:
        grad, hess = np.zeros_like(preds), np.zeros_like(preds)
        if threads <= 1 or len(queries) < 2:
            for a, b in queries:
                query(a, b, preds, grad, hess)
        else:                                    # each thread writes its own queries' rows of grad and hess
            with ThreadPoolExecutor(min(threads, len(queries))) as pool:
                list(pool.map(lambda q: query(*q, preds, grad, hess), queries))
        return grad, hess
    return objective


def score_eval(kind: str, data: RankData, metric: str = "score"):
    """A LightGBM feval of minus the predictions (higher is better), averaged over graphs: `score` the collection's
    own per-graph score, `order` the Kendall tau of every graph (the layout score, for any kind)."""
    from pipeline.scoring.metrics import graph_score

    bounds = [(a, b) for a, b in zip(data.graph_offsets[:-1], data.graph_offsets[1:]) if b > a]
    scored_as = kind if metric == "score" else "layout"

    def feval(preds: np.ndarray, _dataset) -> tuple[str, float, bool]:
        values = [graph_score(scored_as, -preds[a:b], data.runtime[a:b]) for a, b in bounds]
        return metric, float(np.mean(values)), True
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


def train_ranker(train: RankData, valid: RankData, settings: LgbmSettings, seed: int, desc: str = ""):
    """Fit with early stopping on valid's first metric, drawing a `round n/N` bar.

    Returns (booster, {metric name: [value per round]}); the booster keeps the best round's trees only.
    """
    import lightgbm as lgb

    params = lgb_params(settings, seed)
    if params["objective"] == "pairwise":
        params["objective"] = pairwise_objective(train, settings.num_threads)
    dtrain = lgb.Dataset(train.features, train.label, group=train.group, feature_name=train.names)
    dvalid = lgb.Dataset(valid.features, valid.label, group=valid.group, reference=dtrain)
    history: dict = {}
    progress = round_progress(settings.num_boost_round, desc or "boost")
    try:
        booster = lgb.train(params, dtrain, num_boost_round=settings.num_boost_round, valid_sets=[dvalid],
                            valid_names=["valid"],
                            feval=(None if settings.eval_metric == "ndcg"
                                   else score_eval(settings.kind, valid, settings.eval_metric)),
                            callbacks=[lgb.early_stopping(settings.early_stopping_rounds, first_metric_only=True,
                                                          verbose=False), lgb.record_evaluation(history), progress])
    except lgb.basic.LightGBMError as error:
        if NO_FEATURE_CHECK not in str(error):
            raise
        raise PipelineError(f"{desc or 'lgbm'}: no feature can split the {len(train.label)} train rows of "
                            f"{len(train.graph_offsets) - 1} graph(s): each is constant or has fewer rows per value "
                            f"than lgbm.min_data_in_leaf={settings.min_data_in_leaf}; expected more (or more varied) "
                            f"train configurations, or a lower lgbm.min_data_in_leaf") from None
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
