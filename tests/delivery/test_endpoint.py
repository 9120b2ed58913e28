"""Endpoint configuration (spec §2.6) and the event envelope (spec §2.7)."""

from __future__ import annotations

import json
import math

import pytest

from service_webhooks import Secret
from service_webhooks._exceptions import ConfigurationError, PayloadTooLargeError
from service_webhooks.delivery import MAX_BODY_SIZE, Endpoint, OutboundEvent, encode_envelope
from service_webhooks.testing import envelope


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.example.com/in",
        "file:///etc/passwd",
        "ws://hooks.example.com/in",
        "javascript:alert(1)",
        "gopher://hooks.example.com/",
        "hooks.example.com/in",
        "//hooks.example.com/in",
        "",
        "https://",
        "https://user:pass@hooks.example.com/in",
        "http://hooks.example.com:0/",
        "http://hooks.example.com:99999/",
        "http://hooks.exa mple.com/in",  # passed, then failed every attempt as temporary
        "http://hooks.example.com\x00/in",
    ],
)
def test_bad_url_is_refused_at_configuration_time(url: str) -> None:
    with pytest.raises(ConfigurationError):
        Endpoint(url, "s", {"note.created"})


@pytest.mark.parametrize(
    "url",
    ["http://hooks.example.com/in", "https://hooks.example.com:8443/a?b=c", "HTTPS://H.example/"],
)
def test_http_and_https_are_accepted(url: str) -> None:
    assert Endpoint(url, "s", {"note.created"}).url == url


def test_segment_trend_alert_needs_an_encoded_subcategory() -> None:
    with pytest.raises(ConfigurationError, match="subcategory"):
        Endpoint("https://h.example/", "s", {"note.created", "segment.trend.alert"})
    with pytest.raises(ConfigurationError, match="display name"):
        Endpoint("https://h.example/", "s", {"segment.trend.alert"}, subcategory="My Segment")
    ok = Endpoint("https://h.example/", "s", {"segment.trend.alert"}, subcategory="c2VnLTE")
    assert ok.subcategory == "c2VnLTE"


def test_needs_event_types_and_hides_the_secret() -> None:
    with pytest.raises(ConfigurationError):
        Endpoint("https://h.example/", "s", set())
    endpoint = Endpoint("https://h.example/", "whsec-very-secret", "note.created", id="ep-1")
    assert endpoint.events == frozenset({"note.created"})
    assert endpoint.secret == Secret("whsec-very-secret")
    assert "whsec-very-secret" not in repr(endpoint)
    assert endpoint.id == "ep-1"
    assert (
        Endpoint("https://h.example/", "s", "x").id != Endpoint("https://h.example/", "s", "x").id
    )


def test_envelope_bytes_are_fixed_once() -> None:
    event = OutboundEvent("note.created", {"id": "n-1", "text": "é"}, "o-1")
    assert json.loads(event.body) == {
        "eventName": "note.created",
        "version": 1,
        "data": {"id": "n-1", "text": "é"},
    }
    assert event.body is event.body
    assert event.id.startswith("evt_")


def test_envelope_limits() -> None:
    assert len(encode_envelope("e", "x" * (MAX_BODY_SIZE - 100))) <= MAX_BODY_SIZE
    with pytest.raises(PayloadTooLargeError):
        OutboundEvent("e", "x" * MAX_BODY_SIZE)
    with pytest.raises(ConfigurationError):
        OutboundEvent("e", {1j})
    with pytest.raises(ConfigurationError):
        OutboundEvent("", {})
    with pytest.raises(ConfigurationError):
        OutboundEvent("e", {}, version=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        OutboundEvent("e", {}, "bad,org")


@pytest.mark.parametrize("organization_id", ["örg", "o\n1", "o\x1b1", "", "a,b", 123, None])
def test_an_organization_id_a_signature_cannot_carry_is_refused_up_front(
    organization_id: object,
) -> None:
    # Refused when the event or endpoint is made, as a ConfigurationError: not at its first
    # attempt, where sign() raised a SignatureFormatError out of Emulator.run().
    with pytest.raises(ConfigurationError, match="organization_id"):
        OutboundEvent("note.created", {}, organization_id)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="organization_id"):
        Endpoint(
            "https://h.example/",
            "s",
            {"note.created"},
            organization_id=organization_id,  # type: ignore[arg-type]
        )
    assert OutboundEvent("note.created", {}, "o 1~").organization_id == "o 1~"


def test_a_subcategory_must_be_a_string() -> None:
    with pytest.raises(ConfigurationError, match="subcategory must be a string"):
        Endpoint("https://h.example/", "s", {"segment.trend.alert"}, subcategory=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="subcategory must be a string"):
        OutboundEvent("segment.trend.alert", {}, subcategory=["a"])  # type: ignore[arg-type]


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_number_json_cannot_hold_is_refused_not_sent_as_null(number: float) -> None:
    """msgspec writes NaN and infinity as ``null``: the event would carry other data."""
    with pytest.raises(ConfigurationError, match="NaN and infinite numbers have no JSON form"):
        encode_envelope("e", {"ok": None, "deep": [[{"x": number}]]})
    with pytest.raises(TypeError, match="not JSON-encodable: NaN and infinite"):
        envelope("e", [number])
    assert json.loads(encode_envelope("e", {"ok": None, "n": 1.5}))["data"] == {
        "ok": None,
        "n": 1.5,
    }
