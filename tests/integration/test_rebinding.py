"""DNS rebinding through the dashboard, on a real server with auth off (the loopback default): a
page on another name that now resolves to 127.0.0.1 sends its own `Host`, and must get nothing
from the dashboard's pages, callbacks, assets or callback socket, as it gets nothing from the
API (421). The callbacks are the dashboard's own (their payloads built from
`/_dash-dependencies`, as the browser builds them)."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest

from tests.conftest import new_run_id
from tests.servers import ServerProcess

pytest.importorskip("holter_dashboard")

EVIL = "rebind.example"


def host(server: ServerProcess, name: str) -> dict[str, str]:
    return {"host": f"{name}:{server.port}", "origin": f"http://{name}:{server.port}"}


def callback_payload(server: ServerProcess, trigger: str, values: dict[str, Any]) -> dict[str, Any]:
    """The body the browser posts to `/_dash-update-component` when `trigger` (id.property)
    changes, with `values` for the callback's inputs and states (None for the rest)."""
    dependencies = httpx.get(f"{server.url}/_dash-dependencies", timeout=30).json()
    [callback] = [d for d in dependencies if trigger in (f"{i['id']}.{i['property']}" for i in d["inputs"])][:1]
    outputs = [
        {"id": part.rsplit(".", 1)[0], "property": part.rsplit(".", 1)[1]}
        for part in callback["output"].strip(".").split("...")
    ]

    def filled(items: list[dict[str, str]]) -> list[dict[str, Any]]:
        return [{**item, "value": values.get(f"{item['id']}.{item['property']}")} for item in items]

    return {
        "output": callback["output"],
        "outputs": outputs if callback["output"].startswith("..") else outputs[0],
        "inputs": filled(callback["inputs"]),
        "state": filled(callback["state"]),
        "changedPropIds": [trigger],
    }


ADD_CHANNEL = {
    "ch-add.n_clicks": 1,
    "ch-name.value": "rebound",
    "ch-kind.value": "webhook",
    "ch-target.value": "http://127.0.0.1:9/rebound",
    "ch-defaults.checked": False,
    "alerts-version.data": 0,
}


def channel_names(server: ServerProcess) -> list[str]:
    with server.api() as api:
        return [channel["name"] for channel in api.get("/channels").json()]


def test_the_add_channel_callback_under_a_foreign_host_is_refused_and_adds_nothing(server: ServerProcess) -> None:
    payload = callback_payload(server, "ch-add.n_clicks", ADD_CHANNEL)
    answer = httpx.post(f"{server.url}/_dash-update-component", json=payload, headers=host(server, EVIL), timeout=30)
    assert answer.status_code == 421, answer.text[:300]
    assert "rebound" not in channel_names(server)


def test_the_add_channel_callback_under_the_services_own_host_works(server: ServerProcess) -> None:
    payload = callback_payload(server, "ch-add.n_clicks", {**ADD_CHANNEL, "ch-name.value": "at-home"})
    answer = httpx.post(
        f"{server.url}/_dash-update-component", json=payload, headers=host(server, "127.0.0.1"), timeout=30
    )
    assert answer.status_code == 200, answer.text[:300]
    assert "at-home" in channel_names(server)


def test_the_runs_table_callback_under_a_foreign_host_reads_nothing(server: ServerProcess) -> None:
    run_id = new_run_id()
    with server.api() as api:
        api.post("/runs", json={"id": run_id, "project": "rebinding", "name": "secret-run"}).raise_for_status()
    payload = callback_payload(server, "runs-tick.n_intervals", {"runs-tick.n_intervals": 1})
    answer = httpx.post(f"{server.url}/_dash-update-component", json=payload, headers=host(server, EVIL), timeout=30)
    assert answer.status_code == 421
    assert "secret-run" not in answer.text
    at_home = httpx.post(
        f"{server.url}/_dash-update-component", json=payload, headers=host(server, "localhost"), timeout=30
    )
    assert at_home.status_code == 200 and "secret-run" in at_home.text


# a fixed run id: parameters must be the same in every pytest-xdist worker's collection
@pytest.mark.parametrize("path", ["/", "/alerts", "/runs/t0123456789ab", "/_dash-layout", "/_dash-dependencies"])
def test_pages_and_layouts_under_a_foreign_host_are_refused(server: ServerProcess, path: str) -> None:
    answer = httpx.get(f"{server.url}{path}", headers=host(server, EVIL), timeout=30)
    assert answer.status_code == 421
    assert httpx.get(f"{server.url}{path}", headers=host(server, "127.0.0.1"), timeout=30).status_code == 200


def test_assets_under_a_foreign_host_are_refused(server: ServerProcess) -> None:
    index = httpx.get(f"{server.url}/", timeout=30).text
    asset = index.split('src="', 2)[1].split('"', 1)[0]  # a script the page loads (Dash's own, or the dashboard's)
    assert httpx.get(f"{server.url}{asset}", timeout=30).status_code == 200
    assert httpx.get(f"{server.url}{asset}", headers=host(server, EVIL), timeout=30).status_code == 421


def handshake(server: ServerProcess, name: str) -> bytes:
    head = (
        f"GET /_dash-ws-callback HTTP/1.1\r\nHost: {name}:{server.port}\r\nOrigin: http://{name}:{server.port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head.encode())
        return sock.recv(65536)


def test_the_callback_socket_under_a_foreign_host_is_refused(server: ServerProcess) -> None:
    answer = handshake(server, EVIL)
    assert not answer.startswith(b"HTTP/1.1 101"), answer[:200]
    assert answer.split(b" ", 2)[1] in (b"403", b"421")
    assert handshake(server, "127.0.0.1").startswith(b"HTTP/1.1 101")


@pytest.mark.parametrize("sent", ["127.0.0.1:1@evil.example", "localhost:1, evil.example", "127.0.0.1 evil.example"])
def test_a_host_header_no_browser_sends_is_refused(server: ServerProcess, sent: str) -> None:
    # issue 47: a Host of a loopback name followed by more passed the check as that loopback name
    for path in ("/api/v1/runs", "/"):
        answer = httpx.get(f"{server.url}{path}", headers={"host": sent}, timeout=30)
        assert answer.status_code == 421, (path, answer.status_code)
    assert httpx.get(f"{server.url}/api/v1/runs", headers={"host": f"127.0.0.1:{server.port}"}).status_code == 200
