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


def test_importance_plot_keeps_a_long_title_and_long_names_whole(tmp_path):
    """Long feature names push the axes right, and the title, centred over them, reached past the image: its edge
    columns must stay background (nothing drawn is cut off at the border)."""
    import numpy as np
    import pandas as pd
    from PIL import Image

    names = [f"minor{i}_log2_weighted_vs_default_of_a_long_feature" for i in range(6)]
    table = pd.DataFrame({"feature": names + ["unused"], "gain": [6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0],
                          "split": [1] * 6 + [0]})
    title = "LightGBM layout:nlp:default: top features by gain, a title as long as the stage writes"
    importance.write_importance(table, tmp_path / "importance.csv", tmp_path / "importance.png", 30, title)
    pixels = np.asarray(Image.open(tmp_path / "importance.png").convert("L"))      # [rows, columns]
    for edge in (pixels[:, 0], pixels[:, -1], pixels[0, :], pixels[-1, :]):
        assert edge.min() > 200, "something drawn reaches the image's border (cut off)"
