"""Annotations, tags and notes through the API, on SQLite and Postgres."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import new_run_id


@pytest.fixture
def run_id(api: httpx.Client) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "notes", "tags": ["base"]}).raise_for_status()
    return run_id


def test_a_range_note_is_stored_and_listed_for_everyone(api: httpx.Client, run_id: str) -> None:
    created = api.post(
        f"/runs/{run_id}/annotations",
        json={"author": "ana", "text": "lr warm-up ends", "metric": "loss", "start_step": 100, "end_step": 200},
    )
    assert created.status_code == 201
    (note,) = api.get(f"/runs/{run_id}/annotations").json()["data"]
    assert (note["author"], note["text"], note["metric"], note["start_step"], note["end_step"]) == (
        "local",  # auth off: the machine's one person, whatever name the body gives
        "lr warm-up ends",
        "loss",
        100,
        200,
    )
    assert api.get(f"/runs/{run_id}/annotations", params={"metric": "grad_norm"}).json()["count"] == 0


def test_with_auth_off_the_machines_person_edits_and_deletes_every_note(api: httpx.Client, run_id: str) -> None:
    note = api.post(f"/runs/{run_id}/annotations", json={"text": "first"}).json()
    assert note["author"] == "local"
    edited = api.patch(f"/runs/{run_id}/annotations/{note['id']}", json={"text": "second"}).json()
    assert (edited["text"], edited["author"]) == ("second", "local")
    assert api.delete(f"/runs/{run_id}/annotations/{note['id']}").status_code == 204
    assert api.get(f"/runs/{run_id}/annotations").json()["count"] == 0


def test_a_note_with_a_backwards_range_is_422(api: httpx.Client, run_id: str) -> None:
    answer = api.post(f"/runs/{run_id}/annotations", json={"author": "a", "text": "t", "start_step": 9, "end_step": 3})
    assert answer.status_code == 422


def test_a_comment_on_an_unknown_event_is_404(api: httpx.Client, run_id: str) -> None:
    assert (
        api.post(f"/runs/{run_id}/annotations", json={"author": "a", "text": "t", "event_id": 987654}).status_code
        == 404
    )


def test_tags_and_notes_are_editable_and_tags_filter_the_run_list(api: httpx.Client, run_id: str) -> None:
    updated = api.patch(f"/runs/{run_id}", json={"tags": ["base", "ablation-7"], "notes": "bf16, no grad clip"}).json()
    assert (updated["tags"], updated["notes"]) == (["base", "ablation-7"], "bf16, no grad clip")
    tagged = api.get("/runs", params={"project": "notes", "tag": "ablation-7"}).json()["data"]
    assert [run["id"] for run in tagged] == [run_id]
    partial = api.get("/runs", params={"project": "notes", "tag": "ablation"}).json()["data"]
    assert run_id not in [run["id"] for run in partial]  # a tag matches whole, not as a prefix
