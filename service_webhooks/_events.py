"""Typed events: the envelope's ``data`` for the event types the spec names (spec §6.2, §9).

The rule, from spec §9: adding a field anywhere, or adding a value to a field with a
fixed set of string values, is a compatible change and comes without a new version.
So every model here ignores unknown fields, and an unknown enum value (a new
``duration``) is kept as a plain ``str``, never an error. A new *version* of an event
is an incompatible change: the models are registered per ``(eventName, version)``
and data of a version without a model is passed through as decoded JSON.

Known models (spec §6.2):

=======================  =======  =========================================
eventName                version  model
=======================  =======  =========================================
``note.created``         1        :class:`NoteCreated`
``segment.trend.alert``  1        :class:`SegmentTrendAlert`
=======================  =======  =========================================
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import msgspec

__all__ = [
    "EVENT_MODELS",
    "Duration",
    "Event",
    "NoteCreated",
    "SegmentTrendAlert",
]

DataT = TypeVar("DataT")


class Duration(enum.StrEnum):
    """``segment.trend.alert`` durations listed by spec §6.2 (the set may grow)."""

    DAILY = "DAILY"
    WEEKLY = "WEEKLY"
    MONTHLY = "MONTHLY"


class NoteCreated(msgspec.Struct, frozen=True, kw_only=True):
    """``note.created`` v1 data: a note was created for a session (spec §6.2).

    Attributes:
        id: The note's identifier.
        author: The author's e-mail address.
        text: The note's text.
    """

    id: str
    author: str
    text: str


class SegmentTrendAlert(msgspec.Struct, frozen=True, kw_only=True):
    """``segment.trend.alert`` v1 data (spec §6.2; its other fields are not specified).

    Attributes:
        duration: A :class:`Duration` member when the value is one of the known ones
            (``DAILY``, ``WEEKLY``, ``MONTHLY``); otherwise the value as a plain ``str``
            (spec §9: new values may appear without a new version). Both compare equal
            to their text.
    """

    duration: str

    @property
    def known_duration(self) -> Duration | None:
        """The duration as a :class:`Duration`, or ``None`` when the value is new."""
        return self.duration if isinstance(self.duration, Duration) else None

    def __post_init__(self) -> None:
        if self.duration in Duration.__members__:
            msgspec.structs.force_setattr(self, "duration", Duration(self.duration))


EVENT_MODELS: Mapping[tuple[str, int], type[msgspec.Struct]] = {
    ("note.created", 1): NoteCreated,
    ("segment.trend.alert", 1): SegmentTrendAlert,
}
"""The typed model for each known ``(eventName, version)``."""


class Event(msgspec.Struct, Generic[DataT], frozen=True):
    """One authenticated, decoded delivery, as handed to a handler.

    Attributes:
        name: ``eventName`` of the envelope (spec §2.7).
        version: ``version`` of the envelope: the payload version (spec §9).
        data: The typed model from :data:`EVENT_MODELS` for known
            ``(name, version)`` pairs, else the decoded JSON value (``dict``, ``list``,
            ``str``, ``int``, ``float``, ``bool`` or ``None``).
        organization_id: ``o`` from ``Service-Signature``: the sending account.
        timestamp: ``t`` from ``Service-Signature``: when this attempt was signed,
            Unix seconds (a retry carries a new one).
        idempotency_key: The key this delivery was deduplicated under.
        body: The exact raw request body (``bytes``), e.g. to hand the event to a
            task queue unchanged.
    """

    name: str
    version: int
    data: DataT
    organization_id: str
    timestamp: int
    idempotency_key: str
    body: bytes = b""

    def __repr__(self) -> str:
        return (
            f"Event(name={self.name!r}, version={self.version}, "
            f"organization_id={self.organization_id!r}, timestamp={self.timestamp}, "
            f"idempotency_key={self.idempotency_key[:12]!r}…, data={self.data!r:.200})"
        )


AnyEvent = Event[Any]
