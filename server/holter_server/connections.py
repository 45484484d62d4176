"""How `holter serve` holds connections: bounded in number, in header size and in the time a
client may take to send its request headers (slowloris), so half-open sockets cannot take the
service's file descriptors. Bodies have their own timeout in the gate (`api/gate.py`).

Behind a reverse proxy the proxy should bound these too: see docs/deployment.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEADER_BYTES = 64 * 1024  # h11's limit on a request's header block (uvicorn's default is 16 KiB)
BACKLOG = 512


def guarded_protocol(header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol that closes a connection whose request headers are not complete
    `header_timeout` seconds after its first byte (or after it opened, for the first request).

    uvicorn has no such timeout: its keep-alive timer is cancelled by any byte received, so a
    client trickling one header byte at a time holds its socket for ever.
    """

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._header_deadline: asyncio.TimerHandle | None = None
            self._arm()

        def _arm(self) -> None:
            self._header_deadline = self.loop.call_later(header_timeout, self._headers_late, self.cycle)

        def _headers_late(self, cycle_when_armed: Any) -> None:
            self._header_deadline = None
            if self.cycle is cycle_when_armed and not self.transport.is_closing():
                self.transport.close()  # no request since: the headers are late

        def data_received(self, data: bytes) -> None:
            # the first byte of a next request on a kept-alive connection starts its clock
            if self._header_deadline is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()
            super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None
            super().connection_lost(exc)

    return GuardedH11Protocol


def uvicorn_options(*, header_timeout: float, max_connections: int) -> dict[str, Any]:
    """The uvicorn.run options that bound connections."""
    return {
        "http": guarded_protocol(header_timeout),
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
        "limit_concurrency": max_connections,
        "backlog": BACKLOG,
        # Clients send every second on a kept-alive connection; a short keep-alive makes the server
        # close it just as the next batch goes out (the client retries, but it costs a round trip).
        "timeout_keep_alive": 75,
    }
