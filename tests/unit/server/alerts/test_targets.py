"""Webhook targets may not point at the service's own network unless an admin allows it."""

from __future__ import annotations

import pytest

from holter_server.alerts.targets import TargetRefused, check_target


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/x", "http://localhost/x", "http://10.1.2.3/x", "http://192.168.0.5/x",
                                 "http://169.254.169.254/latest/meta-data", "http://[::1]/x", "http://0.0.0.0/x"])
def test_private_and_loopback_targets_are_refused(url: str) -> None:
    with pytest.raises(TargetRefused, match="private or loopback"):
        check_target(url, allow_private=False)


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd", "http:///nohost"])
def test_non_http_targets_are_refused_even_when_private_ones_are_allowed(url: str) -> None:
    with pytest.raises(TargetRefused, match="http"):
        check_target(url, allow_private=True)


def test_an_admin_setting_allows_private_targets() -> None:
    check_target("http://127.0.0.1:9/x", allow_private=True)


def test_public_addresses_are_allowed() -> None:
    check_target("http://93.184.215.14/hook", allow_private=False)
