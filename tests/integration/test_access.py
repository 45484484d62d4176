"""Access control on a real server with auth on, on SQLite and Postgres: keys are scoped, and a
key for project B gets nothing of project A from any route of the API."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator

import holter
import httpx
import pytest

from tests.conftest import ADMIN_TOKEN
from tests.receivers import Receiver
from tests.servers import ServerProcess


@pytest.fixture(scope="module")
def world(secured: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Project A with a run, its events, a note, a channel, a rule, a delivery and a reference;
    keys of every scope for A and for B."""
    admin = secured.api(key=ADMIN_TOKEN)
    keys = {}
    for project in ("acc-a", "acc-b"):
        for scope in ("ingest", "read", "admin"):
            keys[(project, scope)] = admin.post(
                "/keys", json={"name": f"{project}-{scope}", "scope": scope, "project": project}
            ).json()
    receiver = Receiver().start()
    channel = admin.post(
        "/channels", json={"name": "a-hook", "kind": "webhook", "target": receiver.url, "project": "acc-a"}
    ).json()
    run = holter.init(
        project="acc-a",
        name="secret-run",
        config={"secret-run-knob": 1},
        url=secured.url,
        api_key=keys[("acc-a", "ingest")]["key"],
        spool_dir=tmp_path_factory.mktemp("spool"),
    )
    for step in range(260):
        run.log({"loss": math.nan if step >= 200 else 3.0 - step / 300}, step=step)
    run.finish()
    deadline = time.monotonic() + 30
    while (
        not admin.get("/deliveries", params={"channel_id": channel["id"]}).json()
        or not admin.get(f"/runs/{run.id}/events").json()["data"]
    ):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    event = admin.get(f"/runs/{run.id}/events").json()["data"][0]
    note = admin.post(f"/runs/{run.id}/annotations", json={"author": "ana", "text": "private note"}).json()
    rule = admin.get("/rules", params={"channel_id": channel["id"]}).json()[0]
    delivery = admin.get("/deliveries", params={"channel_id": channel["id"]}).json()[0]
    admin.put("/projects/acc-a/reference", json={"run_id": run.id})
    yield {
        "keys": keys,
        "run_id": run.id,
        "event_id": event["id"],
        "annotation_id": note["id"],
        "channel_id": channel["id"],
        "rule_id": rule["id"],
        "delivery_id": delivery["id"],
        "key_id": keys[("acc-a", "read")]["id"],
        "project": "acc-a",
        "metric": "loss",
        "rank": 0,
        "receiver": receiver,
    }
    receiver.stop()


BODIES = {
    ("POST", "/runs"): {"id": "intruder", "project": "acc-a"},
    ("POST", "/runs/{run_id}/points"): {"metrics": {"loss": {"steps": [999], "values": [0.0]}}},
    ("POST", "/runs/{run_id}/finish"): {"status": "crashed"},
    ("POST", "/runs/{run_id}/ranks/{rank}/beat"): {"step": 1},
    ("PATCH", "/runs/{run_id}"): {"notes": "defaced"},
    ("POST", "/runs/{run_id}/annotations"): {"author": "mallory", "text": "x"},
    ("PATCH", "/runs/{run_id}/annotations/{annotation_id}"): {"author": "ana", "text": "x"},
    ("POST", "/runs/{run_id}/events/{event_id}/acknowledge"): {"by": "mallory"},
    ("POST", "/runs/{run_id}/events/{event_id}/dismiss"): {"by": "mallory", "mute": True},
    ("POST", "/channels"): {"name": "x", "kind": "slack", "target": "http://127.0.0.1:9/x", "project": "acc-a"},
    ("POST", "/rules"): {"channel_id": 0, "name": "x"},
    ("PATCH", "/rules/{rule_id}"): {"enabled": False},
    ("PUT", "/projects/{project}/reference"): {"run_id": "x"},
    ("POST", "/keys"): {"name": "x", "scope": "admin", "project": "acc-a"},
}


def api_routes(server: ServerProcess) -> list[tuple[str, str]]:
    schema = httpx.get(f"{server.url}/openapi.json").json()
    return [
        (method.upper(), path.removeprefix("/api/v1"))
        for path, ops in schema["paths"].items()
        if path.startswith("/api/v1")
        for method in ops
    ]


def fill(path: str, world: dict) -> str:
    return re.sub(r"\{(\w+)(?::path)?\}", lambda m: str(world[m.group(1)]), path)


