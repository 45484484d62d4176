"""Browser tests: the real service with the dashboard, driven by headless Debian Chromium.

They use Playwright's Python API with the system browser (/usr/bin/chromium, from Debian's
`chromium` package; Playwright never downloads one here). Without that browser, or without the
dashboard's packages, the tests are skipped, unless HOLTER_TEST_REQUIRE_BROWSER=1 (CI), which
turns that into a failure.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import migrated_sqlite
from tests.servers import InProcessServer, ServerProcess

CHROMIUM = os.environ.get("HOLTER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    for module in ("playwright", "holter_dashboard", "dash", "dash_mantine_components"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'holter[dashboard,test]')"
    return None


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """One headless Chromium per test module: while Playwright's sync API runs, its event loop
    is the running one in this thread, which would break the `asyncio.run` of any test after it
    in the same (xdist worker) process."""
    problem = _missing()
    if problem:
        if os.environ.get("HOLTER_TEST_REQUIRE_BROWSER") == "1":
            pytest.fail(f"the browser tests are required (HOLTER_TEST_REQUIRE_BROWSER=1): {problem}")
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def ui_server(chromium: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    """A fresh service (dashboard included) on an empty SQLite file, per test module, in this
    process (uvicorn and the background loops in threads): the pages never kill, restart or look
    at the server's process, and it starts in a fraction of the seconds a `holter serve` and its
    worker cost. Playwright's loop runs in the test's thread, the server's in its own.

    Dash keeps one page registry per process: the pages (whose layouts read the API) of the
    dashboard mounted last serve every app in the process. A module's tests therefore open pages
    of the one dashboard it mounted last (the session's shared `server` reads no page)."""
    server = InProcessServer(migrated_sqlite(tmp_path_factory.mktemp("ui") / "holter.db"), dashboard=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ui_process(chromium: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A `holter serve` child process (dashboard included) on an empty SQLite file, for a module
    whose server must be a process of its own (its CPU apart from the test's)."""
    root = tmp_path_factory.mktemp("ui")
    process = ServerProcess(
        migrated_sqlite(root / "holter.db"), log_path=root / "server.log", env={"HOLTER_SPOOL_DIR": str(root / "spool")}
    ).start()
    yield process
    process.stop()


def browser_tab(chromium, base_url: str) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """A tab at laptop size in a fresh browser profile (no cookies); JavaScript errors fail the test."""
    context = chromium.new_context(viewport={"width": 1440, "height": 900}, base_url=base_url)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.set_default_timeout(15_000)
    yield tab
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def page(chromium, ui_server: InProcessServer | ServerProcess) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """A browser tab on the module's server."""
    yield from browser_tab(chromium, ui_server.url)
