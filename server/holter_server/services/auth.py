"""Who is calling, and what they may do.

Keys have a scope and a project (or all projects):
* `ingest` — what a training job needs: create or resume runs, send points, heartbeat, finish;
* `read` — what a person at the dashboard needs: read everything, annotate, acknowledge or
  dismiss events, tag and note runs, re-analyse;
* `admin` — everything, including alert channels and rules, reference runs and keys.
A key for project A neither reads nor writes project B: routes that name a run, channel, rule
or delivery are checked against the key's project, and lists are filtered to it.

Auth is on when `HOLTER_AUTH=on`, off when `off`, and in the default `auto` mode on unless the
service listens on loopback and no key exists (zero set-up for one person on one machine).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from holter_server.settings import Settings
from holter_server.store import alerts as alerts_store
from holter_server.store import keys as keys_store
from holter_server.store import runs as runs_store
from holter_server.store.models import ApiKeyRow
from holter_server.wire import UNSTORABLE


@dataclass(frozen=True)
class Principal:
    """The caller: its scope, the one project it is limited to (None: every project), and the
    name its notes and decisions are signed with (the key's name; "local" with auth off)."""

    scope: str
    project: str | None
    key_id: int | None = None
    name: str = "local"

    def allows(self, needed: str) -> bool:
        """Admin may do anything; read may not ingest; ingest may only ingest."""
        if self.scope == "admin":
            return True
        return self.scope == needed

    def sees(self, project: str | None) -> bool:
        """True when the caller may touch `project` (a None project: shared, admin-wide things)."""
        return self.project is None or self.project == project


OPEN = Principal(scope="admin", project=None)  # auth off: the one person on this machine, "local"
ADMIN_TOKEN_NAME = "admin"  # what notes written with HOLTER_ADMIN_TOKEN are signed with


def new_key() -> tuple[str, str, str]:
    """A new key: (the full key to show once, its prefix, the hash to store)."""
    prefix, secret = secrets.token_hex(4), secrets.token_urlsafe(24)
    return f"hk_{prefix}_{secret}", prefix, hash_secret(secret)


def hash_secret(secret: str) -> str:
    # Keys are 192 random bits: a fast hash is enough (no dictionary to defend against).
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(*, session: Session, name: str, scope: str, project: str | None) -> tuple[ApiKeyRow, str]:
    """Store a new key; returns the row and the full key, which is never stored or shown again."""
    full, prefix, secret_hash = new_key()
    return keys_store.add_key(
        session=session, name=name, prefix=prefix, secret_hash=secret_hash, scope=scope, project=project
    ), full


def list_keys(*, session: Session) -> Sequence[ApiKeyRow]:
    """Every API key, revoked ones too, oldest first (never their secrets: only hashes are stored)."""
    return keys_store.list_keys(session=session)


def get_key(*, session: Session, key_id: int) -> ApiKeyRow | None:
    """The key with this id, or None."""
    return keys_store.get_key(session=session, key_id=key_id)


def revoke_key(*, session: Session, key: ApiKeyRow) -> ApiKeyRow:
    """Revoke `key`: from now on it authenticates nothing."""
    return keys_store.revoke(session=session, key=key)


def authenticate(*, session: Session, token: str, settings: Settings) -> Principal | None:
    """The principal of a presented key, or None when it is unknown, malformed or revoked."""
    # as bytes: compare_digest refuses text with characters outside ASCII, which anyone may send
    if settings.admin_token and hmac.compare_digest(token.encode(), settings.admin_token.encode()):
        return Principal(scope="admin", project=None, name=ADMIN_TOKEN_NAME)
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != "hk" or UNSTORABLE.search(parts[1]):
        return None
    key = keys_store.key_by_prefix(session=session, prefix=parts[1])
    if key is None or key.revoked_at is not None or not hmac.compare_digest(key.secret_hash, hash_secret(parts[2])):
        return None
    keys_store.touch(session=session, key=key)
    return Principal(scope=key.scope, project=key.project, key_id=key.id, name=key.name)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AuthMode:
    """Whether auth is on, re-checked every few seconds in `auto` mode (creating the first key turns it on)."""

    RECHECK_S = 5.0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._checked_at = 0.0
        self._keys_exist = False

    def enabled(self, session: Session) -> bool:
        return self._enabled(lambda: keys_store.active_key_count(session=session))

    def known(self) -> bool | None:
        """Whether auth is on, when that needs no database read now (None: ask `enabled`)."""
        return self._enabled(lambda: None)

    def _enabled(self, count_keys: Callable[[], int | None]) -> bool | None:
        mode = self.settings.auth
        if mode in ("on", "off"):
            return mode == "on"
        if not is_loopback(self.settings.host) or self.settings.admin_token:
            return True
        if time.monotonic() - self._checked_at > self.RECHECK_S:
            count = count_keys()
            if count is None:
                return None
            self._keys_exist = count > 0
            self._checked_at = time.monotonic()
        return self._keys_exist

    def describe(self) -> str:
        """One line for the start-up banner."""
        mode = self.settings.auth
        if mode == "off":
            return "auth: off (HOLTER_AUTH=off): anyone who can reach this port can read and write"
        if mode == "on" or not is_loopback(self.settings.host) or self.settings.admin_token:
            return "auth: on: every API call needs a key (holter keys create)"
        return (
            "auth: off while this service listens on loopback and has no API keys (zero set-up for one person); "
            "creating a key turns it on"
        )


# --- whose is it --------------------------------------------------------------------------

NOT_FOUND = object()  # the thing does not exist: the route itself answers 404
# A row id's one spelling, the gate's and the routes' alike: plain ASCII digits, no sign, no leading
# zero, no fraction, no space ("+1", "01", "1.0" and " 1" name no row, however int() reads them).
_ROW_ID = re.compile(r"[1-9][0-9]{0,9}")
MAX_ROW_ID = 2**31 - 1


ROW_ID_RULE = "a row id is a whole number from 1 to 2147483647 in plain digits (no sign, leading zero or fraction)"


def row_id(value: str) -> int | None:
    """`value` as a row id (events, channels, rules, deliveries, keys), or None when it is not one's
    spelling (`_ROW_ID`) or no row can have it."""
    if _ROW_ID.fullmatch(value) is None or int(value) > MAX_ROW_ID:
        return None
    return int(value)


def projects_of(*, session: Session, kind: str, values: Iterable[str]) -> dict[str, str | object | None]:
    """The project each run, channel, rule, delivery or key belongs to (None: every project), or
    NOT_FOUND. Runs are read in one statement (their ids and projects only, never their
    configs); a rule's and a delivery's project is their channel's."""
    wanted = list(dict.fromkeys(values))
    if kind == "run":
        found = runs_store.projects_of_runs(session=session, run_ids=wanted)
        return {value: found.get(value, NOT_FOUND) for value in wanted}
    return {value: _project_of_row(session, kind, value) for value in wanted}


def project_of(*, session: Session, kind: str, value: str) -> str | object | None:
    """The project a run, channel, rule, delivery or key belongs to (None: every project), or NOT_FOUND."""
    return projects_of(session=session, kind=kind, values=[value])[value]


def _project_of_row(session: Session, kind: str, value: str) -> str | object | None:
    found = row_id(value)
    if found is None:
        return NOT_FOUND  # the route answers a malformed id with 422
    if kind == "key":
        key = keys_store.get_key(session=session, key_id=found)
        return NOT_FOUND if key is None else key.project
    channel_id: int | None = found
    if kind == "rule":
        rule = alerts_store.get_rule(session=session, rule_id=found)
        channel_id = rule.channel_id if rule else None
    elif kind == "delivery":
        delivery = alerts_store.get_delivery(session=session, delivery_id=found)
        channel_id = delivery.channel_id if delivery else None
    channel = alerts_store.get_channel(session=session, channel_id=channel_id) if channel_id is not None else None
    return NOT_FOUND if channel is None else channel.project
