"""Signing in to the dashboard when auth is on: pages lead to the sign-in page, a wrong key or a
training job's (ingest) key is refused, a read key signs in and reads only its project's runs
(logged with the real client and an ingest key), signing out ends it; with auth off nothing is
asked. Plus the `next` check that keeps the sign-in page from redirecting to another site."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import migrated_sqlite
from tests.servers import InProcessServer, ServerProcess
from tests.ui.conftest import browser_tab

login = pytest.importorskip("holter_dashboard.login")

ADMIN_TOKEN = f"admin-{secrets.token_urlsafe(16)}"
PROJECT = "guarded"


# --- `next`: only a local path -----------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("/", "/"),
        ("/runs/abc123", "/runs/abc123"),
        ("/runs/abc123/postmortem?metric=loss#top", "/runs/abc123/postmortem?metric=loss#top"),
        ("/compare?run=a,b", "/compare?run=a,b"),
        (None, "/"),
        ("", "/"),
        ("runs/abc", "/"),
        ("https://evil.example/", "/"),
        ("http:/evil.example", "/"),
        ("javascript:alert(1)", "/"),
        ("//evil.example/path", "/"),
        ("///evil.example", "/"),
        ("/\\evil.example", "/"),
        ("\\\\evil.example", "/"),
        ("/\t/evil.example", "/"),
        ("/\n/evil.example", "/"),
        (" /runs", "/"),
        ("/login", "/"),
        ("/login?next=/x", "/"),
        ("/logout", "/"),
        ("/" + "a" * 5000, "/"),
    ],
)
def test_next_is_a_local_path_or_the_runs_page(value: str | None, expected: str) -> None:
    assert login.safe_next(value) == expected


# --- in a browser, against `holter serve` with auth on ---------------------------------------------


@pytest.fixture(scope="module")
def secure_server(chromium: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    """The service with auth on, in this process (uvicorn in a thread): `remote_dashboard` is the
    module's one `holter serve` process, since its dashboard reads its API's address at start."""
    database = migrated_sqlite(tmp_path_factory.mktemp("ui-login") / "holter.db")
    settings = {"auth": "on", "admin_token": ADMIN_TOKEN}
    server = InProcessServer(database, settings=settings, dashboard=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def keys(secure_server: InProcessServer) -> dict[str, str]:
    """Keys made through the API with the admin token: ingest and read for the project, read for another."""
    made = {}
    with secure_server.api(key=ADMIN_TOKEN) as api:
        for name, scope, project in (
            ("ingest", "ingest", PROJECT),
            ("read", "read", PROJECT),
            ("other", "read", "someone-else"),
        ):
            answer = api.post("/keys", json={"name": f"ui-{name}", "scope": scope, "project": project})
            assert answer.status_code == 201, answer.text
            made[name] = answer.json()["key"]
    return made


@pytest.fixture(scope="module")
def guarded_run(secure_server: InProcessServer, keys: dict[str, str]) -> str:
    """A finished run, logged by the real client with the ingest key."""
    import holter

    run = holter.init(
        project=PROJECT,
        name="behind-the-door",
        id=f"gd{uuid.uuid4().hex[:10]}",
        url=secure_server.url,
        api_key=keys["ingest"],
        tags=["secret-sauce"],
    )
    for step in range(50):
        run.log({"loss": 2.0 / (step + 1), "grad_norm": 1.0}, step=step)
    run.finish()
    with secure_server.api(key=keys["read"]) as api:
        assert api.get(f"/runs/{run.id}").json()["status"] == "finished"
    return run.id


@pytest.fixture
def tab(chromium, secure_server: InProcessServer) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """A fresh browser (no cookies) on the auth-on server."""
    yield from browser_tab(chromium, secure_server.url)


def sign_in(page, key: str) -> None:  # type: ignore[no-untyped-def]
    page.locator("#key").fill(key)
    page.locator("#sign-in").click()


def on_login_page(page) -> bool:  # type: ignore[no-untyped-def]
    return page.url.split("?")[0].endswith("/login") and page.locator("#sign-in").is_visible()


@pytest.mark.slow
def test_the_dashboard_leads_to_the_sign_in_page(tab, secure_server: InProcessServer) -> None:  # type: ignore[no-untyped-def]
    tab.goto("/")
    tab.wait_for_url("**/login")
    assert on_login_page(tab)
    card = tab.locator("form.card").inner_text()
    assert "Holter" in card and "API key" in card
    assert tab.locator("#key").get_attribute("type") == "password"
    tab.goto("/alerts")
    tab.wait_for_url("**/login?next=%2Falerts")
    # Dash's callbacks answer 401 without a key, the API too
    assert httpx.post(f"{secure_server.url}/_dash-update-component", json={}, timeout=10).status_code == 401
    assert httpx.get(f"{secure_server.url}/api/v1/runs", timeout=10).status_code == 401


@pytest.mark.slow
def test_a_wrong_key_shows_an_error(tab) -> None:  # type: ignore[no-untyped-def]
    tab.goto("/")
    sign_in(tab, "hk_deadbeef_not-a-real-key")
    error = tab.locator("#login-error")
    error.wait_for()
    assert "unknown or has been revoked" in error.inner_text()
    assert on_login_page(tab)
    assert not [c for c in tab.context.cookies() if c["name"] == "holter_key"]


@pytest.mark.slow
def test_a_training_jobs_ingest_key_may_not_read_the_dashboard(tab, keys: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    tab.goto("/")
    sign_in(tab, keys["ingest"])
    error = tab.locator("#login-error")
    error.wait_for()
    assert "read or admin key" in error.inner_text()
    assert on_login_page(tab)
    assert not [c for c in tab.context.cookies() if c["name"] == "holter_key"]
    # nor does the key get in by being set as the cookie by hand
    tab.context.add_cookies([{"name": "holter_key", "value": keys["ingest"], "url": tab.url}])
    tab.goto("/")
    tab.wait_for_url("**/login")


@pytest.mark.slow
def test_a_read_key_signs_in_reads_the_runs_and_signs_out(tab, keys: dict[str, str], guarded_run: str) -> None:  # type: ignore[no-untyped-def]
    tab.goto(f"/runs/{guarded_run}")
    tab.wait_for_url("**/login?next=*")
    sign_in(tab, keys["read"])
    tab.wait_for_url(f"**/runs/{guarded_run}")  # back where the person was going
    tab.locator("#run-title", has_text="behind-the-door").wait_for()
    cookie = next(c for c in tab.context.cookies() if c["name"] == "holter_key")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] == keys["read"]

    tab.locator("#nav-runs").click()
    row = tab.locator(".run-row", has_text=guarded_run)
    row.wait_for()
    assert "secret-sauce" in row.inner_text().lower()
    assert tab.locator(".error-alert").count() == 0

    tab.locator("#sign-out").click()
    tab.wait_for_url("**/login")
    assert on_login_page(tab)
    assert not [c for c in tab.context.cookies() if c["name"] == "holter_key"]
    tab.goto("/")
    tab.wait_for_url("**/login")


@pytest.mark.slow
def test_a_read_key_for_another_project_sees_none_of_its_runs(tab, keys: dict[str, str], guarded_run: str) -> None:  # type: ignore[no-untyped-def]
    tab.goto("/")
    sign_in(tab, keys["other"])
    tab.wait_for_url(lambda url: not url.split("?")[0].endswith("/login"))
    tab.locator(".empty-state").wait_for()
    assert "No runs yet" in tab.locator(".empty-state").inner_text()
    assert guarded_run not in tab.content()
    tab.goto(f"/runs/{guarded_run}")
    tab.locator(".no-such-run").wait_for()  # the same page as for a run that does not exist
    assert "behind-the-door" not in tab.content()


@pytest.mark.slow
def test_with_auth_off_no_sign_in_is_asked(page) -> None:  # type: ignore[no-untyped-def]
    page.goto("/")
    page.locator(".empty-state").wait_for()
    assert "/login" not in page.url
    assert page.locator("#sign-out").count() == 0
    page.goto("/login?next=/alerts")
    page.wait_for_url("**/alerts")


@pytest.mark.parametrize(
    "headers",
    [{"sec-fetch-site": "cross-site"}, {"origin": "http://elsewhere.example"}, {"origin": "null"}],
    ids=["fetch-metadata", "origin", "opaque-origin"],
)
def test_a_sign_in_posted_from_another_site_is_refused(
    secure_server: InProcessServer, keys: dict[str, str], headers: dict
) -> None:
    answer = httpx.post(
        f"{secure_server.url}/login", data={"key": keys["read"], "next": "/"}, headers=headers, timeout=10
    )
    assert answer.status_code == 403 and "another site" in answer.text
    assert "holter_key" not in answer.cookies


@pytest.mark.parametrize("headers", [{"sec-fetch-site": "same-origin"}, {}], ids=["same-origin", "no-browser"])
def test_a_sign_in_from_this_site_or_a_script_sets_the_cookie(
    secure_server: InProcessServer, keys: dict[str, str], headers: dict
) -> None:
    origin = {"origin": secure_server.url} if headers else {}
    answer = httpx.post(
        f"{secure_server.url}/login", data={"key": keys["read"], "next": "/"}, headers={**headers, **origin}, timeout=10
    )
    assert answer.status_code == 303 and answer.cookies.get("holter_key") == keys["read"]


# --- remote mode: a dashboard reading another service (HOLTER_DASHBOARD_API_URL) ----------------


@pytest.fixture(scope="module")
def remote_dashboard(
    secure_server: InProcessServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A second service, auth off and with no runs of its own, whose dashboard reads `secure_server`
    (auth on): who may sign in is the remote service's answer, never this one's database."""
    root = tmp_path_factory.mktemp("ui-remote")
    process = ServerProcess(
        f"sqlite:///{root / 'holter.db'}",
        log_path=root / "server.log",
        env={"HOLTER_SPOOL_DIR": str(root / "spool"), "HOLTER_DASHBOARD_API_URL": secure_server.url},
    ).start()
    yield process
    process.stop()


