"""A run's JSON documents (config, summary, pre-flight details) nest at most 64 levels: deeper is
a 422 before anything is stored, and a row stored deeper before the limit existed no longer breaks
a read (issue 47: a config nested 256 levels deep, 1.5 KB, made every list of runs naming it a 500)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from tests.conftest import new_run_id
from tests.servers import InProcessServer


def nested(levels: int) -> Any:
    document: Any = 1
    for _ in range(levels):
        document = {"a": document}
    return document


def post(api: httpx.Client, path: str, body: dict) -> httpx.Response:
    # the client's own json= would refuse nothing; sent as bytes, as a hostile client sends it
    return api.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def test_a_config_nested_deeper_than_64_levels_is_refused_and_the_runs_list_stays(api: httpx.Client) -> None:
    answer = post(api, "/runs", {"project": "deep-docs", "config": nested(256)})
    assert answer.status_code == 422
    assert "the config is nested more than 64 levels deep" in answer.text
    assert post(api, "/runs", {"project": "deep-docs", "config": nested(64)}).status_code == 200
    assert api.get("/runs", params={"project": "deep-docs"}).status_code == 200
    assert api.get("/runs").status_code == 200


def test_a_summary_and_preflight_details_nested_too_deep_are_refused(api: httpx.Client) -> None:
    run_id = new_run_id()
    post(api, "/runs", {"id": run_id, "project": "deep-docs"}).raise_for_status()
    summary = post(api, f"/runs/{run_id}/summary", {"values": {"deep": nested(100)}})
    assert summary.status_code == 422 and "the summary is nested more than 64 levels deep" in summary.text
    check = {"name": "overfit_one_batch", "passed": True, "summary": "ok", "details": nested(100)}
    preflight = post(api, f"/runs/{run_id}/preflight", {"checks": [check]})
    assert preflight.status_code == 422 and "details is nested more than 64 levels deep" in preflight.text
    run = api.get(f"/runs/{run_id}").json()
    assert run["summary"] == {} and run["preflight"] is None  # nothing of them stored


def test_a_run_stored_too_deep_before_the_limit_is_read_with_a_note(server: InProcessServer, api: httpx.Client) -> None:
    run_id = new_run_id()
    post(api, "/runs", {"id": run_id, "project": "deep-old", "config": {"lr": 0.1}}).raise_for_status()
    engine = create_engine(server.database_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as connection:  # as a store written before the limit holds it
        connection.execute(
            text("UPDATE runs SET config = :config, summary = :summary WHERE id = :id"),
            {"config": json.dumps(nested(256)), "summary": json.dumps({"x": nested(300)}), "id": run_id},
        )
    engine.dispose()
    listed = api.get("/runs", params={"project": "deep-old"})
    assert listed.status_code == 200
    (run,) = listed.json()["data"]
    assert run["config"] == {"holter": "this config is nested more than 64 levels deep and is not shown"}
    assert "more than 64 levels" in run["summary"]["holter"]
    assert api.get("/runs").status_code == 200
    assert api.get(f"/runs/{run_id}").status_code == 200
    assert api.get(f"/runs/{run_id}/postmortem").status_code == 200
    assert api.get(f"/runs/{run_id}/report.html").status_code == 200
