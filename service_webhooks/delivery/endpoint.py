"""Endpoint configuration and the events delivered to it (spec §2.6, §2.7, §6.2).

The rules:

* An endpoint has a URL whose scheme is ``http`` or ``https`` (anything else is refused
  when the configuration is made, not at delivery time), a secret, the set of event
  types it receives, and a ``subcategory``, required when it subscribes to
  ``segment.trend.alert`` (the encoded value from the subcategory listing, never the
  display name; this emulator cannot check the listing, so it only requires a
  non-empty value without spaces).
* An event's body is the envelope ``{"eventName", "version", "data"}`` (spec §2.7),
  encoded once, at most 1 MiB; every attempt sends these exact bytes.
* An endpoint is configured for one payload version (spec §9; default 1): an event
  reaches it only when the event's ``version`` is that version. A version 2 event is
  not sent to an endpoint still configured for version 1.
* An event reaches an endpoint of the same organization that subscribes to its name and
  is configured for its payload version; an event that carries a ``subcategory``
  reaches only endpoints with that subcategory.
"""

from __future__ import annotations

import itertools
import os
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._credentials import Secret, check_organization_id
from .._envelope import MAX_BODY_SIZE, encode_envelope
from .._exceptions import ConfigurationError

__all__ = [
    "DEFAULT_ORGANIZATION",
    "MAX_BODY_SIZE",
    "SUBCATEGORY_EVENTS",
    "Endpoint",
    "OutboundEvent",
    "check_organization_id",
    "check_url",
    "encode_envelope",
]

SUBCATEGORY_EVENTS = frozenset({"segment.trend.alert"})
"""Event types whose subscription needs a ``subcategory`` (spec §2.6, §6.2)."""

DEFAULT_ORGANIZATION = "org-emulator"
"""The ``o`` value used when none is given."""

_ids = itertools.count(1)
_run = os.urandom(3).hex()


def _new_id(prefix: str) -> str:
    return f"{prefix}_{_run}{next(_ids):07d}"


@dataclass(frozen=True, slots=True)
class OutboundEvent:
    """One webhook-enabled event, queued for every subscribed endpoint.

    Attributes:
        name: ``eventName`` (spec §6.2), e.g. ``"note.created"``.
        data: The ``data`` JSON value.
        organization_id: The account the event belongs to (the ``o`` of the signature).
        version: Payload version (spec §9), currently 1.
        subcategory: For ``segment.trend.alert``: the subcategory it belongs to.
        id: Event ID shown in the audit log (not part of the body); generated.
        body: The envelope bytes, computed once (see :func:`encode_envelope`).

    Raises:
        ConfigurationError, PayloadTooLargeError: see :func:`encode_envelope`; also an
            ``organization_id`` a signature cannot carry (see
            :func:`check_organization_id`) or a ``subcategory`` that is not a string.
    """

    name: str
    data: Any = None
    organization_id: str = DEFAULT_ORGANIZATION
    version: int = 1
    subcategory: str | None = None
    id: str = field(default_factory=lambda: _new_id("evt"))
    body: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_organization_id(self.organization_id)
        if self.subcategory is not None and not isinstance(self.subcategory, str):
            raise ConfigurationError("subcategory must be a string")
        object.__setattr__(self, "body", encode_envelope(self.name, self.data, self.version))


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One webhook endpoint configuration (spec §2.6).

    Args:
        url: Where deliveries are POSTed; ``http://`` or ``https://`` with a host.
        secret: The signing secret (``str``, ``bytes`` or :class:`Secret`); never shown
            in ``repr``.
        events: The event types (``eventName`` values) that trigger deliveries here.
        subcategory: Required when ``events`` holds ``segment.trend.alert``.
        organization_id: The account that owns the endpoint.
        payload_version: The envelope ``version`` this endpoint is configured for
            (spec §9); only events of that version are sent to it. Default 1.
        id: Identifier used by the audit log; generated when omitted.

    Raises:
        ConfigurationError: Another scheme, no host, credentials in the URL, no event
            type, a missing/blank subcategory for ``segment.trend.alert``, an
            ``organization_id`` a signature cannot carry (:func:`check_organization_id`),
            or a ``payload_version`` that is not an int >= 1.
    """

    url: str
    secret: Secret = field(repr=False)
    events: frozenset[str]
    subcategory: str | None = None
    organization_id: str = DEFAULT_ORGANIZATION
    payload_version: int = 1
    id: str = field(default_factory=lambda: _new_id("ep"))

    def __init__(
        self,
        url: str,
        secret: Secret | str | bytes,
        events: Iterable[str],
        *,
        subcategory: str | None = None,
        organization_id: str = DEFAULT_ORGANIZATION,
        payload_version: int = 1,
        id: str | None = None,
    ) -> None:
        check_url(url)
        names = frozenset([events] if isinstance(events, str) else events)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ConfigurationError("an endpoint needs at least one event type")
        if subcategory is not None and not isinstance(subcategory, str):
            raise ConfigurationError("subcategory must be a string")
        if names & SUBCATEGORY_EVENTS and (
            not subcategory or subcategory != subcategory.strip() or " " in subcategory
        ):
            raise ConfigurationError(
                "segment.trend.alert needs a subcategory: the encoded value from the "
                "subcategory listing, not the display name (spec §2.6)"
            )
        check_organization_id(organization_id)
        if (
            isinstance(payload_version, bool)
            or not isinstance(payload_version, int)
            or payload_version < 1
        ):
            raise ConfigurationError("payload_version must be an int >= 1 (spec §9)")
        set_ = object.__setattr__
        set_(self, "url", url)
        set_(self, "secret", secret if isinstance(secret, Secret) else Secret(secret))
        set_(self, "events", names)
        set_(self, "subcategory", subcategory)
        set_(self, "organization_id", organization_id)
        set_(self, "payload_version", payload_version)
        set_(self, "id", id or _new_id("ep"))

    def receives(self, event: OutboundEvent) -> bool:
        """Whether ``event`` is delivered to this endpoint (organization, name, payload
        version, subcategory)."""
        if event.organization_id != self.organization_id or event.name not in self.events:
            return False
        if event.version != self.payload_version:
            return False
        return event.subcategory is None or event.subcategory == self.subcategory


def check_url(url: str) -> None:
    """Check ``url`` as an endpoint's URL (:class:`Endpoint` does).

    Raises:
        ConfigurationError: Not a string, unparsable (a bad port), another scheme than
            ``http``/``https``, no host, a host with spaces or control characters,
            credentials, or port 0.
    """
    if not isinstance(url, str):
        raise ConfigurationError("the endpoint URL must be a string")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise ConfigurationError(f"invalid endpoint URL: {error}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ConfigurationError(
            f"endpoint URL scheme must be http or https, got {parts.scheme!r} (spec §2.6)"
        )
    if not parts.hostname:
        raise ConfigurationError("endpoint URL has no host")
    if any(char.isspace() or not char.isprintable() for char in parts.netloc):
        raise ConfigurationError("endpoint URL host must not contain spaces or control characters")
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError("endpoint URL must not carry credentials")
    if port == 0:
        raise ConfigurationError("endpoint URL port must be 1-65535")
