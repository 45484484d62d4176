"""A period that is Holter's own rhythm is no finding (issue 46): a throughput dip every 4 steps
of a job at 4 steps a second beats with the client's once-a-second send, and is not named; the
same dip at a pace that puts it at 1.6 s is the job's, and is named a sawtooth."""

from __future__ import annotations

import time

import httpx

from tests.waiting import wait_until


def post_throughput(api: httpx.Client, *, steps_per_second: float) -> str:
    run_id = api.post("/runs", json={"project": "cadence"}).json()["id"]
    steps = list(range(600))
    values = [700.0 if step % 4 == 3 else 1000.0 + (step * 37 % 11) for step in steps]
    times = [1_700_000_000.0 + step / steps_per_second for step in steps]
    metrics = {"holter/throughput/tokens_per_s": {"steps": steps, "values": values, "times": times}}
    api.post(f"/runs/{run_id}/points", json={"metrics": metrics}).raise_for_status()
    return run_id


def sawtooths(api: httpx.Client, run_id: str) -> list[dict]:
    return api.get(f"/runs/{run_id}/events", params={"kind": "sawtooth"}).json()["data"]


def test_a_period_at_the_clients_send_is_no_finding_and_one_elsewhere_is(api: httpx.Client) -> None:
    at_the_send = post_throughput(api, steps_per_second=4.0)  # a dip every 1.0 s
    the_jobs = post_throughput(api, steps_per_second=2.5)  # a dip every 1.6 s
    (named,) = wait_until(lambda: sawtooths(api, the_jobs) or None, timeout=60)
    assert named["period"] == 4.0
    time.sleep(2.0)  # detection has read both runs' points by now (posted together, read in one pass)
    assert sawtooths(api, at_the_send) == []
