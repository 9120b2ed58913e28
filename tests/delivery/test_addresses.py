"""Spec §3.3: a destination resolving to a reserved address is a permanent failure and
is never contacted. Each form below goes through a sender whose transport records calls:
an empty record proves no connection was attempted."""

from __future__ import annotations

from typing import Any

import pytest

from service_webhooks.delivery import (
    RESERVED_IPV4,
    RESERVED_IPV6,
    Failure,
    ReservedAddressError,
    Result,
    Sender,
    StaticResolver,
    check_addresses,
    reserved_reason,
)

# URL host forms resolved by the system resolver without any DNS query.
LITERAL_URLS = [
    "http://127.0.0.1/hook",
    "http://127.255.255.254/hook",
    "http://127.1/hook",  # inet_aton shorthand
    "http://2130706433/hook",  # decimal 127.0.0.1
    "http://0x7f000001/hook",  # hex 127.0.0.1
    "http://0177.0.0.1/hook",  # octal 127.0.0.1
    "http://0.0.0.0/hook",
    "http://10.1.2.3/hook",
    "http://172.16.0.1/hook",
    "http://172.31.255.255/hook",
    "http://192.168.1.1/hook",
    "http://100.64.0.1/hook",  # carrier-grade NAT
    "http://169.254.169.254/latest/meta-data",  # link-local (cloud metadata)
    "http://192.0.0.8/hook",
    "http://192.0.2.10/hook",  # documentation
    "http://198.51.100.7/hook",
    "http://203.0.113.9/hook",
    "http://198.18.0.1/hook",  # benchmarking
    "http://198.19.255.255/hook",
    "http://224.0.0.1/hook",  # multicast
    "http://239.255.255.250/hook",
    "http://240.0.0.1/hook",
    "http://255.255.255.255/hook",
    "http://[::1]/hook",
    "http://[::]/hook",
    "http://[::ffff:127.0.0.1]/hook",  # IPv4-mapped loopback
    "http://[::ffff:a00:1]/hook",  # IPv4-mapped 10.0.0.1, hex spelling
    "http://[::ffff:169.254.169.254]/hook",
    "http://[::127.0.0.1]/hook",  # IPv4-compatible
    "http://[64:ff9b::7f00:1]/hook",  # NAT64 embedding loopback
    "http://[64:ff9b::c0a8:101]/hook",  # NAT64 embedding 192.168.1.1
    "http://[64:ff9b:1::1]/hook",  # local-use NAT64
    "http://[2002:7f00:1::1]/hook",  # 6to4 embedding 127.0.0.1
    "http://[2002:a9fe:a9fe::1]/hook",  # 6to4 embedding 169.254.169.254
    "http://[fe80::1]/hook",  # link-local
    "http://[fc00::1]/hook",  # unique local
    "http://[fd12:3456::1]/hook",
    "http://[ff02::1]/hook",  # multicast
    "http://[2001:db8::1]/hook",  # documentation
    "http://[3fff::1]/hook",
    "http://[2001:2::1]/hook",  # benchmarking
    "http://[2001::1]/hook",  # Teredo
    "http://[100::1]/hook",  # discard
    "http://[fec0::1]/hook",  # site-local
    "https://localhost:8443/hook",  # /etc/hosts: loopback only
]


@pytest.mark.parametrize("url", LITERAL_URLS)
async def test_reserved_destination_is_never_contacted(url: str, Recording: Any) -> None:
    transport = Recording(200)
    async with Sender(transport=transport) as sender:
        outcome = await sender.send(url, b"{}", secret="s", organization_id="o")
    assert transport.calls == []
    assert outcome.result is Result.PERMANENT_FAILURE
    assert outcome.failure is Failure.RESERVED_ADDRESS
    assert outcome.status is None
    assert "reserved" in outcome.description


