"""Reserved destinations: the service never delivers to them (spec §3.3).

The rule: before each attempt the host is resolved and *every* address it resolves
to is checked against the explicit lists below (a host with one reserved address
among public ones is refused as a whole). If any is reserved the attempt is a
permanent failure and no connection is made. Otherwise the request is sent to one of
the checked addresses (never to a second resolution of the name, so a DNS answer that
changes between check and connect cannot slip through).

IPv4 ranges are listed in :data:`RESERVED_IPV4`. IPv6 is allowed only inside the
global unicast block ``2000::/3`` and outside :data:`RESERVED_IPV6`. Forms that embed an
IPv4 address are judged by that address: IPv4-mapped ``::ffff:0:0/96``, NAT64
``64:ff9b::/96`` and 6to4 ``2002::/16``. The deprecated IPv4-compatible ``::/96``, the
local-use NAT64 ``64:ff9b:1::/48`` and Teredo ``2001::/32`` (whose client address is
obfuscated) are refused as a whole.
This is deliberately stricter than :attr:`ipaddress.IPv4Address.is_global`.

Host spellings such as ``2130706433``, ``0x7f.1`` or ``127.1`` are resolved by the
system resolver to their real address first, then checked like any other.

``allow_private_destinations=True`` (on :class:`~service_webhooks.delivery.Sender`)
turns the check off for local testing; the default matches the service.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from .._exceptions import WebhookError

__all__ = [
    "RESERVED_IPV4",
    "RESERVED_IPV6",
    "ReservedAddressError",
    "Resolver",
    "StaticResolver",
    "SystemResolver",
    "UnresolvableHostError",
    "check_addresses",
    "reserved_reason",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

RESERVED_IPV4: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("0.0.0.0/8"), "this network / unspecified (RFC 791, RFC 1122)"),
    (_V4("10.0.0.0/8"), "private (RFC 1918)"),
    (_V4("100.64.0.0/10"), "carrier-grade NAT (RFC 6598)"),
    (_V4("127.0.0.0/8"), "loopback (RFC 1122)"),
    (_V4("169.254.0.0/16"), "link-local (RFC 3927)"),
    (_V4("172.16.0.0/12"), "private (RFC 1918)"),
    (_V4("192.0.0.0/24"), "IETF protocol assignments (RFC 6890)"),
    (_V4("192.0.2.0/24"), "documentation TEST-NET-1 (RFC 5737)"),
    (_V4("192.31.196.0/24"), "AS112 (RFC 7535)"),
    (_V4("192.52.193.0/24"), "AMT (RFC 7450)"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast (RFC 7526)"),
    (_V4("192.168.0.0/16"), "private (RFC 1918)"),
    (_V4("192.175.48.0/24"), "AS112 direct delegation (RFC 7534)"),
    (_V4("198.18.0.0/15"), "benchmarking (RFC 2544)"),
    (_V4("198.51.100.0/24"), "documentation TEST-NET-2 (RFC 5737)"),
    (_V4("203.0.113.0/24"), "documentation TEST-NET-3 (RFC 5737)"),
    (_V4("224.0.0.0/4"), "multicast (RFC 5771)"),
    (_V4("240.0.0.0/4"), "reserved for future use (RFC 1112)"),
    (_V4("255.255.255.255/32"), "limited broadcast (RFC 919)"),
)
"""IPv4 ranges the service never delivers to, each with the reason shown in the audit log."""

GLOBAL_UNICAST_V6 = _V6("2000::/3")
"""The only IPv6 block deliveries may go to (minus :data:`RESERVED_IPV6`)."""

RESERVED_IPV6: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::/128"), "unspecified (RFC 4291)"),
    (_V6("::1/128"), "loopback (RFC 4291)"),
    (_V6("::ffff:0:0/96"), "IPv4-mapped (RFC 4291)"),
    (_V6("::/96"), "IPv4-compatible, deprecated (RFC 4291)"),
    (_V6("64:ff9b::/96"), "NAT64 well-known prefix (RFC 6052)"),
    (_V6("64:ff9b:1::/48"), "NAT64 local-use (RFC 8215)"),
    (_V6("100::/64"), "discard-only (RFC 6666)"),
    (_V6("2001:2::/48"), "benchmarking (RFC 5180)"),
    (_V6("2001::/32"), "Teredo (RFC 4380)"),
    (_V6("2001::/23"), "IETF protocol assignments incl. ORCHID (RFC 2928)"),
    (_V6("2001:db8::/32"), "documentation (RFC 3849)"),
    (_V6("2002::/16"), "6to4 (RFC 3056)"),
    (_V6("3fff::/20"), "documentation (RFC 9637)"),
    (_V6("5f00::/16"), "SRv6 SIDs (RFC 9602)"),
    (_V6("fc00::/7"), "unique local (RFC 4193)"),
    (_V6("fe80::/10"), "link-local (RFC 4291)"),
    (_V6("fec0::/10"), "site-local, deprecated (RFC 3879)"),
    (_V6("ff00::/8"), "multicast (RFC 4291)"),
)
"""IPv6 ranges the service never delivers to. Three embed an IPv4 address and are judged
by it instead: IPv4-mapped ``::ffff:0:0/96``, NAT64 ``64:ff9b::/96`` and 6to4
``2002::/16`` (allowed only when the embedded address is public); every other listed
range is refused as a whole."""

# Forms judged by the IPv4 address they embed: (prefix, bit shift of that address).
_EMBEDDING = (
    (_V6("::ffff:0:0/96"), 0),
    (_V6("64:ff9b::/96"), 0),
    (_V6("2002::/16"), 80),
)


class ReservedAddressError(WebhookError):
    """The destination resolves to a reserved address; permanent failure (spec §3.3).

    Attributes:
        address: The offending address, as text.
        range_reason: Which reserved range it is in, e.g. ``"loopback (RFC 1122)"``.
    """

    reason = "reserved_address"

    def __init__(self, address: str, range_reason: str) -> None:
        super().__init__(f"{address} is a reserved address: {range_reason}")
        self.address = address
        self.range_reason = range_reason


class UnresolvableHostError(WebhookError):
    """The host name did not resolve to any address; a temporary failure (spec §3.3)."""

    reason = "unresolvable_host"


class Resolver(Protocol):
    """Turns a host name into addresses; the plug-point for tests and in-process apps."""

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        """Return every address ``host`` resolves to, as text, in preference order.

        Raises:
            UnresolvableHostError: The name does not resolve.
        """
        ...


class SystemResolver:
    """The operating system's resolver (:meth:`asyncio.loop.getaddrinfo`).

    Resolving a literal address involves no DNS query; numeric spellings such as
    ``127.1`` or ``2130706433`` come back as the address they mean.
    """

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        """See :meth:`Resolver.resolve`."""
        try:  # a canonical literal needs no lookup (other spellings go to getaddrinfo)
            return [str(ipaddress.ip_address(host.strip("[]").partition("%")[0]))]
        except ValueError:
            pass
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            raise UnresolvableHostError(f"cannot resolve {host!r}: {error}") from error
        addresses: list[str] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            text = str(sockaddr[0]).partition("%")[0]
            if text not in addresses:
                addresses.append(text)
        if not addresses:
            raise UnresolvableHostError(f"{host!r} resolved to no address")
        return addresses


class StaticResolver:
    """A fixed table ``host -> addresses``, for tests and in-process delivery.

    Args:
        table: Addresses per host name (case-insensitive).
        default: Addresses for any host not in ``table``; ``None`` makes unknown
            hosts unresolvable.
    """

    def __init__(
        self,
        table: Mapping[str, Iterable[str]] | None = None,
        *,
        default: Iterable[str] | None = None,
    ) -> None:
        self._table = {key.lower(): list(value) for key, value in (table or {}).items()}
        self._default = None if default is None else list(default)

    async def resolve(self, host: str, port: int) -> Sequence[str]:
        """See :meth:`Resolver.resolve`."""
        found = self._table.get(host.lower().strip("[]"), self._default)
        if not found:
            raise UnresolvableHostError(f"cannot resolve {host!r}")
        return found


def _reason_v4(address: ipaddress.IPv4Address) -> str | None:
    for network, why in RESERVED_IPV4:
        if address in network:
            return why
    return None


def _reason_v6(address: ipaddress.IPv6Address) -> str | None:
    for network, shift in _EMBEDDING:
        if address in network:
            embedded = ipaddress.IPv4Address((int(address) >> shift) & 0xFFFFFFFF)
            inner = _reason_v4(embedded)
            if inner is None:
                return None
            outer = next(why for net, why in RESERVED_IPV6 if net == network)
            return f"{outer}, embedding {embedded}: {inner}"
    for network, why in RESERVED_IPV6:
        if address in network:
            return why
    if address not in GLOBAL_UNICAST_V6:
        return "outside IPv6 global unicast 2000::/3 (RFC 4291)"
    return None


def reserved_reason(address: str | IPAddress) -> str | None:
    """Say why ``address`` is reserved, or return ``None`` when deliveries may go there.

    Args:
        address: An IPv4 or IPv6 address, as text (an IPv6 zone ``%eth0`` is ignored)
            or an :mod:`ipaddress` object.

    Returns:
        A short description of the reserved range (for the audit log), or ``None``.

    Raises:
        ValueError: ``address`` is not an IP address.
    """
    if isinstance(address, str):
        address = ipaddress.ip_address(address.partition("%")[0])
    if isinstance(address, ipaddress.IPv4Address):
        return _reason_v4(address)
    return _reason_v6(address)


def check_addresses(addresses: Iterable[str]) -> list[str]:
    """Check every resolved address and return them, all safe, as text.

    Raises:
        ReservedAddressError: At least one address is reserved (the first one found
            is named), or one is not an IP address at all.
    """
    checked: list[str] = []
    for text in addresses:
        try:
            why = reserved_reason(text)
        except ValueError:
            raise ReservedAddressError(text, "not an IP address") from None
        if why is not None:
            raise ReservedAddressError(text, why)
        checked.append(text.partition("%")[0])
    return checked
