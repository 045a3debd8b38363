"""Feature importance of a trained LightGBM ranker: the table, and the bar plot stage lgbm writes."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipeline.files import atomic_path, write_csv


def importance_table(booster) -> pd.DataFrame:
    """Feature importance (total gain and split count), most important first."""
    table = pd.DataFrame({"feature": booster.feature_name(),
                          "gain": booster.feature_importance("gain", iteration=booster.best_iteration or None),
                          "split": booster.feature_importance("split", iteration=booster.best_iteration or None)})
    return table.sort_values(["gain", "feature"], ascending=[False, True], kind="stable").reset_index(drop=True)


def plotted_importance(table: pd.DataFrame, top: int) -> tuple[pd.DataFrame, int]:
    """The at most `top` features of `table` (most important first) that have gain > 0, and how many have none."""
    used = table[table["gain"] > 0]
    return used.head(top), len(table) - len(used)


def write_importance(table: pd.DataFrame, csv_path: Path, png_path: Path, top: int, title: str) -> None:
    """Write the importance CSV (every feature) and a bar plot of the `top` features by gain, leaving out the
    features with zero gain (the title says how many); both atomically."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    write_csv(table, csv_path)
    shown, unused = plotted_importance(table, top)
    shown = shown.iloc[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.25 * len(shown) + 1.2))
    ax.barh(shown["feature"], shown["gain"])
    ax.set_xlabel("total gain")
    ax.set_title(f"{title}\n({unused} of {len(table)} features with zero gain not shown)" if unused else title)
    fig.tight_layout()
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")   # the title reaches past the axes
    plt.close(fig)
