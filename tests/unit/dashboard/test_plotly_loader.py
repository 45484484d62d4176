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


def _asset_app() -> tuple[plotly_loader.DashboardGzip, list[str]]:
    """The gzip layer over a tiny ASGI app that serves one versioned script and counts its calls."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    calls: list[str] = []

    async def script(request):  # type: ignore[no-untyped-def]
        calls.append(request.url.path)
        if request.headers.get("if-none-match") == '"v1"':
            return Response(status_code=304)
        return Response("var x = 1;\n" * 2000, media_type="text/javascript", headers={"etag": '"v1"'})

    return plotly_loader.DashboardGzip(Starlette(routes=[Route("/_holter/app-1.0.js", script)])), calls


def test_a_versioned_script_is_compressed_once_and_served_from_memory_with_its_length() -> None:
    from starlette.testclient import TestClient

    app, calls = _asset_app()
    with TestClient(app) as client:
        answers = [client.get("/_holter/app-1.0.js", headers={"Accept-Encoding": "gzip"}) for _ in range(3)]
    assert calls == ["/_holter/app-1.0.js"]  # the app answered once; the others came from memory
    for answer in answers:
        assert answer.headers["content-encoding"] == "gzip"
        assert int(answer.headers["content-length"]) < 22_000 / 4
        assert answer.text == "var x = 1;\n" * 2000  # TestClient undoes the gzip


def test_a_revalidating_browser_still_gets_its_304() -> None:
    from starlette.testclient import TestClient

    app, calls = _asset_app()
    with TestClient(app) as client:
        answer = client.get("/_holter/app-1.0.js", headers={"Accept-Encoding": "gzip", "If-None-Match": '"v1"'})
    assert answer.status_code == 304 and calls == ["/_holter/app-1.0.js"]
