"""The inbox contract: what is kept of every authenticated delivery, and how it is queried.

A :class:`ReceivedDelivery` is written once per delivery that passed signature
verification (spec §5.2), before its answer is sent; replays append to it. The query
API (:meth:`Inbox.search`, :meth:`Inbox.get`, :meth:`Inbox.counts`,
:meth:`Inbox.window_counts`, :meth:`Inbox.slowest`) is everything a dashboard needs;
:meth:`Inbox.prune` and :meth:`Inbox.purge` bound what is kept. Deliveries refused
before authentication succeeded are never stored (their bodies are untrusted): they are
only counted per reason, in memory (:meth:`Inbox.rejected`).

Times are timezone-aware UTC :class:`~datetime.datetime` values; durations are seconds;
sizes are bytes.
"""

from __future__ import annotations

import asyncio
import datetime
import secrets
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec

from .._exceptions import ConfigurationError
from ..stores._base import MAX_DURATION

__all__ = [
    "DEFAULT_INBOX_RETENTION",
    "DEFAULT_PAGE_SIZE",
    "Inbox",
    "InboxPage",
    "InboxQuery",
    "ReceivedDelivery",
    "Replay",
    "SyncInbox",
]

DEFAULT_INBOX_RETENTION = 30 * 24 * 3600.0
"""Seconds a received delivery is kept by default: 30 days, as the service's own audit
log (spec §6.3)."""

DEFAULT_PAGE_SIZE = 50
"""Records per :meth:`Inbox.search` page when no ``limit`` is given."""

MAX_PAGE_SIZE = 1000
"""Largest ``limit`` :meth:`Inbox.search` accepts."""

UTC = datetime.UTC


class Replay(msgspec.Struct, frozen=True, kw_only=True):
    """One run of the handlers on a stored delivery (:meth:`WebhookReceiver.replay`).

    Attributes:
        at: When the replay ran (UTC).
        status: The HTTP status the replay would have answered.
        reason: Its reason (``processed``, ``duplicate``, ``handler_failed``...).
        forced: Whether ``force=True`` ran the handlers of an already processed key.
        handler_time: Seconds spent in the handlers, ``None`` when none ran.
        error_type: The class name of a handler's exception, else ``None``.
    """

    at: datetime.datetime
    status: int
    reason: str
    forced: bool = False
    handler_time: float | None = None
    error_type: str | None = None


class ReceivedDelivery(msgspec.Struct, frozen=True, kw_only=True):
    """One authenticated delivery as received and answered; immutable.

    Attributes:
        id: Unique ID (32 lowercase hex digits; a receiver's records get a UUIDv7 that
            sorts by ``received_at``, see :func:`new_record_id`); any unambiguous
            prefix finds it.
        received_at: When the delivery arrived (UTC, microseconds).
        organization_id: ``o`` of the verified signature (spec §5.2).
        event_name: ``eventName`` when the envelope decoded (spec §2.7), else ``None``.
        version: The envelope's ``version`` when it decoded, else ``None``.
        idempotency_key: The key deduplicated on (spec §6.1), ``None`` when none was
            computed (a malformed envelope).
        body: The raw request body, byte for byte.
        content_type: The request's ``Content-Type``, ``None`` when not known.
        user_agent: The request's ``User-Agent``, ``None`` when not known.
        status: The HTTP status answered.
        reason: The answer's reason: ``processed``, ``duplicate``, ``unhandled``,
            ``unprocessable``, ``handler_failed``, ``in_flight``,
            ``store_unavailable``, ``malformed_envelope``, ``retry_later``...
        detail: The library's message for a refusal or failure, else ``""``.
        seen: Deliveries recorded for this idempotency key so far, this one included
            (1 for the first; retries and duplicates count up), counted from the
            records committed before this one: exact where records are written one at
            a time (SQLite, memory); copies of one key recorded at the same moment in
            a PostgreSQL database may share a number.
        error_type: The class name of a handler's (or the store's) exception.
        error_message: A handler exception's message (at most 2000 characters).
        traceback: A handler exception's formatted traceback (at most 16 KiB).
        handler_time: Seconds spent in the handlers, ``None`` when none ran.
        replays: Every replay of this delivery, oldest first.
    """

    id: str
    received_at: datetime.datetime
    organization_id: str
    event_name: str | None
    version: int | None
    idempotency_key: str | None
    body: bytes
    content_type: str | None
    user_agent: str | None
    status: int
    reason: str
    detail: str = ""
    seen: int = 1
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    handler_time: float | None = None
    replays: tuple[Replay, ...] = ()

    @property
    def size(self) -> int:
        """Bytes this record counts against an inbox's size cap (body and traceback)."""
        return len(self.body) + len(self.traceback or "")

    @property
    def current_reason(self) -> str:
        """The reason of the last replay, or of the answer when never replayed."""
        return self.replays[-1].reason if self.replays else self.reason


class InboxQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which records :meth:`Inbox.search` and :meth:`Inbox.purge` select (all: AND).

    Attributes:
        reasons: Only these answer reasons (any of them); empty: every reason.
        status_class: Only statuses ``N00``-``N99``: 2, 4 or 5.
        event_name: Only this exact ``eventName``.
        organization_id: Only this organization.
        since: Only records received at or after this time (aware datetime).
        until: Only records received before this time (aware datetime).
        id_prefix: Only records whose ID starts with this (hex digits).

    Raises:
        ConfigurationError: A ``status_class`` other than 1-5, a naive or out of range
            ``since``/``until``, an ``id_prefix`` that is not lowercase hex, or a NUL
            character in ``reasons``, ``event_name`` or ``organization_id`` (no record
            holds one: the receiver replaces it, and PostgreSQL cannot store it).
    """

    reasons: tuple[str, ...] = ()
    status_class: int | None = None
    event_name: str | None = None
    organization_id: str | None = None
    since: datetime.datetime | None = None
    until: datetime.datetime | None = None
    id_prefix: str | None = None

    def __post_init__(self) -> None:
        if self.status_class is not None and self.status_class not in (1, 2, 3, 4, 5):
            raise ConfigurationError("status_class must be 1, 2, 3, 4 or 5")
        for moment in (self.since, self.until):
            if moment is not None and moment.tzinfo is None:
                raise ConfigurationError("since and until must be timezone-aware datetimes")
            if moment is not None and not _in_utc_range(moment):
                raise ConfigurationError("since and until must lie in years 1..9999 in UTC")
        if self.id_prefix is not None and not all(c in "0123456789abcdef" for c in self.id_prefix):
            raise ConfigurationError("id_prefix must be lowercase hex digits")
        texts = (*self.reasons, self.event_name or "", self.organization_id or "")
        if any("\x00" in text for text in texts):
            raise ConfigurationError(
                "reasons, event_name and organization_id cannot hold a NUL character "
                "(no record holds one)"
            )

    def matches(self, record: ReceivedDelivery) -> bool:
        """Whether ``record`` is selected (the memory backend's filter)."""
        return (
            (not self.reasons or record.reason in self.reasons)
            and (self.status_class is None or record.status // 100 == self.status_class)
            and (self.event_name is None or record.event_name == self.event_name)
            and (self.organization_id is None or record.organization_id == self.organization_id)
            and (self.since is None or record.received_at >= self.since)
            and (self.until is None or record.received_at < self.until)
            and (self.id_prefix is None or record.id.startswith(self.id_prefix))
        )


class InboxPage(msgspec.Struct, frozen=True):
    """One page of :meth:`Inbox.search`, newest first.

    Attributes:
        items: The records, newest first (by ``received_at``, then ``id``).
        next_cursor: Pass it as ``cursor=`` for the next (older) page; ``None`` on the
            last page. Stable while new deliveries arrive (keyset paging).
    """

    items: tuple[ReceivedDelivery, ...]
    next_cursor: str | None = None


def encode_cursor(record: ReceivedDelivery) -> str:
    """``"<received_at in µs>-<id>"``: the keyset position just after ``record``."""
    return f"{to_micros(record.received_at)}-{record.id}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    """``(received_at µs, id)`` from :func:`encode_cursor`'s text.

    Raises:
        ConfigurationError: Not a cursor this module made.
    """
    micros, _, record_id = cursor.partition("-")
    # ASCII only: str.isdigit() holds for "²", which int() refuses (a ValueError)
    if not (micros.isascii() and micros.isdigit()):
        raise ConfigurationError("not an inbox cursor")
    if not (record_id.isascii() and record_id.isalnum()):
        raise ConfigurationError("not an inbox cursor")
    if int(micros) > _MAX_MICROS:  # no record was received after year 9999
        raise ConfigurationError("not an inbox cursor")
    return int(micros), record_id


def new_record_id(micros: int) -> str:
    """A new record ID for a delivery received ``micros`` microseconds after the Unix
    epoch: a UUIDv7 (RFC 9562) as 32 lowercase hex digits.

    48 bits of Unix milliseconds, the version 7, the sub-millisecond fraction in 12
    bits (RFC 9562 §6.2, method 3), the variant, then 62 random bits. IDs of later
    deliveries sort after earlier ones, so a table's ID index grows at its end (one page
    written per commit) instead of taking a random page per record. The first 12 digits
    are the millisecond: show whole IDs, not short prefixes.
    """
    millis, micro = divmod(micros, 1000)
    return (
        f"{millis & 0xFFFF_FFFF_FFFF:012x}7{micro * 4096 // 1000:03x}"
        f"{0x8000_0000_0000_0000 | secrets.randbits(62):016x}"
    )


def to_micros(moment: datetime.datetime) -> int:
    """Microseconds since the Unix epoch of an aware datetime."""
    delta = moment - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime.datetime:
    """The aware UTC datetime ``micros`` microseconds after the Unix epoch."""
    return _EPOCH + datetime.timedelta(microseconds=micros)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
_MAX_MICROS = to_micros(datetime.datetime.max.replace(tzinfo=UTC))
"""The last microsecond a :class:`~datetime.datetime` holds, past which no cursor
points (nor fits a database's 64-bit integer or timestamp)."""


def _in_utc_range(moment: datetime.datetime) -> bool:
    """Whether the aware ``moment`` is a UTC datetime in years 1..9999 (a time such as
    ``0001-01-01T00:00+01:00`` is not: in UTC it falls in year 0)."""
    try:
        moment.astimezone(UTC)
    except OverflowError:
        return False
    return True


def check_limit(limit: int) -> int:
    """``limit`` when it is an ``int`` 1..:data:`MAX_PAGE_SIZE`; else
    :class:`ConfigurationError` (a ``float`` or a ``bool`` too, which the backends'
    slicing and SQL would refuse with their own errors or take as 1)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise ConfigurationError(f"limit must be an int 1..{MAX_PAGE_SIZE}, not {limit!r}")
    return limit


MAX_INBOX_RETENTION = MAX_DURATION
"""The longest retention (1000 years): the prune's cutoff, now minus it, must stay a
:class:`~datetime.datetime` (year 1 on)."""


def check_bounds(retention: float, max_bytes: int | None) -> None:
    """:class:`ConfigurationError` unless ``retention`` is an ``int`` or ``float`` of
    seconds above 0 and at most :data:`MAX_INBOX_RETENTION`, and ``max_bytes`` ``None``
    or an ``int`` >= 1.

    A ``str`` (from the environment) would fail the comparison with a bare ``TypeError``,
    a ``bool`` would read as 1 (``retention=True``: every record older than a second
    pruned), and an infinite or huge retention would make every prune raise
    ``OverflowError`` computing its cutoff.
    """
    if isinstance(retention, bool) or not isinstance(retention, (int, float)):
        raise ConfigurationError(
            f"retention must be a number of seconds > 0, not {type(retention).__name__}"
        )
    if not 0 < retention <= MAX_INBOX_RETENTION:  # NaN fails both
        raise ConfigurationError(
            f"retention must be > 0 seconds and at most {MAX_INBOX_RETENTION} (1000 years)"
        )
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int)):
        raise ConfigurationError(
            f"max_bytes must be an int of bytes (or None: no cap), not {type(max_bytes).__name__}"
        )
    if max_bytes is not None and max_bytes < 1:
        raise ConfigurationError("max_bytes must be >= 1 byte (or None: no cap)")


@runtime_checkable
class Inbox(Protocol):
    """Where received deliveries are kept, replayed from and queried.

    Implementations are safe to call from several threads at once. ``a``-prefixed
    methods are the async twins; :class:`SyncInbox` provides them for a blocking
    backend by running the blocking method in a worker thread. Backends raise whatever
    their driver raises; the receiver answers 503 when :meth:`record` fails.

    Attributes:
        retention: Seconds a record is kept (:meth:`prune`).
        max_bytes: Total :attr:`ReceivedDelivery.size` kept, ``None`` for no cap.
    """

    retention: float
    max_bytes: int | None

    def record(self, delivery: ReceivedDelivery) -> int:
        """Store ``delivery`` durably (its ``seen`` is ignored).

        Returns:
            The deliveries now recorded for its idempotency key, this one included
            (stored as its ``seen``); 1 when it has no key.
        """
        ...

    def add_replay(self, delivery_id: str, replay: Replay) -> bool:
        """Append ``replay`` to the record ``delivery_id``; ``False`` when there is none."""
        ...

    def get(self, delivery_id: str) -> ReceivedDelivery | None:
        """The record with this exact ID, or ``None``."""
        ...

    def search(
        self,
        query: InboxQuery | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
    ) -> InboxPage:
        """Records matching ``query``, newest first, at most ``limit`` (1..1000).

        Args:
            query: The filters; ``None``: every record.
            limit: Records per page.
            cursor: ``next_cursor`` of the previous page.

        Raises:
            ConfigurationError: A bad ``limit`` or ``cursor``.
        """
        ...

    def counts(
        self, *, since: datetime.datetime | None = None, until: datetime.datetime | None = None
    ) -> dict[str, int]:
        """Records per answer reason received in ``[since, until)``."""
        ...

    def window_counts(
        self, windows: Sequence[tuple[datetime.datetime | None, datetime.datetime | None]]
    ) -> list[dict[str, int]]:
        """Records per answer reason in each window: what
        ``[counts(since=s, until=u) for s, u in windows]`` returns, in one query where
        the backend can (the dashboard's overview: 26 windows, one query).

        Args:
            windows: ``(since, until)`` pairs: records received in ``[since, until)``
                (aware datetimes; ``None``: unbounded on that side). They may overlap.

        Returns:
            One ``{reason: count}`` dict per window, in order; a reason with no record
            in a window is left out of its dict.

        Raises:
            ConfigurationError: A naive datetime.
        """
        ...

    def slowest(
        self,
        *,
        limit: int = 10,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[ReceivedDelivery]:
        """The records with the longest ``handler_time`` in ``[since, until)``, slowest
        first (records where no handler ran are left out)."""
        ...

    def prune(self) -> int:
        """Delete records older than :attr:`retention`, then the oldest ones until the
        total size is within :attr:`max_bytes`; returns how many were deleted."""
        ...

    def purge(self, query: InboxQuery | None = None) -> int:
        """Delete every record ``query`` selects (``None``: all); returns how many."""
        ...

    def count_rejected(self, reason: str) -> None:
        """Count one delivery refused before authentication succeeded (in memory)."""
        ...

    def rejected(self) -> dict[str, int]:
        """Refused, unstored deliveries per reason since this object was created."""
        ...

    async def arecord(self, delivery: ReceivedDelivery) -> int:
        """Async twin of :meth:`record`."""
        ...

    async def aadd_replay(self, delivery_id: str, replay: Replay) -> bool:
        """Async twin of :meth:`add_replay`."""
        ...

    async def aget(self, delivery_id: str) -> ReceivedDelivery | None:
        """Async twin of :meth:`get`."""
        ...

    async def asearch(
        self,
        query: InboxQuery | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
    ) -> InboxPage:
        """Async twin of :meth:`search`."""
        ...

    async def acounts(
        self, *, since: datetime.datetime | None = None, until: datetime.datetime | None = None
    ) -> dict[str, int]:
        """Async twin of :meth:`counts`."""
        ...

    async def awindow_counts(
        self, windows: Sequence[tuple[datetime.datetime | None, datetime.datetime | None]]
    ) -> list[dict[str, int]]:
        """Async twin of :meth:`window_counts`."""
        ...

    async def aslowest(
        self,
        *,
        limit: int = 10,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[ReceivedDelivery]:
        """Async twin of :meth:`slowest`."""
        ...

    async def aprune(self) -> int:
        """Async twin of :meth:`prune`."""
        ...

    async def apurge(self, query: InboxQuery | None = None) -> int:
        """Async twin of :meth:`purge`."""
        ...


class SyncInbox:
    """Base for a blocking backend: the rejection counters, and async twins that run
    the blocking methods in a worker thread. Subclasses implement the sync methods."""

    retention: float = DEFAULT_INBOX_RETENTION
    max_bytes: int | None = None

    def __init__(self) -> None:
        self._rejected: Counter[str] = Counter()
        self._rejected_lock = threading.Lock()

    def count_rejected(self, reason: str) -> None:
        with self._rejected_lock:
            self._rejected[reason] += 1

    def rejected(self) -> dict[str, int]:
        with self._rejected_lock:
            return dict(self._rejected)

    def record(self, delivery: ReceivedDelivery) -> int:
        raise NotImplementedError

    def add_replay(self, delivery_id: str, replay: Replay) -> bool:
        raise NotImplementedError

    def get(self, delivery_id: str) -> ReceivedDelivery | None:
        raise NotImplementedError

    def search(
        self,
        query: InboxQuery | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
    ) -> InboxPage:
        raise NotImplementedError

    def counts(
        self, *, since: datetime.datetime | None = None, until: datetime.datetime | None = None
    ) -> dict[str, int]:
        raise NotImplementedError

    def window_counts(
        self, windows: Sequence[tuple[datetime.datetime | None, datetime.datetime | None]]
    ) -> list[dict[str, int]]:
        """One :meth:`counts` per window; a backend that can count them all in one query
        overrides this."""
        return [self.counts(since=since, until=until) for since, until in windows]

    def slowest(
        self,
        *,
        limit: int = 10,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[ReceivedDelivery]:
        raise NotImplementedError

    def prune(self) -> int:
        raise NotImplementedError

    def purge(self, query: InboxQuery | None = None) -> int:
        raise NotImplementedError

    async def arecord(self, delivery: ReceivedDelivery) -> int:
        return await asyncio.to_thread(self.record, delivery)

    async def aadd_replay(self, delivery_id: str, replay: Replay) -> bool:
        return await asyncio.to_thread(self.add_replay, delivery_id, replay)

    async def aget(self, delivery_id: str) -> ReceivedDelivery | None:
        return await asyncio.to_thread(self.get, delivery_id)

    async def asearch(
        self,
        query: InboxQuery | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
    ) -> InboxPage:
        return await asyncio.to_thread(self.search, query, limit=limit, cursor=cursor)

    async def acounts(
        self, *, since: datetime.datetime | None = None, until: datetime.datetime | None = None
    ) -> dict[str, int]:
        return await asyncio.to_thread(self.counts, since=since, until=until)

    async def awindow_counts(
        self, windows: Sequence[tuple[datetime.datetime | None, datetime.datetime | None]]
    ) -> list[dict[str, int]]:
        """One :meth:`acounts` per window (so a subclass's own async twin, e.g. one run
        in a thread-sensitive executor, is used); a backend that overrides
        :meth:`window_counts` overrides this too."""
        return [await self.acounts(since=since, until=until) for since, until in windows]

    async def aslowest(
        self,
        *,
        limit: int = 10,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[ReceivedDelivery]:
        return await asyncio.to_thread(self.slowest, limit=limit, since=since, until=until)

    async def aprune(self) -> int:
        return await asyncio.to_thread(self.prune)

    async def apurge(self, query: InboxQuery | None = None) -> int:
        return await asyncio.to_thread(self.purge, query)
