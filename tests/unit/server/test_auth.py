"""When auth is on, and what each scope may do."""

from __future__ import annotations

from holter_server.api.access import match
from holter_server.services.auth import AuthMode, Principal, hash_secret, new_key
from holter_server.settings import Settings


class NoKeys:
    """Stands in for a session: `active_key_count` is all AuthMode asks of the store."""


def mode(monkeypatch, keys: int, **settings: object) -> bool:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("holter_server.store.keys.active_key_count", lambda session: keys)
    return AuthMode(Settings(**settings)).enabled(NoKeys())  # type: ignore[arg-type]


def test_auto_mode_is_open_only_on_loopback_without_keys(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert mode(monkeypatch, 0, host="127.0.0.1") is False
    assert mode(monkeypatch, 1, host="127.0.0.1") is True
    assert mode(monkeypatch, 0, host="0.0.0.0") is True
    assert mode(monkeypatch, 0, host="127.0.0.1", admin_token="t" * 20) is True
    assert mode(monkeypatch, 0, host="0.0.0.0", auth="off") is False
    assert mode(monkeypatch, 0, host="127.0.0.1", auth="on") is True


def test_the_banner_says_when_auth_is_off() -> None:
    assert "auth: off while this service listens on loopback" in AuthMode(Settings(host="127.0.0.1")).describe()
    assert AuthMode(Settings(host="0.0.0.0")).describe().startswith("auth: on")


def required_scope(method: str, path: str) -> str:
    found = match(method, path)
    assert found is not None, (method, path)
    return found[0].scope


def test_routes_get_the_scope_their_users_need() -> None:
    assert required_scope("GET", "/api/v1/health") == "open"
    assert required_scope("POST", "/api/v1/runs/r1/points") == "ingest"
    assert required_scope("GET", "/api/v1/runs/r1") == "read"
    assert required_scope("POST", "/api/v1/runs/r1/annotations") == "read"
    assert required_scope("POST", "/api/v1/channels") == "admin"
    assert required_scope("GET", "/api/v1/deliveries") == "admin"
    assert required_scope("PUT", "/api/v1/projects/p/reference") == "admin"
    assert required_scope("GET", "/api/v1/projects/p/references") == "read"


def test_scopes_nest_admin_over_all_and_keep_ingest_and_read_apart() -> None:
    admin, read, ingest = Principal("admin", None), Principal("read", "p"), Principal("ingest", "p")
    assert admin.allows("ingest") and admin.allows("read") and admin.allows("admin")
    assert read.allows("read") and not read.allows("ingest") and not read.allows("admin")
    assert ingest.allows("ingest") and not ingest.allows("read")
    assert read.sees("p") and not read.sees("q") and not read.sees(None) and admin.sees("q")


def test_keys_are_random_and_only_their_hash_is_kept() -> None:
    full, prefix, stored = new_key()
    assert full.startswith(f"hk_{prefix}_") and stored == hash_secret(full.split("_", 2)[2])
    assert full.split("_", 2)[2] not in stored and new_key()[0] != full


def test_whether_auth_is_on_is_known_without_the_database_between_rechecks(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("holter_server.store.keys.active_key_count", lambda session: 0)
    auto = AuthMode(Settings(host="127.0.0.1"))
    assert auto.known() is None  # due to count the keys: the caller asks `enabled` with a session
    assert auto.enabled(NoKeys()) is False  # type: ignore[arg-type]
    assert auto.known() is False
    assert AuthMode(Settings(auth="on")).known() is True and AuthMode(Settings(auth="off")).known() is False
