"""The offline page template of `dvc plots show`: Vega inlined from vl-convert-python, no CDN, DVC's placeholders."""
import configparser
import json
import re

import pytest
import vl_convert
import yaml

from pipeline.config import compose, repo_root
from pipeline.plots_page import inline_script, page_template, write_template


def test_template_inlines_the_given_bundle_and_keeps_dvc_placeholders():
    page = page_template("5.21", bundle="window.vegaEmbed = function () {}; var s = '</script>';")
    assert "{plot_divs}" in page and "{refresh_tag}" in page and "{scripts}" not in page
    assert "window.vegaEmbed = function () {};" in page
    assert "'<\\/script>'" in page                       # the bundle cannot close its <script> early
    assert not re.search(r"<script[^>]*\bsrc=", page)     # nothing loaded from elsewhere


def test_a_bundle_holding_a_dvc_placeholder_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"contains '\{plot_divs\}'"):
        inline_script("var x = '{plot_divs}';")
    with pytest.raises(ValueError, match="must not hold"):
        write_template("{plot_divs}{scripts}", tmp_path / "t.html")


@pytest.mark.slow
def test_the_pinned_package_bundles_vega_vega_lite_and_vega_embed():
    page = page_template("5.21")
    for name in ("vegaEmbed", "vegaLite", "vega"):
        assert f"window.{name}=" in page.replace(" ", "")
    assert not re.search(r"<script[^>]*\bsrc=", page) and "cdn.jsdelivr" not in page


def test_dvc_config_points_at_the_configured_template():
    """`.dvc/config` `plots.html_template` (relative to .dvc/) is the file stage summary writes."""
    parser = configparser.ConfigParser()
    parser.read(repo_root() / ".dvc" / "config")
    configured = (repo_root() / ".dvc" / parser["plots"]["html_template"]).resolve()
    assert configured == (repo_root() / compose([]).summary.page_template).resolve()


def filled_template(name: str, x: str, y: str, rows: list[dict]) -> dict:
    """A `.dvc/plots` template with DVC's placeholders filled as `dvc plots show` fills them."""
    text = (repo_root() / ".dvc" / "plots" / f"{name}.json").read_text()
    text = text.replace('"<DVC_METRIC_DATA>"', json.dumps(rows)).replace("<DVC_METRIC_TITLE>", name)
    for placeholder, value in (("<DVC_METRIC_X_LABEL>", x), ("<DVC_METRIC_Y_LABEL>", y), ("<DVC_METRIC_X>", x),
                               ("<DVC_METRIC_Y>", y)):
        text = text.replace(placeholder, value)
    assert "<DVC_" not in text, f"{name}: a DVC placeholder the test does not fill"
    return json.loads(text)


def svg_height(svg: str) -> float:
    return float(re.search(r'<svg[^>]*\bheight="([\d.]+)"', svg).group(1))


def per_graph_chart_height(graphs: int) -> float:
    """Rendered height (px) of the per-graph chart for `graphs` graphs x 4 models."""
    rows = [{"graph_id": f"kernel_{g:02d}", "model": model, "score": 0.5 + 0.01 * g}
            for g in range(graphs) for model in ("heuristic", "lgbm", "gnn", "ensemble")]
    return svg_height(vl_convert.vegalite_to_svg(filled_template("models_by_graph", "score", "graph_id", rows)))


def test_every_dvc_yaml_plot_template_renders():
    """Each template dvc.yaml names compiles and renders (vl-convert, offline) with rows of its x and y fields."""
    plots = yaml.safe_load((repo_root() / "dvc.yaml").read_text())["plots"]
    assert plots, "dvc.yaml has no plots"
    for entry in plots:
        (props,) = entry.values()
        x, y = props["x"], props["y"]
        rows = [{"model": "gnn", "collection": "tile-xla", "seed": 0, "graph_id": f"g{i}"} for i in range(4)]
        for i, row in enumerate(rows):                   # x and y numbers, unless a field above (graph_id) is one
            row.setdefault(x, 0.1 * i)
            row.setdefault(y, 0.2 * i)
        svg = vl_convert.vegalite_to_svg(filled_template(props["template"], x, y, rows))
        assert "<path" in svg and svg_height(svg) > 50, props["template"]


def test_the_per_graph_chart_fits_dozens_of_graphs_on_a_screen():
    """The tile collection's valid split holds dozens of kernels: one row of dots per graph keeps 48 of them (x 4
    models) under 1200 px, where bars of 24 px per model took about 5000; 4 graphs still get rows a label fits."""
    tall, short = per_graph_chart_height(48), per_graph_chart_height(4)
    assert tall < 1200, tall
    assert short > 4 * 16, short
