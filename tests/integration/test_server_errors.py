"""Inputs that were a 500 are a clear 4xx (or stored as their names), on SQLite and Postgres,
through a real server: a signed picture link's odd expiry without a key, a step past the
64-bit range in a comparison, bare NaN or 1e400 in a run's config or summary."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, new_run_id
from tests.servers import ServerProcess


@pytest.mark.parametrize("expires", ["²", "٣" * 10, "9" * 5_000, "-1", "1e9"])
def test_a_picture_link_with_an_odd_expiry_is_refused_as_unsigned(secured: ServerProcess, expires: str) -> None:
    with secured.api(key=ADMIN_TOKEN) as admin:
        run_id = new_run_id()
        admin.post("/runs", json={"id": run_id, "project": "errors"}).raise_for_status()
    answer = httpx.get(
        f"{secured.url}/api/v1/runs/{run_id}/events/1/sparkline.png", params={"expires": expires, "sig": "0" * 64}
    )
    assert answer.status_code == 401


@pytest.mark.parametrize("param", ["at_step", "start", "end"])
def test_a_comparison_step_past_64_bits_is_a_422(api: httpx.Client, param: str) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "errors"}).raise_for_status()
    params = {"metric": "loss", "a": f"run:{run_id}", "b": f"run:{run_id}", param: str(2**63)}
    if param != "at_step":
        params.update({"start": "0", "end": "10", param: str(2**63)})
    answer = api.get("/compare", params=params)
    assert answer.status_code == 422
    assert param in answer.text


def test_a_comparison_at_infinite_tokens_is_a_422(api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "errors"}).raise_for_status()
    answer = api.get(
        "/compare", params={"metric": "loss", "a": f"run:{run_id}", "b": f"run:{run_id}", "at_tokens": "inf"}
    )
    assert answer.status_code == 422


@pytest.mark.parametrize(("token", "name"), [("NaN", "NaN"), ("1e400", "Infinity"), ("-Infinity", "-Infinity")])
def test_a_bare_non_finite_number_in_a_config_is_kept_by_its_name(api: httpx.Client, token: str, name: str) -> None:
    run_id = new_run_id()
    body = f'{{"id": "{run_id}", "project": "errors", "config": {{"lr": {token}, "deep": [{{"x": {token}}}]}}}}'
    created = api.post("/runs", content=body, headers={"content-type": "application/json"})
    assert created.status_code == 200, created.text
    assert api.get(f"/runs/{run_id}").json()["config"] == {"lr": name, "deep": [{"x": name}]}


@pytest.mark.parametrize(("token", "name"), [("NaN", "NaN"), ("1e400", "Infinity")])
def test_a_bare_non_finite_number_in_a_summary_is_kept_by_its_name(api: httpx.Client, token: str, name: str) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "errors"}).raise_for_status()
    answer = api.post(
        f"/runs/{run_id}/summary",
        content=f'{{"values": {{"best": {token}}}}}',
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["summary"] == {"best": name}
    assert api.get(f"/runs/{run_id}").json()["summary"] == {"best": name}
