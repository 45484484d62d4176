"""`GET /api/v1/keys/me`: who the presented key is (id, name, scope, project, never its secret),
for any key whatever its scope; 401 for a missing, unknown or revoked key; with auth off, an
answer that says so. On SQLite and Postgres (conftest's auth-on `secured` server). The
dashboard's sign-in asks it (dashboard/login.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ADMIN_TOKEN, migrated_sqlite
from tests.servers import InProcessServer


def make_key(server: InProcessServer, scope: str, project: str | None = "idp") -> dict:
    with server.api(key=ADMIN_TOKEN) as admin:
        answer = admin.post("/keys", json={"name": f"who-{scope}", "scope": scope, "project": project})
        assert answer.status_code == 201, answer.text
        return answer.json()


@pytest.mark.parametrize("scope", ["read", "ingest", "admin"])
def test_a_key_of_any_scope_learns_who_it_is_without_its_secret(secured: InProcessServer, scope: str) -> None:
    created = make_key(secured, scope)
    with secured.api(key=created["key"]) as api:
        answer = api.get("/keys/me")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "auth": True,
        "id": created["id"],
        "name": f"who-{scope}",
        "prefix": created["prefix"],
        "scope": scope,
        "project": "idp",
        "signs_as": f"who-{scope}",  # what its notes and decisions are signed with
    }
    assert created["key"].split("_", 2)[2] not in answer.text


def test_the_admin_token_is_an_admin_of_every_project(secured: InProcessServer) -> None:
    with secured.api(key=ADMIN_TOKEN) as api:
        body = api.get("/keys/me").json()
    assert body["auth"] and body["scope"] == "admin" and body["project"] is None and body["id"] is None
    assert body["signs_as"] == "admin"


@pytest.mark.parametrize("key", [None, "hk_deadbeef_not-a-real-key", "not even the shape of a key"])
def test_a_missing_or_unknown_key_is_refused(secured: InProcessServer, key: str | None) -> None:
    with secured.api(key=key) as api:
        assert api.get("/keys/me").status_code == 401


def test_a_revoked_key_is_refused(secured: InProcessServer) -> None:
    created = make_key(secured, "read")
    with secured.api(key=created["key"]) as api:
        assert api.get("/keys/me").status_code == 200
        with secured.api(key=ADMIN_TOKEN) as admin:
            assert admin.delete(f"/keys/{created['id']}").status_code == 200
        assert api.get("/keys/me").status_code == 401


def test_with_auth_off_it_says_so(tmp_path: Path) -> None:
    server = InProcessServer(migrated_sqlite(tmp_path / "holter.db"), settings={"auth": "off"}).start()
    try:
        with server.api() as api:
            body = api.get("/keys/me").json()
    finally:
        server.stop()
    assert body == {
        "auth": False,
        "id": None,
        "name": None,
        "prefix": None,
        "scope": "admin",
        "project": None,
        "signs_as": "local",
    }
