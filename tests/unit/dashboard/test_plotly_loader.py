"""The vendored plotly.js bundle the dashboard serves instead of the full one."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("dash")

from holter_dashboard import plotly_loader
from plotly.offline import get_plotlyjs_version


def test_the_bundle_named_is_the_file_shipped() -> None:
    header = (plotly_loader.STATIC / plotly_loader.PLOTLY_BUNDLE).read_text(encoding="utf-8")[:300]
    version = re.search(r"plotly\.js \(cartesian - minified\) v(\d+\.\d+\.\d+)", header)
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
