"""Notes, acknowledgements, dismissals and reference choices are signed by the key that made
them (its name), not by a name the body claims; with auth off by "local". A real server with
auth on (keys of one project) and the shared one with auth off."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, new_run_id
from tests.servers import ServerProcess


@pytest.fixture(scope="module")
def signed(secured: ServerProcess) -> Iterator[dict[str, str]]:
    """A run with a spike event in project `signed`, and a read key named `ana`."""
    with secured.api(key=ADMIN_TOKEN) as admin:
        key = admin.post("/keys", json={"name": "ana", "scope": "read", "project": "signed"}).json()["key"]
        run_id = new_run_id()
        admin.post("/runs", json={"id": run_id, "project": "signed"}).raise_for_status()
        loss = [2.0 - i / 100 for i in range(200)]
        loss[120] = 40.0
        admin.post(
            f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": list(range(200)), "values": loss}}}
        ).raise_for_status()
        event_id = wait_for_event(admin, run_id)
    yield {"key": key, "run": run_id, "event": str(event_id)}


def wait_for_event(api: httpx.Client, run_id: str) -> int:
    deadline = time.monotonic() + 60
    while not (events := api.get(f"/runs/{run_id}/events").json()["data"]):
        assert time.monotonic() < deadline, "no event was recorded"
        time.sleep(0.3)
    return events[0]["id"]


def test_a_note_is_signed_by_its_keys_name_whatever_author_the_body_claims(
    secured: ServerProcess, signed: dict
) -> None:
    with secured.api(key=signed["key"]) as api:
        note = api.post(f"/runs/{signed['run']}/annotations", json={"author": "the CEO", "text": "ship it"}).json()
        assert note["author"] == "ana"
        edited = api.patch(
            f"/runs/{signed['run']}/annotations/{note['id']}", json={"author": "the CEO", "text": "edited"}
        ).json()
    assert (edited["author"], edited["text"]) == ("ana", "edited")


def test_a_note_written_with_the_admin_token_is_signed_admin(secured: ServerProcess, signed: dict) -> None:
    with secured.api(key=ADMIN_TOKEN) as api:
        note = api.post(f"/runs/{signed['run']}/annotations", json={"text": "from the admin"}).json()
    assert note["author"] == "admin"


@pytest.mark.parametrize("decision", ["acknowledge", "dismiss"])
def test_a_decision_on_an_event_is_signed_by_its_keys_name(secured: ServerProcess, signed: dict, decision: str) -> None:
    with secured.api(key=signed["key"]) as api:
        answer = api.post(
            f"/runs/{signed['run']}/events/{signed['event']}/{decision}", json={"by": "someone else", "reason": "r"}
        )
    assert (answer.status_code, answer.json()["status_by"]) == (200, "ana")


def test_a_reference_choice_is_signed_by_its_keys_name(secured: ServerProcess, signed: dict) -> None:
    with secured.api(key=ADMIN_TOKEN) as admin:
        key = admin.post("/keys", json={"name": "bo", "scope": "admin", "project": "signed"}).json()["key"]
    with secured.api(key=key) as api:
        answer = api.put("/projects/signed/reference", json={"run_id": signed["run"], "by": "not bo"})
    assert (answer.status_code, answer.json()["set_by"]) == (200, "bo")


def test_with_auth_off_a_note_is_signed_local(api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "signed-off"}).raise_for_status()
    note = api.post(f"/runs/{run_id}/annotations", json={"author": "ana", "text": "t"}).json()
    assert note["author"] == "local"
