"""The gate in front of every API route, on a real server: sizes and keys are checked before any
body is read, slow bodies and slow headers are cut off without holding a database connection,
and with auth off a web page elsewhere cannot write."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from holter_server.connections import MAX_HEADER_BYTES

from tests.conftest import migrated_sqlite, new_run_id
from tests.servers import InProcessServer
from tests.waiting import wait_until

ADMIN_TOKEN = "gate-admin-token-0123456789abcdef"
TIMEOUTS: dict[str, object] = {"body_timeout": 1.0, "header_timeout": 1.0}


@pytest.fixture(scope="module")
def secured(store_url: str) -> Iterator[InProcessServer]:
    # the dashboard mounted: its callback socket is behind the gate too
    settings = {"auth": "on", "admin_token": ADMIN_TOKEN, **TIMEOUTS}
    server = InProcessServer(store_url, settings=settings, dashboard=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def open_server(store_url: str) -> Iterator[InProcessServer]:
    server = InProcessServer(store_url, settings=TIMEOUTS).start()
    yield server
    server.stop()


def raw_request(server: InProcessServer, head: str, body: bytes = b"", *, wait: float = 5.0) -> bytes:
    """Send `head` (and `body`) on a raw socket and return what the server answers within `wait` seconds."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait) as sock:
        sock.sendall(head.encode() + body)
        try:
            return sock.recv(65536)
        except TimeoutError:
            return b""


def test_a_huge_declared_body_without_a_key_is_refused_before_it_is_sent(secured: InProcessServer) -> None:
    head = (
        "POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
        f"{256 * 2**20}\r\n\r\n"
    )
    started = time.monotonic()
    answer = raw_request(secured, head)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert time.monotonic() - started < 3


def test_the_key_is_checked_before_the_body_is_read(secured: InProcessServer) -> None:
    head = (
        "POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
        "1000\r\n\r\n"
    )
    answer = raw_request(secured, head)  # the body never comes
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_a_json_body_over_its_route_limit_is_413_even_when_undeclared(secured: InProcessServer) -> None:
    with secured.api(key=ADMIN_TOKEN) as api:
        chunks = (b"x" * 65536 for _ in range(40))  # 2.5 MiB, chunked: no Content-Length
        answer = api.post("/keys", content=chunks, headers={"content-type": "application/json"})
    assert answer.status_code == 413


def test_stalled_uploads_hold_no_database_connection(secured: InProcessServer) -> None:
    with secured.api(key=ADMIN_TOKEN) as api:
        key = api.post("/keys", json={"name": "stall", "scope": "ingest"}).json()["key"]
        run_id = new_run_id()
        api.post("/runs", json={"id": run_id, "project": "gate"}).raise_for_status()
    head = (
        f"POST /api/v1/runs/{run_id}/points HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
    )
    sockets = []
    try:
        for _ in range(40):  # more than the pool holds (Postgres 30, SQLite 15)
            sock = socket.create_connection(("127.0.0.1", secured.port), timeout=5)
            sock.sendall(head.encode())
            sockets.append(sock)
        time.sleep(0.5)
        started = time.monotonic()
        with secured.api(key=ADMIN_TOKEN, timeout=20) as api:
            assert api.get("/health").status_code == 200
            assert api.get("/runs").status_code == 200
        assert time.monotonic() - started < 5
        # and each stalled upload is cut off with a 408 once it has paused for a second
        assert sockets[0].recv(4096).startswith(b"HTTP/1.1 408")
    finally:
        for sock in sockets:
            sock.close()


def test_a_connection_that_never_finishes_its_headers_is_closed(open_server: InProcessServer) -> None:
    with socket.create_connection(("127.0.0.1", open_server.port), timeout=0.5) as sock:
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        closed = False
        while not closed and time.monotonic() - started < 8:
            try:  # slowloris: a header byte now and then, never the end of the headers
                sock.sendall(b"X")
                closed = sock.recv(1) == b""
            except TimeoutError:
                continue
            except OSError:
                closed = True
        assert closed and time.monotonic() - started < 4


