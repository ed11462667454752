"""Request-forgery guard for outgoing channel requests (webhook, Slack).

A channel URL is tenant input, and the worker that posts to it sits inside the deployment's
network. So a URL may only reach public addresses:

* ``check_url`` (create/update, 400 on refusal): http(s) with a host, no credentials, no IP written
  in integer/octal/hex/short form, and neither the literal address nor any address the name
  resolves to right now is loopback, private (RFC 1918, fc00::/7, 100.64/10), link-local
  (169.254/16 — the cloud metadata address — and fe80::/10), unspecified, multicast or reserved.
* ``resolve_for_send`` (every delivery): resolves the name again (it may point elsewhere by now),
  refuses if any address is not public, and returns the address the request must connect to, so
  the check and the connection use the same resolution (no rebinding between the two).

The only way around it is the ``MEMORYHUB_CHANNEL_ALLOWED_NETWORKS`` setting: a list of networks
(CIDR, e.g. ``127.0.0.1/32`` for a local test receiver) whose addresses are accepted anyway.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeURL(ValueError):
    """The URL may not be requested; ``str(exc)`` says why (safe to show: no remote content)."""

    permanent = True


class Unresolvable(UnsafeURL):
    """The host name does not resolve right now (DNS may recover: a transient delivery error)."""

    permanent = False


@dataclass(frozen=True)
class Target:
    """Where to connect: the URL's host name, the vetted address it resolved to, and the port."""

    host: str
    address: Address
    port: int


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    networks = []
    for entry in getattr(settings, "MEMORYHUB_CHANNEL_ALLOWED_NETWORKS", []) or []:
        networks.append(ipaddress.ip_network(str(entry).strip(), strict=False))
    return networks


def _plain(address: Address) -> Address:
    # ::ffff:127.0.0.1 and friends are the IPv4 address in disguise.
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def refusal(address: Address) -> str | None:
    """Why ``address`` may not be requested (None when it may)."""
    address = _plain(address)
    if any(address in network for network in allowed_networks()):
        return None
    for test, what in (
        ("is_unspecified", "unspecified"),
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_private", "private"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
    ):
        if getattr(address, test):
            article = "an" if what[0] in "aeiou" else "a"
            return f"{address} is {article} {what} address"
    if not address.is_global:
        return f"{address} is not a public address"
    return None


def _parts(url: str) -> SplitResult:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"not a valid URL ({exc})")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeURL("must be an http(s) URL with a host")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise UnsafeURL("must not contain credentials (user:password@)")
    if port == 0:
        raise UnsafeURL("port 0 is not a valid port")
    return parts


def _literal(host: str) -> Address | None:
    """The address a numeric host names; a non-canonical numeric form is refused outright."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        socket.inet_aton(host)  # accepts 2130706433, 0x7f000001, 0177.0.0.1, 127.1 ...
    except (OSError, ValueError):
        pass
    else:
        raise UnsafeURL(f"host {host!r} is an IP address in integer/octal/hex or short form")
    if host.rstrip(".").replace(".", "").isdigit():
        raise UnsafeURL(f"host {host!r} is not a valid host name or IP address")
    return None


def _resolve(host: str, port: int) -> list[Address]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def _port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def check_url(url: str) -> str:
    """Validate a channel URL at create/update; raises UnsafeURL with the reason.

    A name that does not resolve (yet) is accepted: it is checked again before every send."""
    parts = _parts(url)
    host = parts.hostname or ""
    literal = _literal(host)
    addresses = [literal] if literal is not None else _resolve(host, _port(parts))
    for address in addresses:
        reason = refusal(address)
        if reason:
            # Say how to allow it: a team whose webhook target is on its own network needs the setting.
            raise UnsafeURL(
                f"host {host!r} is not a public address ({reason}); to send to it, an operator adds its "
                f"network (e.g. {address}/32) to MEMORYHUB_CHANNEL_ALLOWED_NETWORKS"
            )
    return url


def resolve_for_send(url: str) -> Target:
    """The vetted address to connect to for ``url``; raises UnsafeURL (a permanent delivery error)."""
    parts = _parts(url)
    host = parts.hostname or ""
    literal = _literal(host)
    addresses = [literal] if literal is not None else _resolve(host, _port(parts))
    if not addresses:
        raise Unresolvable(f"host {host!r} does not resolve")
    for address in addresses:
        reason = refusal(address)
        if reason:
            raise UnsafeURL(f"host {host!r} is not a public address ({reason})")
    return Target(host=host, address=addresses[0], port=_port(parts))
