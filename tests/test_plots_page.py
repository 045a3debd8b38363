"""The offline page template of `dvc plots show`: Vega inlined from vl-convert-python, no CDN, DVC's placeholders."""
import configparser
import re

import pytest

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