def test_every_route_refuses_the_other_projects_key(secured: ServerProcess, world: dict) -> None:
    intruder = secured.api(key=world["keys"][("acc-b", "admin")]["key"])
    leaks = []
    for method, path in api_routes(secured):
        if path in ("/health", "/projects"):  # /projects names no project: test_lists_show_...
            continue
        body = dict(BODIES.get((method, path), {}))
        if (method, path) == ("POST", "/rules"):
            body["channel_id"] = world["channel_id"]
        params = (
            {"project": "acc-a"}
            if path in ("/runs", "/events", "/channels", "/levers", "/config-keys")
            else {"run_id": world["run_id"], "run": world["run_id"], "metric": "loss"}
        )
        answer = intruder.request(method, fill(path, world), params=params, json=body or None)
        # The intruder named A's ids itself; a leak is a 2xx or anything of A's content coming back.
        if answer.status_code not in (403, 404) or any(
            secret in answer.text for secret in ("secret-run", "private note", "a-hook")
        ):
            leaks.append((method, path, answer.status_code, answer.text[:120]))
    assert leaks == []


def test_lists_show_a_scoped_key_only_its_own_project(secured: ServerProcess, world: dict) -> None:
    intruder = secured.api(key=world["keys"][("acc-b", "admin")]["key"])
    for path in ("/runs", "/events", "/channels", "/rules", "/deliveries", "/keys", "/projects", "/config-keys"):
        answer = intruder.get(path)
        assert answer.status_code == 200, path
        assert world["run_id"] not in answer.text and "a-hook" not in answer.text and "acc-a" not in answer.text, path
    owner = secured.api(key=world["keys"][("acc-a", "read")]["key"])
    assert [run["id"] for run in owner.get("/runs").json()["data"]] == [world["run_id"]]
    assert [project["name"] for project in owner.get("/projects").json()] == ["acc-a"]
    assert owner.get("/config-keys").json()["keys"] == ["secret-run-knob"]


def test_every_route_but_health_needs_a_key(secured: ServerProcess, world: dict) -> None:
    anonymous = secured.api(key=None)
    for method, path in api_routes(secured):
        answer = anonymous.request(method, fill(path, world), json=BODIES.get((method, path)))
        assert answer.status_code == (200 if path == "/health" else 401), (method, path, answer.status_code)
    assert secured.api(key="hk_deadbeef_not-a-real-key").get("/runs").status_code == 401


def test_scopes_limit_what_a_key_may_do(secured: ServerProcess, world: dict) -> None:
    ingest = secured.api(key=world["keys"][("acc-a", "ingest")]["key"])
    read = secured.api(key=world["keys"][("acc-a", "read")]["key"])
    assert ingest.get(f"/runs/{world['run_id']}").status_code == 403
    assert (
        read.post(f"/runs/{world['run_id']}/points", json=BODIES[("POST", "/runs/{run_id}/points")]).status_code == 403
    )
    assert read.post("/channels", json=BODIES[("POST", "/channels")]).status_code == 403
    assert read.post(f"/runs/{world['run_id']}/annotations", json={"author": "ana", "text": "ok"}).status_code == 201
    assert ingest.post("/runs", json={"id": "ok-run", "project": "acc-a"}).status_code == 200


def test_a_key_is_shown_once_stored_hashed_and_revocable(secured: ServerProcess, world: dict) -> None:
    admin = secured.api(key=ADMIN_TOKEN)
    created = admin.post("/keys", json={"name": "temp", "scope": "read", "project": "acc-a"}).json()
    assert created["key"].startswith(f"hk_{created['prefix']}_")
    listed = admin.get("/keys").text
    assert created["key"] not in listed and created["key"].split("_", 2)[2] not in listed
    temp = secured.api(key=created["key"])
    assert temp.get("/runs").status_code == 200
    assert admin.get("/keys").json()[-1]["last_used_at"] is not None
    admin.delete(f"/keys/{created['id']}")
    assert temp.get("/runs").status_code == 401


def test_a_scoped_admin_cannot_mint_keys_for_another_project(secured: ServerProcess, world: dict) -> None:
    b_admin = secured.api(key=world["keys"][("acc-b", "admin")]["key"])
    assert b_admin.post("/keys", json={"name": "x", "scope": "admin", "project": "acc-a"}).status_code == 403
    assert (
        b_admin.post("/keys", json={"name": "x", "scope": "admin"}).status_code == 403
    )  # every project is more than it has


