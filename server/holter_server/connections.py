"""How `holter serve` holds connections: bounded in number, in header size and in the time a
client may take to send its request headers (slowloris), so half-open sockets cannot take the
service's file descriptors. Bodies have their own timeout in the gate (`api/gate.py`).

At the limit of connections, the one idle longest (a kept-alive connection between requests, or
one that has sent nothing yet) is closed to make room for the new one, as a proxy reuses its idle
keep-alive slots: a client holding a thousand idle sockets (issue 47: `/health` 503 for 40 s) only
loses them, and a kept-alive client whose idle socket goes reconnects. Only when every connection
is in a request does a new one get the 503.

Requests are parsed by httptools (llhttp, in C), not h11: a small batch's request cost about a
tenth of the API's CPU in h11's pure-Python parsing and framing. llhttp has no bound on a header
block of its own, so the protocol below counts one.

Behind a reverse proxy the proxy should bound these too: see docs/deployment.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEADER_BYTES = 64 * 1024  # the most a request line and its headers may hold (uvicorn's h11 default is 16 KiB)
BACKLOG = 512
# uvicorn's own answer to a request it cannot parse
INVALID_REQUEST = "Invalid HTTP request received."


class HeadersTooLargeError(ValueError):
    """A request line and headers past `MAX_HEADER_BYTES` (raised inside the parser: a 400)."""


def guarded_protocol(header_timeout: float, max_connections: int | None = None) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol that closes a connection whose request headers are not
    complete `header_timeout` seconds after its first byte (or after it opened, for the first
    request), answers 400 and closes one whose request line and headers pass `MAX_HEADER_BYTES`,
    and at `max_connections` open closes the connection idle longest to make room for a new one.

    uvicorn has no such timeout: its keep-alive timer is cancelled by any byte received, so a
    client trickling one header byte at a time holds its socket for ever.
    """

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._header_deadline: asyncio.TimerHandle | None = None
            self._in_headers = False  # between a request's first byte and the end of its headers
            self._header_bytes = 0  # the request line and header fields parsed so far
            self._unparsed_bytes = 0  # bytes received while the headers were still incomplete
            self.idle_since: float | None = self.loop.time()  # None while a request is under way
            self._arm()
            if max_connections is not None and len(self.connections) >= max_connections:
                self._make_room()

        def _make_room(self) -> None:
            idle = [c for c in self.connections if c is not self and getattr(c, "idle_since", None) is not None]
            if idle:  # else every other connection is in a request: uvicorn answers this one 503
                oldest = min(idle, key=lambda c: c.idle_since)
                oldest.transport.close()
                # counted out now, not when its close completes: this connection's request, a moment
                # later, is checked against the limit by uvicorn (which discards it again then)
                self.connections.discard(oldest)

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
            # a field still incomplete is buffered by the parser: count what arrived while it is
            if self._in_headers and not self.transport.is_closing():
                self._unparsed_bytes += len(data)
                if self._unparsed_bytes > MAX_HEADER_BYTES:
                    self.send_400_response(INVALID_REQUEST)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.idle_since = None
            self._in_headers = True
            self._header_bytes = self._unparsed_bytes = 0

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)  # ": " and CRLF
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_headers = False
            super().on_headers_complete()

        def _count(self, size: int) -> None:
            self._header_bytes += size
            if self._header_bytes > MAX_HEADER_BYTES:
                # httptools turns it into a parser error, which uvicorn answers 400 and closes
                raise HeadersTooLargeError(f"request headers over {MAX_HEADER_BYTES:,} bytes")

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self.idle_since = self.loop.time()  # kept alive, waiting for its next request

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None
            super().connection_lost(exc)

    return GuardedHttpToolsProtocol


def uvicorn_options(*, header_timeout: float, max_connections: int) -> dict[str, Any]:
    """The uvicorn.run options that bound connections."""
    return {
        "http": guarded_protocol(header_timeout, max_connections),
        "limit_concurrency": max_connections,
        "backlog": BACKLOG,
        # Clients send every second on a kept-alive connection; a short keep-alive makes the server
        # close it just as the next batch goes out (the client retries, but it costs a round trip).
        "timeout_keep_alive": 75,
    }