def test_a_remote_dashboard_asks_the_remote_service_who_a_key_is(
    remote_dashboard: ServerProcess, keys: dict[str, str]
) -> None:
    with httpx.Client(base_url=remote_dashboard.url, timeout=10) as client:
        assert client.get("/runs/x").status_code == 303  # the remote asks for keys: so does its dashboard
        assert client.post("/login", data={"key": "hk_deadbeef_not-a-real-key", "next": "/"}).status_code == 401
        assert client.post("/login", data={"key": keys["ingest"], "next": "/"}).status_code == 403
        answer = client.post("/login", data={"key": keys["read"], "next": "/"})
        assert answer.status_code == 303 and answer.cookies.get("holter_key") == keys["read"]


@pytest.mark.slow
def test_a_remote_dashboard_signs_in_with_the_remote_services_key_and_reads_its_runs(
    chromium, remote_dashboard: ServerProcess, keys: dict[str, str], guarded_run: str
) -> None:  # type: ignore[no-untyped-def]
    for tab in browser_tab(chromium, remote_dashboard.url):
        tab.goto(f"/runs/{guarded_run}")
        tab.wait_for_url("**/login?next=*")
        sign_in(tab, keys["read"])
        tab.wait_for_url(f"**/runs/{guarded_run}")
        tab.locator("#run-title", has_text="behind-the-door").wait_for()  # a run only the remote service holds
        assert tab.locator(".error-alert").count() == 0
