"""The SSRF guard on real HTTP: a message goes to the address that was checked, never to what
the name resolves to later, and the service refuses Apprise targets that could reach anything.
Receivers listen on 127.0.0.1 with private targets allowed; names resolve through a stub."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from holter_server.alerts.targets import TargetGuard
from holter_server.services.dispatch import DeliveryError, send
from holter_server.store.models import ChannelRow

from tests.receivers import Receiver
from tests.servers import ServerProcess


def test_a_message_goes_to_the_checked_address_with_the_name_in_host() -> None:
    receiver = Receiver().start()
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"] if len(calls) == 1 else ["10.9.9.9"]  # a second lookup would go elsewhere

    try:
        channel = ChannelRow(kind="webhook", target=f"http://hooks.example:{receiver.port}/hook", name="c")
        with httpx.Client(timeout=5) as client:
            send(
                client,
                channel,
                b"{}",
                {"Content-Type": "application/json"},
                guard=TargetGuard(allow_private=True, resolve=rebinding),
            )
        [message] = receiver.messages()
        assert message.headers["host"] == f"hooks.example:{receiver.port}"
        assert calls == ["hooks.example"]
    finally:
        receiver.stop()


def test_the_service_refuses_apprise_targets_that_override_headers_or_post_anywhere(server: ServerProcess) -> None:
    with server.api() as api:
        for target in (
            "json://127.0.0.1:9/x?+Authorization=Bearer%20stolen&method=PUT",
            "xml://127.0.0.1:9/x?method=DELETE",
        ):
            answer = api.post(
                "/channels", json={"name": "a", "kind": "apprise", "target": target, "default_rules": False}
            )
            assert answer.status_code == 422, target
            assert "override" in answer.json()["detail"]


def test_the_service_refuses_an_apprise_target_holding_two_urls(server: ServerProcess) -> None:
    """Apprise reads several URLs from one string; the guard checked only the first (a loopback
    receiver got the second with private targets refused). Only creating is tried: nothing is sent."""
    with server.api() as api:
        for target in (
            "slack://T1/B1/secret json://127.0.0.1:9/second",
            "discord://1234/token,json://127.0.0.1:9/second",
            "json://127.0.0.1:9/first ntfy://127.0.0.1:9/topic",
        ):
            answer = api.post(
                "/channels", json={"name": "two", "kind": "apprise", "target": target, "default_rules": False}
            )
            assert answer.status_code == 422, target
            assert "one URL" in answer.json()["detail"]


def test_a_stored_apprise_target_holding_two_urls_reaches_neither() -> None:
    """A channel stored before the check (two loopback URLs, private targets allowed, the second
    of a kind never allowed): the sender's own check refuses it, and nothing arrives."""
    pytest.importorskip("apprise")
    receiver = Receiver().start()
    try:
        target = f"json://127.0.0.1:{receiver.port}/first ntfy://127.0.0.1:{receiver.port}/topic"
        channel = ChannelRow(kind="apprise", target=target, name="two")
        body = json.dumps({"title": "t", "body": "b"}).encode()
        with httpx.Client(timeout=5) as client, pytest.raises(DeliveryError, match="one URL"):
            send(client, channel, body, {}, guard=TargetGuard(allow_private=True, resolve=lambda host, port: [host]))
        time.sleep(0.5)
        assert receiver.messages() == []
    finally:
        receiver.stop()
