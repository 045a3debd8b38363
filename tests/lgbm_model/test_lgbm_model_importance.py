"""pipeline.lgbm_model.importance: the plot leaves out zero-gain features, the CSV keeps them."""
from __future__ import annotations

from pipeline.lgbm_model import importance


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
