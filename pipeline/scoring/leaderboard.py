"""The leaderboard: the Kaggle score of every model per split beside the dataset's ceiling, for the workspace
(`python -m pipeline.summary --show`, from `<metrics_dir>/summary.json`) and for every DVC experiment
(`python -m pipeline.summary --show --experiments`, from `dvc exp show --json`), best first.

summary.json is flat: `{"<model>": {"<split>": kaggle}, "ceiling": {"<split>": kaggle}}`, so that
`dvc metrics show` prints one short row (`ensemble.valid`, `ensemble.test`, ...); the per-collection scores stay
in each model's metrics file.
"""
from __future__ import annotations

from typing import Iterator, Mapping, Sequence

from pipeline.scoring import metrics

CEILING = "ceiling"           # summary.json's entry for the dataset's ceiling (ranking by the noise-free cost model)
DIGITS = 4                    # the leaderboard's rounding


def split_ceiling(per_collection: Mapping[str, Mapping], split: str) -> float | None:
    """The Kaggle score of the dataset's ceiling on `split` (the mean of the collections' ceilings, as every
    model's score is), from one model's metrics files ({slug: metrics dict}); None unless every collection has it."""
    ceilings = {slug: m.get(CEILING, {}).get(split) for slug, m in per_collection.items()}
    if not ceilings or any(c is None for c in ceilings.values()):
        return None
    return metrics.kaggle_score(ceilings)


def flat_summary(detail: Mapping[str, Mapping[str, Mapping]], ceiling: Mapping[str, float | None]) -> dict:
    """summary.json from the per-model detail ({model: {split: {"kaggle": ..., <slug>: ...}}}) and the ceiling
    per split: {model: {split: kaggle}, "ceiling": {split: kaggle}} (splits without a ceiling left out)."""
    flat = {model: {split: float(s["kaggle"]) for split, s in splits.items()} for model, splits in detail.items()}
    known = {split: float(c) for split, c in ceiling.items() if c is not None}
    return {**flat, **({CEILING: known} if known else {})}


def cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.{DIGITS}f}"


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table, columns padded to their widest cell (the first left-aligned, the rest right)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [[str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
             for r in [header, *rows]]
    return "\n".join("  ".join(line).rstrip() for line in lines)


def workspace_table(summary: Mapping[str, Mapping[str, float]], splits: Sequence[str], rank_split: str) -> str:
    """Models x splits, best on `rank_split` first, the ceiling's row on top."""
    def rank(model: str) -> float:
        score = score_of(summary, model, rank_split)
        return float("inf") if score is None else -score

    models = sorted((m for m in summary if m != CEILING), key=rank)
    rows = [[m, *(cell(score_of(summary, m, s)) for s in splits)]
            for m in ([CEILING] if CEILING in summary else []) + models]
    return format_table(["model", *splits], rows)


def experiment_states(states: Sequence[Mapping]) -> Iterator[tuple[str, Mapping]]:
    """(name, data) of every row `dvc exp show --json` lists: the workspace, the baseline commits and their
    experiments (an experiment's name, else its short revision)."""
    for state in states:
        if state.get("data"):
            rev = str(state.get("rev", "?"))
            yield state.get("name") or (rev if rev == "workspace" else rev[:7]), state["data"]
        for group in state.get("experiments") or []:
            yield from experiment_states(group.get("revs") or [])


def experiment_rows(states: Sequence[Mapping], summary_path: str, models: Sequence[str],
                    rank: tuple[str, str]) -> list[list]:
    """[name, model's `rank[1]` score for each of `models` ...] per experiment with a summary.json, sorted by
    model `rank[0]` on split `rank[1]`, best first (experiments without a score last)."""
    rows = []
    for name, data in experiment_states(states):
        summary = ((data.get("metrics") or {}).get(summary_path) or {}).get("data") or {}
        if not summary:
            continue
        scores = {m: score_of(summary, m, rank[1]) for m in models}
        rows.append([name, *(scores[m] for m in models)])
    position = 1 + list(models).index(rank[0])
    return sorted(rows, key=lambda r: float("-inf") if r[position] is None else -r[position])


def score_of(summary: Mapping, model: str, split: str) -> float | None:
    """A model's Kaggle score on a split from a summary.json (the flat layout, or the nested one of earlier runs)."""
    value = (summary.get(model) or {}).get(split)
    if isinstance(value, Mapping):
        value = value.get("kaggle")
    return None if value is None else float(value)


def experiments_table(states: Sequence[Mapping], summary_path: str, models: Sequence[str],
                      rank: tuple[str, str]) -> str:
    """One row per experiment (its `rank[1]` score of every model and the ceiling), best first."""
    columns = [CEILING, *models]
    rows = experiment_rows(states, summary_path, columns, rank)
    return format_table(["experiment", *(f"{m}.{rank[1]}" for m in columns)],
                        [[r[0], *(cell(v) for v in r[1:])] for r in rows])


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub table, the first column left-aligned, the others right-aligned."""
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    return "\n".join([*lines, *("| " + " | ".join(map(str, r)) + " |" for r in rows)])


def markdown_summary(per_model: Mapping[str, Mapping[str, Mapping]], splits: Sequence[str]) -> str:
    """Models x splits beside the ceiling, Kaggle score (the mean over the collections), from {model: {slug:
    metrics dict}}: the README's results table."""
    first = next(iter(per_model.values()))
    ceiling = {s: split_ceiling(first, s) for s in splits}
    rows = [[m, *(cell(metrics.kaggle_score({c: d[s]["score"] for c, d in per.items()})) for s in splits)]
            for m, per in per_model.items()]
    return markdown_table(["model", *splits], [*rows, ["ceiling", *(cell(ceiling[s]) for s in splits)]])


def markdown_collections(per_model: Mapping[str, Mapping[str, Mapping]], split: str) -> str:
    """Collections x models (and the ceiling) on one split, with the mean (the Kaggle score) as the last row."""
    models, slugs = list(per_model), list(next(iter(per_model.values())))
    first = per_model[models[0]]
    rows = [[slug, *(cell(per_model[m][slug][split]["score"]) for m in models),
             cell(first[slug].get(CEILING, {}).get(split))] for slug in slugs]
    means = [cell(metrics.kaggle_score({c: per_model[m][c][split]["score"] for c in slugs})) for m in models]
    rows.append(["mean (Kaggle score)", *means, cell(split_ceiling(first, split))])
    return markdown_table([f"collection ({split})", *models, CEILING], rows)
