"""The vendored plotly.js bundle the dashboard serves instead of the full one."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("dash")

from holter_dashboard import plotly_loader
from plotly.offline import get_plotlyjs_version


def test_the_bundle_named_is_the_file_shipped() -> None:
    header = (plotly_loader.STATIC / plotly_loader.PLOTLY_BUNDLE).read_text(encoding="utf-8")[:300]
    version = re.search(r"plotly\.js \(holter: scatter, scattergl, heatmap - minified\) v(\d+\.\d+\.\d+)", header)
    assert version, header
    assert version.group(1) in plotly_loader.PLOTLY_BUNDLE


def test_the_bundle_has_the_major_version_of_the_installed_plotly() -> None:
    """dcc.Graph is built against the plotly.js of the installed `plotly`; a new major needs a new bundle."""
    shipped = re.search(r"(\d+)\.\d+\.\d+", plotly_loader.PLOTLY_BUNDLE).group(1)
    assert shipped == get_plotlyjs_version().split(".")[0]


@pytest.mark.parametrize(
    "path, charts",
    [
        ("/runs/abc", True),
        ("/runs/abc/postmortem", True),
        ("/compare", True),
        ("/levers", True),
        ("/", False),
        ("/alerts", False),
    ],
)
def test_chart_pages_are_the_ones_that_fetch_plotly(path: str, charts: bool) -> None:
    assert bool(re.match(plotly_loader.CHART_PAGES, path)) is charts


def test_the_build_recipe_makes_the_bundle_named() -> None:
    build = plotly_loader.STATIC / "build" / "package.json"
    recipe = json.loads(build.read_text(encoding="utf-8"))
    assert f"../{plotly_loader.PLOTLY_BUNDLE}" in recipe["scripts"]["build"]
    assert recipe["dependencies"]["plotly.js"] in plotly_loader.PLOTLY_BUNDLE


def test_the_polyfill_for_old_browsers_is_replaced_by_the_one_part_the_components_use() -> None:
    polyfill = '<script src="/_dash-component-suites/dash/deps/polyfill@7.v4_4_1m1.12.1.min.js"></script>'
    assert plotly_loader.POLYFILL.match(polyfill + "\n")
    assert (
        (plotly_loader.STATIC / plotly_loader.REGENERATOR)
        .read_text(encoding="utf-8")
        .startswith("/** regenerator-runtime v0.14.1")
    )
