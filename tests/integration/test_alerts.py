"""Alerts end to end, on SQLite and Postgres: a real service, the real client, and real HTTP
receivers that imitate each chat channel (down for a while, 429, slow)."""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import holter
import httpx
import jsonschema
import pytest
from holter_server.alerts.signing import verify

from tests.chat_schemas import SCHEMAS
from tests.conftest import own_store
from tests.receivers import Receiver
from tests.servers import InProcessServer, ServerProcess
from tests.waiting import wait_until

SECRET = "test-signing-secret-0123456789"


@pytest.fixture(scope="module")
def alert_server(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {
        "HOLTER_STALL_AFTER": "2",
        "HOLTER_STALL_CHECK_INTERVAL": "0.2",
        "HOLTER_ALERT_GIVE_UP_AFTER": "4",
        "HOLTER_PUBLIC_URL": "http://holter.example:8765",
    }
    folder = tmp_path_factory.mktemp("alerts")
    server = ServerProcess(own_store(store_url, folder), env=env, log_path=folder / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def api(alert_server: ServerProcess) -> Iterator[httpx.Client]:
    with alert_server.api() as client:
        yield client


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver().start()
    yield hook
    hook.stop()


@pytest.fixture
def project() -> str:
    return f"alerts-{uuid.uuid4().hex[:8]}"


def statuses(api: httpx.Client, channel_id: int) -> list[str]:
    return [d["status"] for d in api.get("/deliveries", params={"channel_id": channel_id}).json()]


def add_channel(api: httpx.Client, receiver: Receiver, project: str, kind: str = "webhook", **extra: object) -> dict:
    body = {"name": f"{kind}-{project}", "kind": kind, "target": receiver.url, "project": project, **extra}
    if kind == "webhook" and "signing_secret" not in extra:
        body["signing_secret"] = SECRET
    answer = api.post("/channels", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def diverge(url: str, project: str, spool: Path, *, nan_from: int = 200, steps: int = 260) -> holter.Run:
    """A run whose loss goes NaN at `nan_from`."""
    run = holter.init(project=project, name="diverging", url=url, spool_dir=spool)
    for step in range(steps):
        run.log({"loss": math.nan if step >= nan_from else 3.0 - step / 300}, step=step)
    run.finish()
    return run


def test_a_divergence_reaches_a_signed_webhook_once_with_its_evidence(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    add_channel(api, receiver, project)
    run = diverge(alert_server.url, project, spool_dir)
    wait_until(lambda: len(receiver.messages()) >= 1)
    time.sleep(2)  # more detection passes over the growing divergence: no second message
    (message,) = receiver.messages()
    assert verify(SECRET, message.body, message.headers["x-holter-signature"])
    payload = message.json()
    jsonschema.validate(payload, SCHEMAS["webhook"])
    (alert,) = payload["alerts"]
    assert (alert["project"], alert["run_id"], alert["metric"], alert["kind"], alert["severity"]) == (
        project,
        run.id,
        "loss",
        "divergence",
        "critical",
    )
    assert "NaN" in alert["summary"] and "200" in alert["summary"] and alert["start_step"] == 200
    assert alert["link"].startswith(f"http://holter.example:8765/runs/{run.id}?metrics=loss&start=")
    assert alert["sparkline"] and "×" in alert["sparkline"]
    assert (
        "/sparkline.png?expires=" in alert["image_url"]
        and message.headers["idempotency-key"] == payload["idempotency_key"]
    )


@pytest.mark.parametrize("kind", ["slack", "discord", "teams"])
def test_each_chat_channel_gets_its_documented_payload(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path, kind: str
) -> None:
    add_channel(api, receiver, project, kind=kind)
    diverge(alert_server.url, project, spool_dir)
    wait_until(lambda: len(receiver.messages()) >= 1)
    (message,) = receiver.messages()
    jsonschema.validate(message.json(), SCHEMAS[kind])
    assert "NaN" in message.body.decode()


def test_the_curve_picture_in_an_alert_is_served(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    add_channel(api, receiver, project)
    diverge(alert_server.url, project, spool_dir)
    wait_until(lambda: len(receiver.messages()) >= 1)
    image_url = receiver.messages()[0].json()["alerts"][0]["image_url"]
    png = httpx.get(image_url.replace("http://holter.example:8765", alert_server.url))
    assert png.headers["content-type"] == "image/png" and png.content.startswith(b"\x89PNG")


def test_an_outage_delays_the_alert_but_never_loses_it(
    alert_server: ServerProcess, api: httpx.Client, project: str, spool_dir: Path
) -> None:
    receiver = Receiver()  # not started: the port refuses connections
    channel = add_channel(api, receiver, project)
    diverge(alert_server.url, project, spool_dir)
    wait_until(
        lambda: any(
            d["attempts"] >= 1 and d["last_error"]
            for d in api.get("/deliveries", params={"channel_id": channel["id"]}).json()
        )
    )
    (pending,) = api.get("/deliveries", params={"channel_id": channel["id"]}).json()
    assert pending["status"] == "pending"
    receiver.start()
    try:
        wait_until(lambda: statuses(api, channel["id"]) == ["delivered"])
        assert len(receiver.messages()) == 1
    finally:
        receiver.stop()


def test_a_429_waits_as_long_as_retry_after_says(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    receiver.answers = [(429, {"Retry-After": "2"})]
    add_channel(api, receiver, project)
    diverge(alert_server.url, project, spool_dir)
    wait_until(lambda: len(receiver.messages()) == 2)
    first, second = receiver.messages()
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    assert first.body == second.body or first.json()["alerts"] == second.json()["alerts"]


def test_a_slow_receiver_still_gets_its_alert_once(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    receiver.delay = 3.0
    channel = add_channel(api, receiver, project)
    diverge(alert_server.url, project, spool_dir)
    wait_until(lambda: statuses(api, channel["id"]) == ["delivered"])
    assert len(receiver.messages()) == 1


def test_an_undeliverable_alert_ends_failed_and_can_be_retried(
    alert_server: ServerProcess, api: httpx.Client, project: str, spool_dir: Path
) -> None:
    receiver = Receiver()  # down for longer than the server's give-up time (4 s)
    channel = add_channel(api, receiver, project)
    diverge(alert_server.url, project, spool_dir)
    wait_until(lambda: statuses(api, channel["id"]) == ["failed"], timeout=60)
    (failed,) = api.get("/deliveries", params={"channel_id": channel["id"], "status": "failed"}).json()
    assert failed["last_error"]
    receiver.start()
    try:
        assert api.post(f"/deliveries/{failed['id']}/retry").json()["status"] == "pending"
        wait_until(lambda: len(receiver.messages()) == 1)
    finally:
        receiver.stop()


def test_a_burst_of_events_goes_out_as_one_message(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    channel = add_channel(api, receiver, project, default_rules=False)
    api.post(
        "/rules", json={"channel_id": channel["id"], "name": "everything", "min_severity": "info", "cooldown_s": 0}
    ).raise_for_status()
    run = holter.init(project=project, url=alert_server.url)
    for step in range(300):
        # three problems with nothing in common (one NaN's divergences would be one incident, one alert)
        run.log(
            {
                "loss": math.nan if step >= 250 else 2.0,
                "grad_norm": 40.0 if step == 60 else 1.0 + 0.01 * (step % 5),
                "act_norm/layer.0": 30.0 if step == 150 else 1.0 + 0.01 * (step % 3),
            },
            step=step,
        )
    run.finish()
    wait_until(lambda: len(receiver.messages()) >= 1)
    time.sleep(1.5)
    alerts = [a for m in receiver.messages() for a in m.json()["alerts"]]
    assert len(alerts) >= 3 and len(receiver.messages()) < len(alerts)


def test_within_the_cooldown_alerts_wait_and_go_out_together(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    channel = add_channel(api, receiver, project, default_rules=False)
    api.post(
        "/rules",
        json={
            "channel_id": channel["id"],
            "name": "spikes",
            "kinds": ["spike"],
            "min_severity": "info",
            "cooldown_s": 10,
        },
    ).raise_for_status()
    run = holter.init(project=project, url=alert_server.url, flush_interval=0.1)
    for step in range(400):
        run.log({"grad_norm": 50.0 if step in (100, 200, 300) else 1.0 + 0.01 * (step % 5)}, step=step)
        if step == 150:  # the first spike's alert is out, and its cooldown begins, before the others are logged
            run.flush()
            wait_until(lambda: len(receiver.messages()) == 1, timeout=30)
        if step == 250:  # the second and third spikes are read apart, both inside the cooldown
            run.flush()
            time.sleep(1.0)
    run.finish()
    wait_until(lambda: sum(len(m.json()["alerts"]) for m in receiver.messages()) == 3, timeout=40)
    assert len(receiver.messages()) == 2  # the first at once, the other two together after the cooldown


def test_a_stalled_run_alerts_and_its_resumption_follows_up(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str
) -> None:
    add_channel(api, receiver, project)
    run_id = f"stall-{uuid.uuid4().hex[:8]}"
    api.post("/runs", json={"id": run_id, "project": project})
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [1], "values": [2.0]}}})
    wait_until(lambda: len(receiver.messages()) == 1)
    assert receiver.messages()[0].json()["alerts"][0]["kind"] == "run_stalled"
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [2], "values": [2.0]}}})
    wait_until(lambda: len(receiver.messages()) == 2)
    resolved = receiver.messages()[1].json()
    assert resolved["type"] == "holter.resolved" and resolved["alerts"][0]["kind"] == "run_resumed"
    api.post(f"/runs/{run_id}/finish", json={"status": "finished"})


def test_a_threshold_rule_fires_once_at_the_first_crossing(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    channel = add_channel(api, receiver, project, default_rules=False)
    api.post(
        "/rules",
        json={
            "channel_id": channel["id"],
            "name": "acc too low",
            "metric_pattern": "accuracy",
            "threshold_op": "below",
            "threshold_value": 0.5,
        },
    ).raise_for_status()
    run = holter.init(project=project, url=alert_server.url)
    for step in range(100):
        run.log({"accuracy": 0.9 if step < 60 else 0.3}, step=step)
    run.finish()
    wait_until(lambda: len(receiver.messages()) == 1)
    time.sleep(1.5)
    (message,) = receiver.messages()
    alert = message.json()["alerts"][0]
    assert (alert["kind"], alert["start_step"]) == ("threshold", 60) and "below 0.5" in alert["summary"]


def test_secrets_are_never_returned(api: httpx.Client, receiver: Receiver, project: str) -> None:
    secret_url = receiver.url + "?token=T0P-SECRET-TOKEN-abcdef"
    created = api.post(
        "/channels", json={"name": "s", "kind": "slack", "target": secret_url, "project": project}
    ).json()
    listing = api.get("/channels", params={"project": project}).text
    for text in (str(created), listing):
        assert "T0P-SECRET" not in text and SECRET not in text
    assert created["target"].startswith("http://127.0.0.1/…")


def test_a_test_message_goes_out_now_and_reports_failure(api: httpx.Client, receiver: Receiver, project: str) -> None:
    channel = add_channel(api, receiver, project, kind="discord")
    assert api.post(f"/channels/{channel['id']}/test").json() == {"status": "delivered"}
    jsonschema.validate(receiver.messages()[0].json(), SCHEMAS["discord"])
    receiver.answers = [(500, {})]
    failed = api.post(f"/channels/{channel['id']}/test")
    assert failed.status_code == 502 and "500" in failed.json()["detail"]


def test_bad_channels_and_rules_are_422(api: httpx.Client, project: str) -> None:
    assert api.post("/channels", json={"name": "x", "kind": "slack", "target": "ftp://nope"}).status_code == 422
    assert api.post("/channels", json={"name": "x", "kind": "pager", "target": "http://x"}).status_code == 422
    assert api.post("/rules", json={"channel_id": 1, "name": "t", "threshold_op": "above"}).status_code == 422
    assert api.post("/rules", json={"channel_id": 999999, "name": "t"}).status_code == 404


def test_alerts_go_out_exactly_once_through_a_service_restart(store_url: str, tmp_path: Path, spool_dir: Path) -> None:
    receiver = Receiver(delay=2.0).start()  # slow: the kill lands while the webhook request is in flight
    server = ServerProcess(own_store(store_url, tmp_path), log_path=tmp_path / "server.log").start()
    project = f"alerts-restart-{uuid.uuid4().hex[:6]}"
    try:
        api = server.api()
        add_channel(api, receiver, project)
        diverge(server.url, project, spool_dir)
        wait_until(lambda: len(receiver.messages()) >= 1)
        server.kill()
        server.start()
        time.sleep(4)  # the restarted dispatcher finds the delivery still pending and sends it again
        keys = [m.headers["idempotency-key"] for m in receiver.messages()]
        assert len(set(keys)) == 1  # a resend after the crash carries the same key: the receiver keeps one
        deliveries = [d for d in api.get("/deliveries").json() if d["idempotency_key"] == keys[0]]
        assert [d["status"] for d in deliveries] == ["delivered"]
    finally:
        server.stop()
        receiver.stop()


def test_two_services_on_one_sqlite_file_send_an_alert_once(tmp_path: Path, spool_dir: Path) -> None:
    """SQLite has no row locks: only the service holding the file's background lock dispatches."""
    receiver = Receiver(delay=1.0).start()  # slow: a second dispatcher would find the delivery still pending
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first = ServerProcess(url, log_path=tmp_path / "first.log").start()
    second = ServerProcess(url, log_path=tmp_path / "second.log").start()
    project = f"alerts-shared-{uuid.uuid4().hex[:6]}"
    try:
        with first.api() as api:
            add_channel(api, receiver, project)
            diverge(second.url, project, spool_dir)
            wait_until(lambda: len(receiver.messages()) >= 1)
            time.sleep(3)  # time enough for a second dispatcher to send it again
            assert len(receiver.messages()) == 1
            assert [d["status"] for d in api.get("/deliveries").json()] == ["delivered"]
    finally:
        second.stop()
        first.stop()
        receiver.stop()


def test_a_default_service_refuses_channels_pointing_at_its_own_network(store_url: str) -> None:
    # in this process: the refusal is the API's answer, with no process of its own to look at
    server = InProcessServer(store_url, settings={"allow_private_webhooks": False}).start()
    try:
        answer = httpx.post(
            f"{server.url}/api/v1/channels", json={"name": "x", "kind": "slack", "target": "http://127.0.0.1:9/hook"}
        )
        assert answer.status_code == 422 and "private or loopback" in answer.json()["detail"]
    finally:
        server.stop()


def test_the_cli_manages_channels_rules_and_deliveries(
    alert_server: ServerProcess, receiver: Receiver, project: str
) -> None:
    import subprocess
    import sys

    def holter_cli(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "holter.cli", "alerts", "--url", alert_server.url, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    added = holter_cli("add-channel", "cli-hook", "webhook", receiver.url, "--project", project, "--secret", SECRET)
    channel_id = added.split()[1]
    assert project in holter_cli("channels", "--project", project) and receiver.url not in holter_cli("channels")
    assert "delivered" in holter_cli("test", channel_id)
    assert verify(SECRET, receiver.messages()[0].body, receiver.messages()[0].headers["x-holter-signature"])
    holter_cli("add-rule", channel_id, "loss spikes", "--metric", "loss*", "--kind", "spike", "--cooldown", "60")
    rules = holter_cli("rules", "--channel-id", channel_id)
    assert "loss spikes" in rules and "divergence and NaN" in rules  # the defaults came with the channel
    listed = holter_cli("deliveries", "--channel-id", channel_id).splitlines()
    assert len(listed) == 2 and "test" in listed[1] and "delivered" in listed[1]  # the test message is on record


def test_a_detector_event_reaches_the_formatter_as_the_detector_made_it(tmp_path: Path) -> None:
    """The event a detector returns is the event an alert carries: stored, queued and read back
    from the outbox, only its details made JSON-safe (NaN by name)."""
    from holter_server.alerts import formatters
    from holter_server.alerts.message import stored_alert
    from holter_server.detect import classify_series
    from holter_server.nonfinite import json_safe_tree
    from holter_server.services import alerting, detection
    from holter_server.services.alerting import with_links
    from holter_server.store import alerts as alerts_store
    from holter_server.store import runs as runs_store
    from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade

    url = f"sqlite:///{tmp_path / 'holter.db'}"
    upgrade(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    steps = list(range(300))
    (event,) = [
        e
        for e in classify_series(steps, [math.nan if s >= 200 else 3.0 - s / 300 for s in steps], metric="loss")
        if e.kind == "divergence"
    ]
    event.details["peak"] = math.inf  # a non-finite detail: stored and carried by name
    with session_scope(factory) as session:
        runs_store.create_or_resume_run(session=session, run_id="r", project="p", name="baseline", config={}, tags=[])
        channel = alerts_store.add_channel(
            session=session, name="c", kind="slack", project="p", target="http://127.0.0.1:9/hook", signing_secret=None
        )
        alerting.add_default_rules(session=session, channel_id=channel.id, project="p")
        detection.record_event(session=session, run_id="r", key=event.event_id, event=event, muted=False)
    with session_scope(factory) as session:
        (delivery,) = alerts_store.list_deliveries(
            session=session, channel_id=channel.id, status=None, run_id="r", limit=10
        )
        sent = with_links(stored_alert(delivery.alert), "http://holter.local:8765")
    engine.dispose()
    assert sent.event == dataclasses.replace(event, details=json_safe_tree(event.details))
    assert sent.event.details["peak"] == "Infinity"
    assert (sent.project, sent.run_id, sent.run_name, sent.event_id) == ("p", "r", "baseline", delivery.event_id)
    section = formatters.slack([sent], "alert")["blocks"][1]
    assert section["text"]["text"] == f"*CRITICAL* · {formatters.slack_text(event.summary)}"


def test_two_rules_matching_one_event_send_one_message_naming_it_once(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    channel = add_channel(api, receiver, project, default_rules=False)
    for name in ("divergences", "anything critical"):
        rule = {"channel_id": channel["id"], "name": name, "min_severity": "critical", "cooldown_s": 0}
        if name == "divergences":
            rule["kinds"] = ["divergence"]
        api.post("/rules", json=rule).raise_for_status()
    run = diverge(alert_server.url, project, spool_dir)
    wait_until(lambda: len(receiver.messages()) >= 1)
    time.sleep(2)  # a second message, were one queued, would be out by now
    (message,) = receiver.messages()
    alerts = message.json()["alerts"]
    assert [(a["run_id"], a["kind"]) for a in alerts] == [(run.id, "divergence")]
    assert len(api.get("/deliveries", params={"channel_id": channel["id"]}).json()) == 1


def test_the_picture_of_a_divergence_shows_the_level_it_left(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    # a loss that sits near 2 for 1,500 steps, then climbs to 10 and stays: the picture must show both
    add_channel(api, receiver, project)
    run = holter.init(project=project, name="climbing", url=alert_server.url, spool_dir=spool_dir)
    for step in range(2000):
        level = 2.0 if step < 1500 else min(10.0, 2.0 + (step - 1500) * 0.08)
        run.log({"loss": level + 0.01 * math.sin(step)}, step=step)
    run.finish()
    wait_until(lambda: len(receiver.messages()) >= 1, timeout=60)
    alert = receiver.messages()[0].json()["alerts"][0]
    assert alert["kind"] == "divergence"
    bars = alert["sparkline"]
    assert bars[0] in "▁▂" and bars[-1] in "▇█"  # the level before (low), then the climb (high)
    png = httpx.get(alert["image_url"].replace("http://holter.example:8765", alert_server.url))
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")


def test_a_test_message_is_listed_with_the_deliveries(api: httpx.Client, receiver: Receiver, project: str) -> None:
    channel = add_channel(api, receiver, project)
    api.post(f"/channels/{channel['id']}/test").raise_for_status()
    receiver.answers = [(500, {})]
    assert api.post(f"/channels/{channel['id']}/test").status_code == 502
    listed = api.get("/deliveries", params={"channel_id": channel["id"]}).json()
    assert [(d["purpose"], d["status"]) for d in listed] == [("test", "failed"), ("test", "delivered")]
    assert "500" in listed[0]["last_error"] and "connected to Holter" in listed[1]["summary"]


def test_one_nan_is_one_message_naming_its_module(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str, spool_dir: Path
) -> None:
    # a real CPU training, the tripwire on: the loss, every gradient norm and activation norm go NaN
    pytest.importorskip("torch")
    from tests.integration.test_tripwires import train_with_a_nan

    add_channel(api, receiver, project)
    run_id = train_with_a_nan(alert_server.url, project=project)

    def all_detected() -> bool:
        found = api.get(f"/runs/{run_id}/incidents").json()
        return found["events"] >= 8

    wait_until(all_detected, timeout=60)
    wait_until(lambda: len(receiver.messages()) >= 1)
    time.sleep(2)  # the divergences that followed were all recorded: none sent a message of its own
    # (a slow training stalls for this server's 2 s, and resumes: another problem, told apart)
    told = [
        a for m in receiver.messages() for a in m.json()["alerts"] if a["kind"] not in ("run_stalled", "run_resumed")
    ]
    assert len(told) == 1, [(a["kind"], a["metric"]) for a in told]
    (alert,) = told
    assert alert["kind"] == "first_nonfinite" and "`layers.1.attn`" in alert["summary"]
    (incident,) = [i for i in api.get(f"/runs/{run_id}/incidents").json()["data"] if i["rule"] == "nonfinite"]
    members = {incident["leader"]["id"], *(e["id"] for e in incident["folded"])}
    deliveries = api.get("/deliveries", params={"run_id": run_id}).json()
    assert [d["event_id"] for d in deliveries if d["event_id"] in members] == [alert["event_id"]]


def test_an_unrelated_problem_after_a_nan_still_gets_its_message(
    api: httpx.Client, receiver: Receiver, project: str
) -> None:
    # a loss that goes NaN, then nothing more: the stall is another problem, with its own alert
    add_channel(api, receiver, project)
    run_id = f"nan-stall-{uuid.uuid4().hex[:8]}"
    api.post("/runs", json={"id": run_id, "project": project}).raise_for_status()
    values = [3.0 - step / 300 for step in range(100)] + ["NaN"] * 20
    api.post(
        f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": list(range(120)), "values": values}}}
    ).raise_for_status()
    wait_until(lambda: len([a for m in receiver.messages() for a in m.json()["alerts"]]) >= 2, timeout=30)
    kinds = sorted(a["kind"] for m in receiver.messages() for a in m.json()["alerts"])
    assert kinds == ["divergence", "run_stalled"]
    api.post(f"/runs/{run_id}/finish", json={"status": "finished"})


def test_a_root_cause_reported_after_its_consequence_is_told_and_what_follows_is_not(
    api: httpx.Client, receiver: Receiver, project: str
) -> None:
    channel = add_channel(api, receiver, project, default_rules=False)
    api.post(
        "/rules",
        json={"channel_id": channel["id"], "name": "nan", "kinds": ["divergence", "first_nonfinite"], "cooldown_s": 0},
    ).raise_for_status()
    run_id = f"late-cause-{uuid.uuid4().hex[:8]}"
    api.post("/runs", json={"id": run_id, "project": project}).raise_for_status()

    def log(metric: str) -> None:
        values = [2.0 - step / 300 for step in range(100)] + ["NaN"] * 20
        body = {"metrics": {metric: {"steps": list(range(120)), "values": values}}}
        api.post(f"/runs/{run_id}/points", json=body).raise_for_status()

    def told() -> list[str]:
        return [a["kind"] for m in receiver.messages() for a in m.json()["alerts"]]

    log("loss")  # the consequence first: its divergence is told
    wait_until(lambda: told() == ["divergence"])
    report = {"step": 100, "forward": {"name": "blocks.1.attn", "value": "NaN"}}
    api.post(f"/runs/{run_id}/nonfinite", json=report).raise_for_status()  # then the cause: told, it names it
    wait_until(lambda: told() == ["divergence", "first_nonfinite"])
    log("grad_norm")  # another consequence: folded into the incident, nothing sent

    def folded() -> list[dict]:
        incidents = api.get(f"/runs/{run_id}/incidents").json()["data"]
        return [e for i in incidents if i["rule"] == "nonfinite" for e in i["folded"] if e["metric"] == "grad_norm"]

    wait_until(folded)
    time.sleep(2)
    assert told() == ["divergence", "first_nonfinite"]
    api.post(f"/runs/{run_id}/finish", json={"status": "finished"})


def test_an_escalation_goes_at_once_through_the_cooldown_with_what_waited(
    alert_server: ServerProcess, api: httpx.Client, receiver: Receiver, project: str
) -> None:
    # issue 46: a problem turned critical inside the rule's 300 s cooldown and chat heard of it
    # 100 s later, after the run had ended
    channel = add_channel(api, receiver, project, default_rules=False)
    rule = {"channel_id": channel["id"], "name": "job", "kinds": ["alert"], "min_severity": "info", "cooldown_s": 300}
    api.post("/rules", json=rule).raise_for_status()
    run_id = api.post("/runs", json={"project": project}).json()["id"]

    def job_alert(title: str, severity: str) -> None:
        body = {"title": title, "text": "", "severity": severity, "key": title}
        api.post(f"/runs/{run_id}/alerts", json=body).raise_for_status()

    job_alert("first", "warning")
    wait_until(lambda: len(receiver.messages()) == 1, timeout=30)
    job_alert("second", "warning")  # a repeat inside the cooldown: it waits
    time.sleep(2.0)
    assert len(receiver.messages()) == 1
    job_alert("worse", "critical")  # an escalation: at once, and the waiting one with it
    wait_until(lambda: len(receiver.messages()) == 2, timeout=30)
    titles = sorted(a["summary"].split(":")[0] for a in receiver.messages()[1].json()["alerts"])
    assert len(titles) == 2 and len(receiver.messages()) == 2
