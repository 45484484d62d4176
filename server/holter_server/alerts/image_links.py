"""Signed, expiring links to an event's chart picture, for chat messages.

Slack and Discord fetch an alert's image without any key of ours, while every other read needs
one: the link carries its expiry and an HMAC of (run, event, expiry) under a secret the service
made for itself (`service_secrets`), so it opens that one picture until it expires and nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from urllib.parse import quote, urlencode

from sqlalchemy.orm import Session

from holter_server.store import secrets as secrets_store

SECRET_NAME = "image_links"
# An expiry as the links carry it: ASCII digits, a Unix time (str.isdigit() also takes "²", and
# int() refuses text of thousands of digits: both were a 500 before the signature was looked at).
_EXPIRES = re.compile(r"[0-9]{1,12}")


def _signature(key: str, run_id: str, event_id: str, expires: int) -> str:
    message = f"{run_id}\n{event_id}\n{expires}".encode()
    return hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def signed_url(
    *, session: Session, base_url: str, run_id: str, event_id: int, ttl: float, issued_at: float | None = None
) -> str:
    """The picture's URL, valid for `ttl` seconds from `issued_at` (the alert's time: a retried
    message carries the very same URL, so receivers see the same body)."""
    expires = int((issued_at or time.time()) + ttl)
    signature = _signature(secrets_store.secret(session=session, name=SECRET_NAME), run_id, str(event_id), expires)
    query = urlencode({"expires": expires, "sig": signature})
    return f"{base_url.rstrip('/')}/api/v1/runs/{quote(run_id, safe='')}/events/{event_id}/sparkline.png?{query}"


def verify(
    *, session: Session, run_id: str, event_id: str, expires: str, signature: str, now: float | None = None
) -> bool:
    """True when the link's signature is ours and it has not expired."""
    if _EXPIRES.fullmatch(expires) is None or not signature or int(expires) < (now or time.time()):
        return False
    expected = _signature(secrets_store.secret(session=session, name=SECRET_NAME), run_id, event_id, int(expires))
    return hmac.compare_digest(expected.encode(), signature.encode())


def ensure_secret(*, session: Session) -> None:
    """Make the signing secret at start-up, so no request has to."""
    secrets_store.secret(session=session, name=SECRET_NAME)
