"""Bad input anywhere in the API answers a 4xx that names the problem, never a 500, and stores
nothing: text no store can hold (NUL, lone surrogates) in names, configs, tags, notes, notes on
runs and queries; integers past 64 bits; an API key that is not ASCII. On SQLite and Postgres."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, new_run_id
from tests.servers import ServerProcess


@pytest.fixture
def run_id(api: httpx.Client) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "bad-input", "tags": ["keep"]}).raise_for_status()
    return run_id


def send(api: httpx.Client, method: str, path: str, body: bytes) -> httpx.Response:
    return api.request(method, path, content=body, headers={"content-type": "application/json"})


# JSON spells NUL as \u0000 and a lone surrogate as \ud800; both decode, neither can be stored.
UNSTORABLE = {"NUL": (b"\\u0000", "a NUL character"), "lone surrogate": (b"\\ud800", "a lone surrogate (\\ud800)")}


@pytest.mark.parametrize("escape,says", UNSTORABLE.values(), ids=UNSTORABLE.keys())
@pytest.mark.parametrize(
    "where,template",
    [
        ("body.name", b'{"id": "%(new)s", "project": "bad-input", "name": "a%(x)sb"}'),
        ("body.config.key", b'{"id": "%(new)s", "project": "bad-input", "config": {"key": "a%(x)sb"}}'),
        ("body.config (a key)", b'{"id": "%(new)s", "project": "bad-input", "config": {"a%(x)sb": 1}}'),
        (
            "body.config.nested.deep[1]",
            b'{"id": "%(new)s", "project": "bad-input", "config": {"nested": {"deep": [1, "a%(x)s"]}}}',
        ),
        ("body.tags[0]", b'{"id": "%(new)s", "project": "bad-input", "tags": ["a%(x)sb"]}'),
    ],
)
def test_unstorable_text_in_a_new_run_is_422_and_creates_nothing(
    api: httpx.Client, escape: bytes, says: str, where: str, template: bytes
) -> None:
    new = new_run_id()
    answer = send(api, "POST", "/runs", template % {b"new": new.encode(), b"x": escape})
    assert answer.status_code == 422
    assert answer.json()["detail"] == f"{where}: the text holds {says}, which cannot be stored"
    assert api.get(f"/runs/{new}").status_code == 404


@pytest.mark.parametrize("escape,says", UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_unstorable_text_in_notes_tags_and_annotations_is_422_and_changes_nothing(
    api: httpx.Client, run_id: str, escape: bytes, says: str
) -> None:
    assert send(api, "PATCH", f"/runs/{run_id}", b'{"notes": "x%sy"}' % escape).status_code == 422
    assert send(api, "PATCH", f"/runs/{run_id}", b'{"tags": ["x%sy"]}' % escape).status_code == 422
    note = send(api, "POST", f"/runs/{run_id}/annotations", b'{"author": "ana", "text": "x%sy"}' % escape)
    assert note.status_code == 422 and says in note.json()["detail"] and "body.text" in note.json()["detail"]
    author = send(api, "POST", f"/runs/{run_id}/annotations", b'{"author": "a%sa", "text": "fine"}' % escape)
    assert author.status_code == 422
    run = api.get(f"/runs/{run_id}").json()
    assert run["notes"] is None and run["tags"] == ["keep"]
    assert api.get(f"/runs/{run_id}/annotations").json()["data"] == []


def test_a_surrogate_pair_is_text_like_any_other(api: httpx.Client) -> None:
    new = new_run_id()
    answer = send(
        api, "POST", "/runs", b'{"id": "%s", "project": "bad-input", "name": "\\ud83d\\ude80 launch"}' % new.encode()
    )
    assert answer.status_code == 200 and answer.json()["name"] == "\U0001f680 launch"


@pytest.mark.parametrize(
    "path",
    [
        "/runs/a%00b",
        "/runs/a%00b/points",
        "/runs/a%00b/metrics/loss/points",
        "/runs?project=a%00b",
        "/runs?tag=%00",
        "/events?run_id=a%00b",
        "/series?run=a%00b&metric=loss",
        "/projects/a%00b/references",
        "/levers?project=a%00b",
    ],
)
def test_nul_in_a_path_or_query_is_422_naming_where(api: httpx.Client, path: str) -> None:
    method = "POST" if path == "/runs/a%00b/points" else "GET"
    answer = api.request(method, path, json={"metrics": {}} if method == "POST" else None)
    assert answer.status_code == 422
    assert "a NUL character" in answer.json()["detail"] and (
        "path." in answer.json()["detail"] or "query." in answer.json()["detail"]
    )


@pytest.mark.parametrize(
    "path",
    [
        "/runs?offset=9223372036854775808",
        "/runs?offset=100000000000000000000",
        "/events?offset=9223372036854775808",
        "/runs/{run}/metrics/loss/points?start=9223372036854775808",
        "/runs/{run}/metrics/loss/points?end=99999999999999999999",
        "/series?run={run}&metric=loss&start=9223372036854775808",
    ],
)
def test_integers_past_64_bits_in_a_query_are_422(api: httpx.Client, run_id: str, path: str) -> None:
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [1], "values": [1.0]}}}).raise_for_status()
    answer = api.get(path.format(run=run_id))
    assert answer.status_code == 422 and "less than or equal to 9223372036854775807" in str(answer.json()["detail"])


def test_a_note_on_a_step_past_64_bits_is_422(api: httpx.Client, run_id: str) -> None:
    answer = api.post(f"/runs/{run_id}/annotations", json={"author": "ana", "text": "far", "start_step": 2**63})
    assert answer.status_code == 422 and api.get(f"/runs/{run_id}/annotations").json()["data"] == []


def test_a_validation_error_on_nan_input_is_422_not_a_failure_to_answer(api: httpx.Client, run_id: str) -> None:
    # FastAPI's own answer echoes the input, which JSON cannot carry when it is NaN
    answer = send(api, "POST", f"/runs/{run_id}/annotations", b'{"author": "ana", "text": "x", "start_step": NaN}')
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "start_step"]


@pytest.mark.parametrize("token", ["clé-é", "ключ", "token\u00ff"])
def test_an_api_key_outside_ascii_is_401(secured: ServerProcess, token: str) -> None:
    answer = httpx.get(f"{secured.url}/api/v1/runs", headers={"Authorization": f"Bearer {token}".encode()})
    assert answer.status_code == 401 and "unknown or revoked" in answer.json()["detail"]
    assert (
        httpx.get(f"{secured.url}/api/v1/runs", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).status_code == 200
    )
