"""Resent requests are no-ops, never a 500, on each store: identical creates, tripwire reports and
job alerts sent at the same moment from many connections (the race a retry after a client timeout
meets, not only a resend after the first answer)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

from tests.conftest import new_run_id
from tests.servers import ServerProcess

SENDERS = 12


def at_once(server: ServerProcess, send: Callable[[httpx.Client], httpx.Response]) -> list[httpx.Response]:
    """`send` from SENDERS threads, each on its own connection, released together."""
    clients = [server.api(timeout=60) for _ in range(SENDERS)]
    for client in clients:  # connections open before the barrier: the requests race, not the handshakes
        client.get("/health").raise_for_status()
    gate = threading.Barrier(SENDERS)
    answers: list[httpx.Response | BaseException] = [RuntimeError("not sent")] * SENDERS

    def one(i: int) -> None:
        gate.wait()
        try:
            answers[i] = send(clients[i])
        except BaseException as exc:  # noqa: BLE001 - reported below with the others
            answers[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(SENDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for client in clients:
        client.close()
    failed = [a for a in answers if not isinstance(a, httpx.Response)]
    assert not failed, failed
    return [a for a in answers if isinstance(a, httpx.Response)]


def test_identical_creates_sent_together_make_one_run(server: ServerProcess, api: httpx.Client) -> None:
    run_id = new_run_id()
    body = {"id": run_id, "project": "retries", "name": "r", "config": {"lr": 0.1}, "tags": ["a"]}
    answers = at_once(server, lambda c: c.post("/runs", json=body))
    assert [a.status_code for a in answers] == [200] * SENDERS, [a.text for a in answers if a.status_code != 200]
    assert {a.json()["id"] for a in answers} == {run_id}
    run = api.get(f"/runs/{run_id}").json()
    assert run["config"] == {"lr": 0.1} and run["tags"] == ["a"] and run["status"] == "running"
    assert [r["id"] for r in api.get("/runs", params={"project": "retries"}).json()["data"]].count(run_id) == 1


def test_a_resent_create_of_a_new_run_is_not_a_resume(api: httpx.Client) -> None:
    run_id = new_run_id()
    body = {"id": run_id, "project": "retries", "config": {"lr": 0.1}}
    assert api.post("/runs", json=body).json()["resumed"] is False
    # the client's first answer timed out; its retry repeats the create of a run that has logged nothing
    again = api.post("/runs", json=body).json()
    assert again["resumed"] is False and again["last_step"] is None


def test_identical_tripwire_reports_sent_together_make_one_event(server: ServerProcess, api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "retries"}).raise_for_status()
    report = {"step": 12, "forward": {"name": "blocks.1.attn", "value": "NaN"}}
    answers = at_once(server, lambda c: c.post(f"/runs/{run_id}/nonfinite", json=report))
    assert [a.status_code for a in answers] == [200] * SENDERS, [a.text for a in answers if a.status_code != 200]
    assert len({a.json()["id"] for a in answers}) == 1
    events = api.get(f"/runs/{run_id}/events", params={"kind": "first_nonfinite"}).json()["data"]
    assert len(events) == 1 and "blocks.1.attn" in events[0]["summary"]


def test_identical_job_alerts_sent_together_make_one_event(server: ServerProcess, api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "retries"}).raise_for_status()
    alert = {"title": "loss is odd", "text": "look", "severity": "warning", "step": 3, "key": "k" * 32}
    answers = at_once(server, lambda c: c.post(f"/runs/{run_id}/alerts", json=alert))
    assert [a.status_code for a in answers] == [200] * SENDERS, [a.text for a in answers if a.status_code != 200]
    assert len({a.json()["id"] for a in answers}) == 1
    assert len(api.get(f"/runs/{run_id}/events", params={"kind": "alert"}).json()["data"]) == 1
