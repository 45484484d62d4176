"""One guard for every channel's target: only global addresses, resolved once and connected to
as checked (no DNS rebinding), and Apprise URLs kept to the chat services' own hosts. Names are
resolved by a stub: no test resolves a real name."""

from __future__ import annotations

import pytest
from holter_server.alerts.targets import TargetGuard, TargetRefused


def stub(*answers: list[str]):  # type: ignore[no-untyped-def]
    """A resolver answering each call with the next list (a rebinding name answers differently each time)."""
    calls: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return answers[min(len(calls), len(answers)) - 1]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.5",
        "169.254.169.254",
        "::1",
        "0.0.0.0",
        "fd00::1",
        "100.64.0.1",
        "100.127.255.254",
        "2002:c0a8:0101::1",
        "2002:7f00:1::1",
        "64:ff9b::a9fe:a9fe",
        "::ffff:10.0.0.1",
        "224.0.0.1",
        # IPv4-compatible IPv6 (::/96, deprecated): reaches the IPv4 address it ends with
        "::127.0.0.1",
        "::10.0.0.1",
        "::8.8.8.8",
        "::ffff:0:127.0.0.1",  # IPv4-translated (SIIT)
        "fec0::1",  # site-local (deprecated): a private network's
        "feff:ffff::1",
        "100::1",
    ],
)
def test_an_address_that_is_not_global_is_refused(address: str) -> None:
    guard = TargetGuard(allow_private=False, resolve=stub([address]))
    with pytest.raises(TargetRefused, match="not public"):
        guard.check("https://hooks.example/x")


def test_a_name_resolving_to_one_private_address_among_public_ones_is_refused() -> None:
    guard = TargetGuard(allow_private=False, resolve=stub(["93.184.215.14", "10.0.0.7"]))
    with pytest.raises(TargetRefused, match=r"10\.0\.0\.7"):
        guard.check("https://hooks.example/x")


def test_the_checked_address_is_the_one_connected_to_and_the_name_is_resolved_once() -> None:
    resolve = stub(["93.184.215.14"], ["127.0.0.1"])  # a rebinding name: public first, loopback next
    target = TargetGuard(allow_private=False, resolve=resolve).check("https://hooks.example:8443/services/T1?x=1")
    assert target.pinned_url == "https://93.184.215.14:8443/services/T1?x=1"
    assert target.host_header == "hooks.example:8443" and target.host == "hooks.example"
    assert resolve.calls == ["hooks.example"]  # type: ignore[attr-defined]


def test_ipv6_addresses_are_bracketed_in_the_pinned_url() -> None:
    target = TargetGuard(allow_private=False, resolve=stub(["2606:2800:220:1:248:1893:25c8:1946"])).check(
        "http://hooks.example/x"
    )
    assert target.pinned_url == "http://[2606:2800:220:1:248:1893:25c8:1946]:80/x"


@pytest.mark.parametrize(
    "url", ["ftp://example.org/x", "file:///etc/passwd", "gopher://x/", "http:///nohost", "http://u:p@hooks.example/x"]
)
def test_only_plain_http_urls_with_a_host_are_targets(url: str) -> None:
    with pytest.raises(TargetRefused):
        TargetGuard(allow_private=True, resolve=stub(["127.0.0.1"])).check(url)


def test_private_targets_pass_when_an_admin_allows_them() -> None:
    assert (
        TargetGuard(allow_private=True, resolve=stub(["127.0.0.1"])).check("http://localhost:9/x").address
        == "127.0.0.1"
    )


@pytest.mark.parametrize(
    "url",
    [
        "json://127.0.0.1/hook?+Authorization=Bearer%20x",  # header override
        "json://127.0.0.1/hook?method=PUT",  # method override
        "jsons://hooks.example/hook?:payload=x",  # payload override
        "form://hooks.example/hook?-token=x",
    ],
)
def test_apprise_urls_may_not_override_headers_payload_or_method(url: str) -> None:
    with pytest.raises(TargetRefused, match="override"):
        TargetGuard(allow_private=True, resolve=stub(["127.0.0.1"])).check_channel("apprise", url)


@pytest.mark.parametrize(
    "url", ["json://127.0.0.1/hook", "xml://internal.example/x", "mailto://user:pass@smtp.example", "http://x/"]
)
def test_apprise_kinds_that_post_anywhere_are_refused_without_private_targets(url: str) -> None:
    with pytest.raises(TargetRefused, match="not allowed"):
        TargetGuard(allow_private=False, resolve=stub(["93.184.215.14"])).check_apprise(url)


def test_apprise_chat_services_with_their_own_hosts_are_allowed() -> None:
    guard = TargetGuard(allow_private=False, resolve=stub(["127.0.0.1"]))
    guard.check_apprise("slack://T1/B1/secret")
    guard.check_apprise("discord://1234/token")
    assert guard.resolve.calls == []  # type: ignore[attr-defined]


def test_every_channel_kind_goes_through_the_guard() -> None:
    guard = TargetGuard(allow_private=False, resolve=stub(["10.0.0.1"]))
    for kind in ("webhook", "slack", "discord", "teams"):
        with pytest.raises(TargetRefused):
            guard.check_channel(kind, "https://hooks.example/x")


@pytest.mark.parametrize("address", ["2606:2800:220:1:248:1893:25c8:1946", "2a00:1450:4001:82a::200e", "93.184.215.14"])
def test_a_global_unicast_address_passes(address: str) -> None:
    assert TargetGuard(allow_private=False, resolve=stub([address])).check("https://hooks.example/x").address == address


@pytest.mark.parametrize(
    "url",
    [
        "slack://T1/B1/secret json://127.0.0.1:9/x",  # Apprise splits at the space and posts to both
        "slack://T1/B1/secret,json://127.0.0.1:9/x",
        "slack://T1/B1/secret;json://127.0.0.1:9/x",
        "discord://1234/token\njson://127.0.0.1:9/x",
        "slack://T1/B1/secret?x=json://127.0.0.1:9/x",  # a second scheme anywhere: refused, not guessed at
        "slack://T1/B1/ secret",
    ],
)
def test_an_apprise_target_holding_more_than_one_url_is_refused(url: str) -> None:
    guard = TargetGuard(allow_private=False, resolve=stub(["127.0.0.1"]))
    with pytest.raises(TargetRefused, match="one URL"):
        guard.check_apprise(url)
    assert guard.resolve.calls == []  # type: ignore[attr-defined]


def test_an_apprise_target_holding_more_than_one_url_is_refused_with_private_targets_allowed() -> None:
    guard = TargetGuard(allow_private=True, resolve=stub(["127.0.0.1"]))
    with pytest.raises(TargetRefused, match="one URL"):
        guard.check_apprise("json://127.0.0.1:9/a ntfy://127.0.0.1:9/topic")
