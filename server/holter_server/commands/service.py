"""Reaching a running service from a command: its URL and the caller's key."""

from __future__ import annotations

import os

from holter.run import DEFAULT_URL


def service_url(given: str | None) -> str:
    """The `--url` given, else $HOLTER_URL, else the default local address; no trailing slash."""
    return (given or os.environ.get("HOLTER_URL") or DEFAULT_URL).rstrip("/")


def auth_headers() -> dict[str, str]:
    """The Authorization header for $HOLTER_API_KEY, when it is set."""
    key = os.environ.get("HOLTER_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}