def _answer_to(port: int, raw: bytes) -> bytes:
    """What the service answers to `raw` sent on a fresh connection, until it closes or answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := sock.recv(4096)):
            answer += chunk
        return answer


@pytest.mark.parametrize("shape", ["one field", "many fields", "never ends"])
def test_a_header_block_over_the_limit_is_answered_400_and_closed(open_server: InProcessServer, shape: str) -> None:
    start = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    over = MAX_HEADER_BYTES + 1024
    blocks = {
        "one field": start + b"X-Pad: " + b"a" * over + b"\r\n\r\n",
        "many fields": start + b"".join(b"X-%d: %s\r\n" % (i, b"b" * 1000) for i in range(over // 1000)) + b"\r\n",
        "never ends": start + b"X-Pad: " + b"a" * over,  # no end of the field: the parser holds it
    }
    assert _answer_to(open_server.port, blocks[shape]).startswith(b"HTTP/1.1 400")
    # a block just under the limit is served
    under = start + b"X-Pad: " + b"a" * (MAX_HEADER_BYTES - len(start) - 64) + b"\r\n\r\n"
    assert _answer_to(open_server.port, under).startswith(b"HTTP/1.1 200")


def test_an_idle_connection_that_sends_nothing_is_closed(open_server: InProcessServer) -> None:
    with socket.create_connection(("127.0.0.1", open_server.port), timeout=5) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""
        assert time.monotonic() - started < 4


def test_with_auth_off_points_must_be_json_or_msgpack(open_server: InProcessServer) -> None:
    with open_server.api() as api:
        run_id = new_run_id()
        api.post("/runs", json={"id": run_id, "project": "gate"}).raise_for_status()
        body = b'{"metrics": {"loss": {"steps": [0], "values": [1.0]}}}'
        answer = api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "text/plain"})
        assert answer.status_code == 415
        assert (
            api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/json"}).status_code
            == 200
        )


def test_with_auth_off_a_cross_site_write_is_refused(open_server: InProcessServer) -> None:
    with open_server.api() as api:
        answer = api.post("/runs", json={"project": "gate"}, headers={"origin": "https://evil.example"})
        assert answer.status_code == 403
        assert api.post("/runs", json={"project": "gate"}, headers={"sec-fetch-site": "cross-site"}).status_code == 403
        assert api.post("/runs", json={"project": "gate"}, headers={"origin": open_server.url}).status_code == 200


def test_with_auth_off_a_foreign_host_name_is_refused(open_server: InProcessServer) -> None:
    # DNS rebinding: a page on rebind.example whose name now resolves to 127.0.0.1
    answer = httpx.get(f"{open_server.url}/api/v1/runs", headers={"host": "rebind.example"})
    assert answer.status_code == 421
    assert (
        httpx.get(f"{open_server.url}/api/v1/runs", headers={"host": f"localhost:{open_server.port}"}).status_code
        == 200
    )


def websocket_handshake(server: InProcessServer, path: str, cookie: str | None = None) -> bytes:
    head = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nOrigin: {server.url}\r\nUpgrade: "
        "websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        + (f"Cookie: holter_key={cookie}\r\n" if cookie else "")
        + "\r\n"
    )
    return raw_request(server, head)


def test_the_dashboards_callback_socket_needs_sign_in_when_auth_is_on(secured: InProcessServer) -> None:
    pytest.importorskip("holter_dashboard")
    answer = websocket_handshake(secured, "/_dash-ws-callback")
    assert not answer.startswith(b"HTTP/1.1 101"), answer[:200]
    assert answer.startswith(b"HTTP/1.1 403")
    with secured.api(key=ADMIN_TOKEN) as api:
        key = api.post("/keys", json={"name": "dash", "scope": "read"}).json()["key"]
    assert websocket_handshake(secured, "/_dash-ws-callback", cookie=key).startswith(b"HTTP/1.1 101")


def test_connections_past_the_limit_get_503_and_the_service_answers_again_once_they_close(tmp_path: Path) -> None:
    limit = 8
    server = InProcessServer(
        migrated_sqlite(tmp_path / "limit.db"), settings={"header_timeout": 30.0, "max_connections": limit}
    ).start()
    try:
        holders = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(limit)]
        for sock in holders:
            sock.sendall(
                b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            )  # headers never finished: each holds its connection
        time.sleep(0.5)
        # the API's own health route (a bare /health is only the dashboard's catch-all page)
        assert httpx.get(f"{server.url}/api/v1/health", timeout=5).status_code == 503
        for sock in holders:
            sock.close()
        assert wait_until(lambda: httpx.get(f"{server.url}/api/v1/health", timeout=5).status_code == 200, timeout=10)
    finally:
        server.stop()


def test_health_answers_while_a_thousand_idle_sockets_are_open(tmp_path: Path) -> None:
    # issue 47: one client without a key, 1,000 sockets that send nothing (reconnecting when
    # closed), held the service at its limit of connections: /health answered 503 for 40 s
    server = InProcessServer(migrated_sqlite(tmp_path / "idle.db")).start()  # 1,000 connections, as served
    idle: list[socket.socket] = []
    try:
        idle = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(1_000)]
        time.sleep(0.5)
        answers = [httpx.get(f"{server.url}/api/v1/health", timeout=5).status_code for _ in range(20)]
        assert answers == [200] * 20
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_health_answers_while_a_thousand_kept_alive_sockets_idle_after_a_request(tmp_path: Path) -> None:
    server = InProcessServer(migrated_sqlite(tmp_path / "kept.db")).start()
    kept: list[socket.socket] = []
    try:
        for _ in range(1_000):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            kept.append(sock)
        for sock in kept[:50]:  # the first ones were answered, and are kept alive
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        answers = [httpx.get(f"{server.url}/api/v1/health", timeout=5).status_code for _ in range(36)]
        assert answers == [200] * 36
    finally:
        for sock in kept:
            sock.close()
        server.stop()
