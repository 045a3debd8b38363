"""The page `dvc plots show` fills, with Vega, Vega-Lite and Vega-Embed inlined so it renders with no network.

DVC's default page loads the three libraries from a CDN, so offline nothing renders. DVC accepts an HTML template
(`.dvc/config` `plots.html_template`, or `dvc plots show --html-template`) with a `{plot_divs}` placeholder, and adds
its CDN `<script>` tags only where the template has a `{scripts}` placeholder, which this one leaves out. The
libraries come from the pinned `vl-convert-python` package (requirements.txt), whose `javascript_bundle` returns
them as one script that defines the globals `vega`, `vegaLite` and `vegaEmbed` that DVC's chart snippets call.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.files import write_text

PLOTS_PLACEHOLDER = "{plot_divs}"            # dvc_render.html: where DVC puts the charts
DVC_PLACEHOLDERS = ("{plot_divs}", "{scripts}", "{refresh_tag}")   # every text DVC substitutes in a template
SCRIPT_END = "</script"                      # would close the inline <script> early

PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
{refresh_tag}
<title>tpugraphs-pipeline: dvc plots</title>
<script type="text/javascript">
(function () {{
{bundle}
}})();
</script>
<style>
body {{ font-family: sans-serif; }}
table {{ border-spacing: 15px; }}
</style>
</head>
<body>
<h1>tpugraphs-pipeline: per collection, every model side by side</h1>
{plot_divs}
</body>
</html>
"""


def inline_script(bundle: str) -> str:
    """`bundle` made safe to paste inside an inline <script> of a DVC template: ValueError when it holds text DVC
    would substitute; `</script` escaped (`<\\/script` means the same to JavaScript)."""
    for placeholder in DVC_PLACEHOLDERS:
        if placeholder in bundle:
            raise ValueError(f"the Vega bundle contains {placeholder!r}, which DVC would replace in the page")
    return bundle.replace(SCRIPT_END, "<\\/script")


def page_template(vega_lite_version: str, bundle: str | None = None) -> str:
    """The HTML template: DVC's placeholders for the charts and the refresh tag, no `{scripts}` (so no CDN), and
    the Vega libraries of `vl-convert-python` for Vega-Lite `vega_lite_version` inlined (or the given `bundle`)."""
    if bundle is None:
        import vl_convert

        bundle = vl_convert.javascript_bundle(vl_version=vega_lite_version)
    page = PAGE.format(bundle=inline_script(bundle), refresh_tag="{refresh_tag}", plot_divs=PLOTS_PLACEHOLDER)
    return page


def write_template(page: str, path: str | Path) -> None:
    """Write the template atomically, after checking it has DVC's chart placeholder and no CDN scripts."""
    if PLOTS_PLACEHOLDER not in page or "{scripts}" in page:
        raise ValueError(f"{path}: a DVC page template needs {PLOTS_PLACEHOLDER} and must not hold {{scripts}}")
    write_text(page, path)
