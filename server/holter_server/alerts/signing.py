"""HMAC-SHA256 signatures for the generic webhook.

Header `X-Holter-Signature: t=<unix seconds>,v1=<hex>` where the hex digest is
HMAC-SHA256(secret, "<t>.<raw body>"). A receiver recomputes it over the raw body it got,
compares in constant time, and rejects timestamps older than a few minutes (replays).
"""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "X-Holter-Signature"


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The signature header value for `body`."""
    moment = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{moment}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={moment},v1={digest}"


def verify(secret: str, body: bytes, header: str, *, tolerance_s: int = 300, now: int | None = None) -> bool:
    """True when `header` is a valid, recent signature of `body` (what a receiver runs)."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        moment = int(parts["t"])
    except (ValueError, KeyError):
        return False
    current = int(time.time()) if now is None else now
    if abs(current - moment) > tolerance_s:
        return False
    expected = sign(secret, body, moment).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))
