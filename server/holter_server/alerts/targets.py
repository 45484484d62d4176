"""Where the service may send webhooks: http(s) to public addresses only, unless an admin
setting (HOLTER_ALLOW_PRIVATE_WEBHOOKS) allows private ones, so nobody can point a channel at
the service's own network (SSRF)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit


class TargetRefused(ValueError):
    """The webhook target is not allowed."""


def _forbidden(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved or ip.is_unspecified


def check_target(url: str, *, allow_private: bool) -> None:
    """Raise TargetRefused unless `url` is an http(s) URL whose host resolves only to allowed addresses.

    Checked when a channel is added and again before every send (the name may resolve
    elsewhere later).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetRefused("the target must be an http(s) URL with a host")
    if allow_private:
        return
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))}
    except socket.gaierror as exc:
        raise TargetRefused(f"cannot resolve {parts.hostname!r}: {exc.strerror}") from exc
    blocked = sorted(a for a in addresses if _forbidden(a.split("%")[0]))
    if blocked:
        raise TargetRefused(f"{parts.hostname!r} resolves to a private or loopback address ({', '.join(blocked)}); "
                            "an admin can allow that with HOLTER_ALLOW_PRIVATE_WEBHOOKS=true")
