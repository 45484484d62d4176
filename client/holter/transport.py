"""A small keep-alive HTTP client on `http.client` (the client may not depend on httpx)."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Any


class TransportError(Exception):
    """The service could not be reached or failed (network error or 5xx): worth retrying."""


class RejectedError(Exception):
    """The service refused the request (4xx): retrying the same request will not help."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


class Transport:
    """One persistent connection to the service, reopened after any failure."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 10.0) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"Holter URL must look like http://host:port, got {url!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout)
        return self._conn

    def close(self) -> None:
        """Drop the connection; the next request opens a new one."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, body: bytes | None = None) -> Any:
        """Send one request and return the decoded JSON answer.

        Raises TransportError when it is worth trying again, RejectedError when it is not.
        """
        try:
            conn = self._connection()
            conn.request(method, self._prefix + path, body=body, headers=self._headers)
            response = conn.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise TransportError(f"{method} {path}: {exc!r}") from exc
        status = response.status
        try:
            decoded = json.loads(payload) if payload else None
        except ValueError:
            decoded = payload[:500].decode(errors="replace")
        if status >= 500 or status in (408, 429):
            self.close()
            raise TransportError(f"{method} {path}: HTTP {status}: {decoded}")
        if status >= 400:
            detail = decoded.get("detail", decoded) if isinstance(decoded, dict) else decoded
            raise RejectedError(status, detail)
        return decoded