@pytest.mark.parametrize(
    "addresses",
    [
        ["10.0.0.5"],
        ["8.8.8.8", "127.0.0.1"],  # one bad address among good ones refuses the host
        ["2606:4700::1111", "fd00::1"],
        ["::ffff:192.168.0.1"],
        ["100.100.100.100"],
    ],
)
async def test_hostname_with_any_reserved_address_is_refused(
    addresses: list[str], Recording: Any
) -> None:
    transport = Recording(200)
    resolver = StaticResolver({"hooks.example.com": addresses})
    async with Sender(transport=transport, resolver=resolver) as sender:
        outcome = await sender.send(
            "https://hooks.example.com/in", b"{}", secret="s", organization_id="o"
        )
    assert transport.calls == []
    assert outcome.failure is Failure.RESERVED_ADDRESS
    assert outcome.result is Result.PERMANENT_FAILURE


async def test_public_host_is_sent_to_the_checked_address(Recording: Any) -> None:
    transport = Recording(204)
    resolver = StaticResolver({"hooks.example.com": ["93.184.215.14", "2606:2800:21f::1"]})
    async with Sender(transport=transport, resolver=resolver) as sender:
        outcome = await sender.send(
            "https://hooks.example.com:8443/in?x=1", b"{}", secret="s", organization_id="o"
        )
    assert outcome.result is Result.SUCCESS
    assert outcome.address == "93.184.215.14"
    (request,) = transport.calls
    # The connection goes to the checked address; the name stays in Host and TLS SNI.
    assert request.url.host == "93.184.215.14"
    assert request.url.port == 8443
    assert request.url.raw_path == b"/in?x=1"
    assert request.headers["host"] == "hooks.example.com:8443"
    assert request.extensions["sni_hostname"] == "hooks.example.com"


async def test_switch_allows_private_destinations(Recording: Any) -> None:
    transport = Recording(200)
    async with Sender(transport=transport, allow_private_destinations=True) as sender:
        outcome = await sender.send("http://127.0.0.1:9/x", b"{}", secret="s", organization_id="o")
    assert outcome.result is Result.SUCCESS
    assert len(transport.calls) == 1


async def test_unresolvable_host_is_temporary(Recording: Any) -> None:
    transport = Recording(200)
    async with Sender(transport=transport, resolver=StaticResolver()) as sender:
        outcome = await sender.send(
            "http://nowhere.invalid/", b"{}", secret="s", organization_id="o"
        )
    assert transport.calls == []
    assert outcome.failure is Failure.UNRESOLVABLE
    assert outcome.result is Result.TEMPORARY_FAILURE


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "100.63.255.255",  # just below CGNAT
        "100.128.0.0",  # just above CGNAT
        "172.15.255.255",
        "172.32.0.0",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "2606:4700:4700::1111",
        "2a00:1450:4001::1",
        "::ffff:8.8.8.8",  # mapped public
        "64:ff9b::808:808",  # NAT64 public
        "2002:808:808::1",  # 6to4 public
    ],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert reserved_reason(address) is None
    assert check_addresses([address]) == [address]


def test_every_listed_range_is_refused_at_both_ends() -> None:
    embedded = {"::ffff:0:0/96", "64:ff9b::/96", "2002::/16"}
    for network, _why in (*RESERVED_IPV4, *RESERVED_IPV6):
        if str(network) in embedded:
            continue  # judged by the embedded IPv4 address (tested above)
        assert reserved_reason(network[0]) is not None, network
        assert reserved_reason(network[-1]) is not None, network


def test_outside_global_unicast_is_refused() -> None:
    assert reserved_reason("4000::1") == "outside IPv6 global unicast 2000::/3 (RFC 4291)"


def test_check_addresses_names_the_range() -> None:
    with pytest.raises(ReservedAddressError) as caught:
        check_addresses(["8.8.8.8", "fe80::1%eth0"])
    assert caught.value.address == "fe80::1%eth0"
    assert "link-local" in caught.value.range_reason
    with pytest.raises(ReservedAddressError):
        check_addresses(["not-an-address"])
