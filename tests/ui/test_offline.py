"""No page of Holter loads anything from outside the service: an air-gapped install shows every
page, the API's /docs and /redoc included. Each request the browser makes is checked; one to a
host that is not loopback fails the test (and is answered here, never sent)."""

from __future__ import annotations

import ipaddress
import uuid
from urllib.parse import urlsplit

import holter
import pytest

from tests.servers import InProcessServer

pytestmark = pytest.mark.slow


def is_loopback(url: str) -> bool:
    """Whether a request goes to this machine (or is no network request at all: data:, blob:)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss"):
        return True
    host = (parts.hostname or "").strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(scope="module")
def finished_run(ui_server: InProcessServer) -> str:
    run = holter.init(project="offline", name="offline", id=f"off{uuid.uuid4().hex[:10]}", url=ui_server.url)
    for step in range(200):
        run.log({"loss": 3.0 - step * 0.01, "grad_norm": 1.0 + (step % 5) * 0.1}, step=step)
    run.finish()
    return run.id


@pytest.fixture
def outside(page) -> list[str]:  # type: ignore[no-untyped-def]
    """Every request of the tab to a host that is not loopback (refused here, so nothing leaves)."""
    seen: list[str] = []

    def check(route) -> None:  # type: ignore[no-untyped-def]
        if is_loopback(route.request.url):
            route.continue_()
        else:
            seen.append(route.request.url)
            route.abort()

    page.route("**/*", check)
    page.on("websocket", lambda ws: None if is_loopback(ws.url) else seen.append(ws.url))
    return seen


def settle(page) -> None:  # type: ignore[no-untyped-def]
    """Let a page load what it loads (its charts, fonts, late scripts); pages that refresh
    themselves never go quiet, so this waits a while rather than for the network to idle."""
    page.wait_for_load_state("load")
    page.wait_for_timeout(2500)


def test_the_loopback_check_tells_outside_hosts(page) -> None:  # type: ignore[no-untyped-def]
    assert is_loopback("http://127.0.0.1:8765/docs") and is_loopback("http://[::1]:80/") and is_loopback("data:,x")
    assert not is_loopback("https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js")
    assert not is_loopback("https://fonts.googleapis.com/css") and not is_loopback("http://10.0.0.1/")


def test_the_api_docs_draw_offline(page, outside: list[str]) -> None:  # type: ignore[no-untyped-def]
    page.goto("/docs")
    page.locator(".swagger-ui .opblock").first.wait_for()  # the operations are listed
    assert page.locator(".swagger-ui .opblock").count() > 20
    settle(page)
    assert outside == []


def test_redoc_draws_offline(page, outside: list[str]) -> None:  # type: ignore[no-untyped-def]
    page.goto("/redoc")
    page.locator("h1", has_text="Holter").first.wait_for(timeout=30_000)  # the document drawn
    assert page.get_by_text("Create a run, or resume it when its id exists").count() > 0
    settle(page)
    assert outside == []


@pytest.mark.parametrize(
    "path",
    ["/", "/runs/{run}", "/runs/{run}/postmortem", "/compare?runs={run}", "/levers", "/alerts", "/runs/no-such-run"],
)
def test_no_dashboard_page_asks_an_outside_host(page, outside: list[str], finished_run: str, path: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(path.format(run=finished_run))
    page.locator(".mantine-AppShell-main h2, .mantine-AppShell-main .empty-state").first.wait_for()
    settle(page)
    assert outside == []
