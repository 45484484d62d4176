"""Where the service may send alerts: one guard for every channel kind (SSRF).

`TargetGuard.check(url)` parses the target, resolves its host once and refuses it unless every
address is global (`ipaddress.ip_address(a).is_global`; for IPv6 also within the global unicast
space 2000::/3, which leaves out the deprecated site-local fec0::/10 and IPv4-compatible
`::a.b.c.d`, and not 6to4 or NAT64, which embed any IPv4 address); the sender then connects to
that very address (`Target.pinned_url`, with the name in `Host` and in TLS SNI), so a name cannot
resolve to a public address for the check and to a private one for the request (DNS rebinding). An admin setting
(HOLTER_ALLOW_PRIVATE_WEBHOOKS) lets channels reach private addresses.

Apprise URLs (`check_apprise`) are limited to the chat services that post to their own fixed
hosts, never the generic `json://`, `xml://` or `form://` kinds that post anywhere, and never
with header (`+Name=`), payload (`:name=`, `-name=`) or method overrides. A channel holds one
Apprise URL: Apprise reads several from one string (split at spaces, commas and semicolons, or
wherever another `scheme://` starts), and each would be a target this guard never saw.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

Resolver = Callable[[str, int], list[str]]

# Addresses whose `is_global` is True though they reach whatever IPv4 address they embed.
EMBEDDING_NETWORKS = (
    ipaddress.ip_network("2002::/16"),
    ipaddress.ip_network("64:ff9b::/96"),
    ipaddress.ip_network("64:ff9b:1::/48"),
)
# The IPv6 global unicast space (RFC 4291); anything outside it is no public address of a receiver.
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
# Where Apprise sees a URL start (its own URL_START_RE): a scheme not preceded by a letter or digit.
APPRISE_URL_START = re.compile(r"(?<![a-z0-9])[a-z0-9]+?://", re.IGNORECASE)
# Apprise services that post to their own public hosts only (the host in the URL is a token).
APPRISE_FIXED_HOST_SCHEMES = frozenset({"slack", "discord", "msteams", "tgram", "pover", "pbul", "join"})
# Apprise kinds that post to any host: allowed only with private targets allowed (tests, intranets), host checked.
APPRISE_ANY_HOST_SCHEMES = frozenset({"json", "jsons", "xml", "xmls", "form", "forms"})


class TargetRefused(ValueError):
    """The alert target is not allowed."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the system's resolver)."""
    return sorted({info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})


def is_allowed_address(address: str) -> bool:
    """True for a global unicast address that does not embed another one."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip not in GLOBAL_UNICAST_V6 or any(ip in network for network in EMBEDDING_NETWORKS):
            return False
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class Target:
    """A checked target: the URL as given, and the address to connect to."""

    url: str
    scheme: str
    host: str
    port: int
    address: str

    @property
    def pinned_url(self) -> str:
        """The URL with the checked address in place of the name (the name goes in Host and SNI)."""
        parts = urlsplit(self.url)
        shown = f"[{self.address}]" if ":" in self.address else self.address
        netloc = f"{shown}:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return shown if self.port == default else f"{shown}:{self.port}"


class TargetGuard:
    """Checks alert targets, resolving each name once. `resolve` is the system's unless a test stubs it."""

    def __init__(self, *, allow_private: bool, resolve: Resolver = system_resolver) -> None:
        self.allow_private = allow_private
        self.resolve = resolve

    def check(self, url: str) -> Target:
        """The target to connect to, or TargetRefused."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TargetRefused("the target must be an http(s) URL with a host")
        if parts.username or parts.password:
            raise TargetRefused("the target may not carry a user name or password")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise TargetRefused(f"the target's port is not a port: {exc}") from exc
        return Target(
            url=url, scheme=parts.scheme, host=parts.hostname, port=port, address=self._address(parts.hostname, port)
        )

    def _address(self, host: str, port: int) -> str:
        try:
            addresses = self.resolve(host, port)
        except (OSError, UnicodeError) as exc:
            raise TargetRefused(f"cannot resolve {host!r}: {getattr(exc, 'strerror', None) or exc}") from exc
        if not addresses:
            raise TargetRefused(f"{host!r} resolves to no address")
        if not self.allow_private:
            blocked = sorted(a for a in addresses if not is_allowed_address(a))
            if blocked:
                raise TargetRefused(
                    f"{host!r} resolves to a private or loopback address, or another that is not public "
                    f"({', '.join(blocked)}); an admin can allow private targets "
                    "with HOLTER_ALLOW_PRIVATE_WEBHOOKS=true"
                )
        return addresses[0]

    def check_apprise(self, url: str) -> None:
        """Refuse an Apprise URL that could reach anything but a chat service's own host, that
        overrides headers or the method, or a target that holds more than one URL."""
        starts = APPRISE_URL_START.findall(url)
        if len(starts) > 1 or re.search(r"[\s\x00-\x1f\x7f]", url.strip()):
            raise TargetRefused(
                f"an Apprise channel holds one URL; this target holds {max(len(starts), 2)} "
                "(Apprise would post to each, unchecked): add a channel for each service"
            )
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        # names as written: a "+" is Apprise's header marker, not a space
        for name in (unquote(field.split("=", 1)[0]).strip() for field in parts.query.split("&") if field):
            if name[:1] in "+-:" or name.lower() == "method":
                raise TargetRefused(f"apprise URLs may not override headers, payload or method ({name!r})")
        if scheme in APPRISE_FIXED_HOST_SCHEMES:
            return
        if scheme in APPRISE_ANY_HOST_SCHEMES and self.allow_private and parts.hostname:
            self._address(parts.hostname, parts.port or 80)
            return
        allowed = ", ".join(sorted(APPRISE_FIXED_HOST_SCHEMES))
        raise TargetRefused(f"apprise scheme {scheme!r} is not allowed; use one of {allowed} (or a webhook channel)")

    def check_channel(self, kind: str, url: str) -> None:
        """Refuse a channel's target whatever its kind."""
        if kind == "apprise":
            self.check_apprise(url)
        else:
            self.check(url)
