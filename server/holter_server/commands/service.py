"""Reaching a running service from a command: its URL and the caller's key."""

from __future__ import annotations

import json
import os
import urllib.request

# The client's default (holter/run.py DEFAULT_URL), where `holter serve` listens by default.
DEFAULT_URL = "http://127.0.0.1:8765"


def service_url(given: str | None) -> str:
    """The `--url` given, else $HOLTER_URL, else the default local address; no trailing slash."""
    return (given or os.environ.get("HOLTER_URL") or DEFAULT_URL).rstrip("/")


def auth_headers() -> dict[str, str]:
    """The Authorization header for $HOLTER_API_KEY, when it is set."""
    key = os.environ.get("HOLTER_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def service_is_up(url: str, timeout: float = 1.0) -> bool:
    """True when a Holter service answers its health check at `url`."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/health", timeout=timeout) as response:
            return json.load(response).get("status") == "ok"
    except (OSError, ValueError):
        return False
