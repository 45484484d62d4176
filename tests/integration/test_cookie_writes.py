"""With auth on, the dashboard's sign-in cookie signs API requests too; a write signed by it must
come from this service's own pages. The cookie is SameSite=Strict, which a page of the same site
on another origin (another port of localhost, a sibling subdomain) still gets sent with a form
post: `POST /runs/{id}/analyze` has no body, so no content type stops such a form."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, new_run_id
from tests.servers import ServerProcess


@pytest.fixture(scope="module")
def signed_in(secured: ServerProcess) -> Iterator[dict[str, str]]:
    with secured.api(key=ADMIN_TOKEN) as admin:
        key = admin.post("/keys", json={"name": "cookie", "scope": "read"}).json()["key"]
        run_id = new_run_id()
        admin.post("/runs", json={"id": run_id, "project": "cookie"}).raise_for_status()
    yield {"key": key, "run": run_id}


def form_post(server: ServerProcess, signed_in: dict, headers: dict[str, str]) -> int:
    """An empty form's POST to the body-less analyze route, the cookie sent by the browser."""
    return httpx.post(
        f"{server.url}/api/v1/runs/{signed_in['run']}/analyze",
        headers={"cookie": f"holter_key={signed_in['key']}", "content-length": "0", **headers},
        timeout=30,
    ).status_code


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://127.0.0.1:1", "sec-fetch-site": "same-site"},  # another port of this machine
        {"origin": "http://127.0.0.1:1"},  # an older browser: Origin only
        {"origin": "null"},
        {"sec-fetch-site": "cross-site"},
    ],
)
def test_a_cookie_signed_write_from_another_origin_is_refused(
    secured: ServerProcess, signed_in: dict, headers: dict[str, str]
) -> None:
    assert form_post(secured, signed_in, headers) == 403


def test_a_cookie_signed_write_from_the_services_own_pages_is_taken(secured: ServerProcess, signed_in: dict) -> None:
    assert form_post(secured, signed_in, {"origin": secured.url, "sec-fetch-site": "same-origin"}) == 200


def test_a_write_with_the_key_in_a_header_needs_no_origin(secured: ServerProcess, signed_in: dict) -> None:
    with secured.api(key=signed_in["key"]) as api:
        answer = api.post(f"/runs/{signed_in['run']}/analyze", headers={"origin": "http://127.0.0.1:1"})
    assert answer.status_code == 200  # a script or the client, not a browser's ambient cookie