@pytest.fixture(scope="module")
def other_run(secured: ServerProcess, world: dict, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Project B's own run, logging the same metric as A's."""
    run = holter.init(
        project="acc-b",
        name="b-run",
        url=secured.url,
        api_key=world["keys"][("acc-b", "ingest")]["key"],
        spool_dir=tmp_path_factory.mktemp("spool-b"),
    )
    for step in range(50):
        run.log({"loss": 1.0 + step / 100}, step=step)
    run.finish()
    return run.id


def test_compare_refuses_a_reference_run_of_another_project(
    secured: ServerProcess, world: dict, other_run: str
) -> None:
    intruder = secured.api(key=world["keys"][("acc-b", "read")]["key"])
    answer = intruder.get(f"/runs/{other_run}/compare", params={"metric": "loss", "reference": world["run_id"]})
    assert answer.status_code == 404
    assert "reference" not in answer.json() and "acc-a" not in answer.text


def test_a_run_id_taken_in_another_project_is_refused_without_naming_it(secured: ServerProcess, world: dict) -> None:
    intruder = secured.api(key=world["keys"][("acc-b", "ingest")]["key"])
    answer = intruder.post("/runs", json={"id": world["run_id"], "project": "acc-b"})
    assert answer.status_code == 404  # "unknown", as every other route says of another project's run: not 409 "taken"
    assert answer.json() == {"detail": f"unknown run {world['run_id']!r}"}
    assert "acc-a" not in answer.text


def test_a_rule_without_a_project_on_a_projects_channel_hears_only_that_project(
    secured: ServerProcess, world: dict, tmp_path_factory: pytest.TempPathFactory
) -> None:
    admin = secured.api(key=ADMIN_TOKEN)
    a_admin = secured.api(key=world["keys"][("acc-a", "admin")]["key"])
    # A's admin adds a catch-all rule (no project) to A's channel
    assert (
        a_admin.post(
            "/rules", json={"channel_id": world["channel_id"], "name": "everything", "min_severity": "info"}
        ).status_code
        == 201
    )
    b_receiver = Receiver().start()
    try:
        b_admin = secured.api(key=world["keys"][("acc-b", "admin")]["key"])
        b_channel = b_admin.post(
            "/channels", json={"name": "b-hook", "kind": "webhook", "target": b_receiver.url, "project": "acc-b"}
        ).json()
        run = holter.init(
            project="acc-b",
            name="b-secret-run",
            url=secured.url,
            api_key=world["keys"][("acc-b", "ingest")]["key"],
            spool_dir=tmp_path_factory.mktemp("spool-b2"),
        )
        for step in range(260):
            run.log({"loss": math.nan if step >= 200 else 3.0 - step / 300}, step=step)
        run.finish()
        deadline = time.monotonic() + 30
        while not admin.get("/deliveries", params={"run_id": run.id}).json():
            assert time.monotonic() < deadline, "project B's own channel got no alert"
            time.sleep(0.2)
        # the alerts about B's run went to B's channel, queued together in one transaction, and not
        # to A's (the store's other channels, made by other modules' tests, may hear every project)
        heard = {d["channel_id"] for d in admin.get("/deliveries", params={"run_id": run.id}).json()}
        assert b_channel["id"] in heard and world["channel_id"] not in heard
        assert "b-secret-run" not in a_admin.get("/deliveries").text
    finally:
        b_receiver.stop()


def test_a_rule_for_another_project_on_a_projects_channel_is_refused(secured: ServerProcess, world: dict) -> None:
    admin = secured.api(key=ADMIN_TOKEN)
    answer = admin.post("/rules", json={"channel_id": world["channel_id"], "name": "b on a", "project": "acc-b"})
    assert answer.status_code == 422 and "acc-a" in answer.json()["detail"]


def test_only_the_key_that_wrote_a_note_may_change_it_whatever_author_is_claimed(
    secured: ServerProcess, world: dict
) -> None:
    admin = secured.api(key=ADMIN_TOKEN)
    writer = secured.api(key=world["keys"][("acc-a", "read")]["key"])
    other = secured.api(
        key=admin.post("/keys", json={"name": "a-read-2", "scope": "read", "project": "acc-a"}).json()["key"]
    )
    note = writer.post(f"/runs/{world['run_id']}/annotations", json={"author": "ana", "text": "mine"}).json()
    path = f"/runs/{world['run_id']}/annotations/{note['id']}"
    assert other.patch(path, json={"author": "ana", "text": "defaced"}).status_code == 403
    assert other.delete(path, params={"author": "ana"}).status_code == 403
    assert writer.patch(path, json={"author": "ana", "text": "edited"}).status_code == 200


def alert_image_url(world: dict) -> str:
    """The picture link of the first alert with one that reached the world's receiver."""
    deadline = time.monotonic() + 30
    while not (
        urls := [a["image_url"] for m in world["receiver"].messages() for a in m.json()["alerts"] if a.get("image_url")]
    ):
        assert time.monotonic() < deadline, "no alert with a picture arrived"
        time.sleep(0.2)
    return urls[0]


def test_a_chat_messages_picture_opens_without_a_key_through_its_signed_link_only(
    secured: ServerProcess, world: dict
) -> None:
    image_url = alert_image_url(world)
    picture = httpx.get(image_url)  # as Slack or Discord fetch it: no key
    assert picture.status_code == 200 and picture.headers["content-type"] == "image/png"
    tampered = image_url[:-1] + ("0" if image_url[-1] != "0" else "1")
    assert httpx.get(tampered).status_code == 401
    assert httpx.get(image_url.split("?", 1)[0]).status_code == 401
    query = image_url.split("?", 1)[1]
    assert (
        httpx.get(f"{secured.url}/api/v1/runs/{world['run_id']}?{query}").status_code == 401
    )  # signs that one picture only


def test_a_picture_link_signed_with_the_services_secret_is_refused_once_it_has_expired(
    secured: ServerProcess, world: dict
) -> None:
    from holter_server.alerts import image_links
    from holter_server.store.database import make_engine, make_session_factory, session_scope

    event_id = int(alert_image_url(world).split("/events/", 1)[1].split("/", 1)[0])
    engine = make_engine(secured.database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:

            def link(issued_at: float) -> str:
                return image_links.signed_url(
                    session=session,
                    base_url=secured.url,
                    run_id=world["run_id"],
                    event_id=event_id,
                    ttl=600,
                    issued_at=issued_at,
                )

            fresh, expired = link(time.time()), link(time.time() - 3600)
    finally:
        engine.dispose()
    assert httpx.get(fresh).status_code == 200  # the signature is the service's own ...
    assert httpx.get(expired).status_code == 401  # ... and the link still ends when it says


def spellings(row: int) -> list[str]:
    """Ways int() reads as `row` that are not its one spelling (issue 47: they passed the gate
    as no row and reached the route as that row)."""
    return [f"%2B{row}", f"%20{row}", f"{row}.0", f"0{row}", f"{row}%20"]


def test_another_spelling_of_a_row_id_is_refused_before_any_lookup(secured: ServerProcess, world: dict) -> None:
    intruder = secured.api(key=world["keys"][("acc-b", "admin")]["key"])
    owner = secured.api(key=ADMIN_TOKEN)
    channel, rule, delivery = world["channel_id"], world["rule_id"], world["delivery_id"]
    sent_before = len(world["receiver"].received)
    attempts = [
        *(("POST", f"/channels/{s}/test", None) for s in spellings(channel)),
        *(("DELETE", f"/channels/{s}", None) for s in spellings(channel)),
        *(("PATCH", f"/rules/{s}", {"enabled": False}) for s in spellings(rule)),
        *(("DELETE", f"/rules/{s}", None) for s in spellings(rule)),
        *(("POST", f"/deliveries/{s}/retry", None) for s in spellings(delivery)),
        *(("GET", f"/rules?channel_id={s}", None) for s in spellings(channel)),
    ]
    for method, path, body in attempts:
        answer = intruder.request(method, path, json=body)
        assert answer.status_code == 422, (method, path, answer.status_code, answer.text)
        assert "is not an id" in answer.text
    # the same requests with the owner's own key: refused the same way (one spelling for everyone)
    assert owner.patch(f"/rules/%2B{rule}", json={"enabled": False}).status_code == 422
    (kept,) = [r for r in owner.get("/rules", params={"channel_id": channel}).json() if r["id"] == rule]
    assert kept["enabled"] is True
    assert any(c["id"] == channel for c in owner.get("/channels").json())
    assert len(world["receiver"].received) == sent_before  # no test message reached A's webhook


@pytest.mark.parametrize("spelled", ["{id}", "{id}.0", "true"])
def test_a_rule_names_its_channel_by_a_json_number_only(secured: ServerProcess, world: dict, spelled: str) -> None:
    intruder = secured.api(key=world["keys"][("acc-b", "admin")]["key"])
    value = spelled.format(id=world["channel_id"])
    body = '{"channel_id": ' + (f'"{value}"' if spelled == "{id}" else value) + ', "name": "sneaky"}'
    answer = intruder.post("/rules", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422, answer.text
    owner = secured.api(key=ADMIN_TOKEN)
    assert all(r["name"] != "sneaky" for r in owner.get("/rules", params={"channel_id": world["channel_id"]}).json())
