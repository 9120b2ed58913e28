"""The inbox in the project's database, through the ORM (:class:`DjangoInbox`).

One row per authenticated delivery (:class:`~.models.ReceivedDeliveryRecord`); the
query API, paging and pruning follow :class:`~service_webhooks.inbox.Inbox` exactly
(the same contract tests run on it, on SQLite and PostgreSQL).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import math
import time
from collections.abc import Callable

import msgspec
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import CharField, Count, F, Func, Q, QuerySet, Subquery, Sum, Value

from service_webhooks.inbox import (
    DEFAULT_INBOX_RETENTION,
    InboxPage,
    InboxQuery,
    ReceivedDelivery,
    Replay,
    SyncInbox,
)
from service_webhooks.inbox.backend import (
    DEFAULT_PAGE_SIZE,
    check_bounds,
    check_limit,
    decode_cursor,
    encode_cursor,
    from_micros,
)

from .models import ReceivedDeliveryRecord

__all__ = ["DjangoInbox"]

logger = logging.getLogger("service_webhooks")

_PRUNE_BATCH = 500
"""Records deleted by one statement of a prune (their IDs are read that many at once)."""
_STEP_BATCHES = 4
"""Statements of expired records, and of records past the size cap, the automatic prune
step deletes at most (2,000 records each, as the SQL inboxes' step): a delivery's prune
stays short however large the backlog (a lowered retention, a first prune)."""
_FIELDS = [f for f in ReceivedDelivery.__struct_fields__ if f not in ("seen", "replays")]
_LENGTHS = {
    field.name: field.max_length
    for field in ReceivedDeliveryRecord._meta.get_fields()
    if isinstance(field, CharField) and field.max_length and field.name in _FIELDS
}  # the varchar columns (255 characters; the reason 64; the ID, 32 hex digits, fits)


class DjangoInbox(SyncInbox):
    """The :class:`~service_webhooks.inbox.Inbox` protocol over
    :class:`~.models.ReceivedDeliveryRecord` (migration ``0002``).

    Args:
        using: The database alias (``DATABASES`` key) holding the records.
        retention: Seconds a record is kept (30 days, spec §6.3).
        max_bytes: Total record size kept (body and traceback), bytes; ``None``: no cap.
        clock: Current time in Unix seconds (for :meth:`prune`); default :func:`time.time`.

    Raises:
        ConfigurationError: A bound out of range.

    Text longer than its column is kept cut to it (255 characters: an ``eventName``
    may fill a 1 MiB body; the reason, 64): the body keeps all of it. Database errors
    propagate (the receiver answers 503 when :meth:`record` fails). A
    record and its ``seen`` count are written in one ``INSERT``; the async twins run
    in Django's thread-sensitive executor, like Django's async ORM. Every 1000 records
    it prunes by itself.
    """

    _prune_every = 1000

    def __init__(
        self,
        *,
        using: str = "default",
        retention: float = DEFAULT_INBOX_RETENTION,
        max_bytes: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__()
        check_bounds(retention, max_bytes)
        self.using = using
        self.retention = retention
        self.max_bytes = max_bytes
        self._clock = clock or time.time
        self._since_prune = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(using={self.using!r})"

    @property
    def _rows(self) -> QuerySet[ReceivedDeliveryRecord]:
        return ReceivedDeliveryRecord.objects.using(self.using)

    def record(self, delivery: ReceivedDelivery) -> int:
        values = {name: getattr(delivery, name) for name in _FIELDS}
        for name, length in _LENGTHS.items():  # PostgreSQL refuses a longer one: a 503
            if values[name] is not None:
                values[name] = values[name][:length]
        values["received_at"] = _stored_time(delivery.received_at)
        # seen: counted by the INSERT itself, one write statement (SQLite refuses at once,
        # "database is locked", a transaction that reads then writes while another writes)
        key = values["idempotency_key"]
        same_key = self._rows.filter(idempotency_key=key).values(n=Func("id", function="COUNT"))
        seen = Subquery(same_key) + 1 if key is not None else Value(1)
        row = self._rows.create(**values, seen=seen, replays=[], size=delivery.size)
        row.refresh_from_db(fields=["seen"])
        self._since_prune += 1
        if self._since_prune >= self._prune_every:
            self._since_prune = 0
            self._prune_step()
        return row.seen

    def _prune_step(self) -> None:
        """The automatic prune, on a delivery's path: at most :data:`_STEP_BATCHES`
        batches of expired records, then as many past the ``max_bytes`` cap, each
        statement committed alone (SQLite refuses at once a transaction that reads then
        writes while another connection writes); a failure is logged, never the
        delivery's answer (its record is written). Inside a caller's transaction, in a
        savepoint: a failure leaves that transaction usable."""
        in_transaction = transaction.get_connection(self.using).in_atomic_block
        try:
            with (
                transaction.atomic(using=self.using) if in_transaction else contextlib.nullcontext()
            ):
                self._prune_expired(_STEP_BATCHES)
                if self.max_bytes is not None:
                    self._prune_bytes(_STEP_BATCHES)
        except Exception as error:  # housekeeping: the answer stands
            logger.warning("service_webhooks: inbox prune step failed: %s", type(error).__name__)

    def add_replay(self, delivery_id: str, replay: Replay) -> bool:
        row = self._rows.filter(id=delivery_id)
        with transaction.atomic(using=self.using):
            # the write lock first (on PostgreSQL the row's, as SELECT FOR UPDATE): SQLite
            # refuses at once ("database is locked", no busy wait) a transaction that reads
            # then writes while another connection writes, and this one waits instead
            if not row.update(replays=F("replays")):
                return False
            replays = row.values_list("replays", flat=True).get()
            row.update(replays=[*replays, msgspec.to_builtins(replay)])
        return True

    def get(self, delivery_id: str) -> ReceivedDelivery | None:
        row = self._rows.filter(id=delivery_id).first()
        return None if row is None else _delivery(row)

    def search(
        self,
        query: InboxQuery | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
    ) -> InboxPage:
        check_limit(limit)
        rows = self._select(query)
        if cursor is not None:
            micros, record_id = decode_cursor(cursor)
            moment = _stored_time(from_micros(micros))
            # the first condition alone is an index range; the OR only trims its edge
            rows = rows.filter(received_at__lte=moment).filter(
                Q(received_at__lt=moment) | Q(received_at=moment, id__lt=record_id)
            )
        found = list(rows.order_by("-received_at", "-id")[: limit + 1])
        items = [_delivery(row) for row in found[:limit]]
        return InboxPage(tuple(items), encode_cursor(items[-1]) if len(found) > limit else None)

    def counts(
        self, *, since: datetime.datetime | None = None, until: datetime.datetime | None = None
    ) -> dict[str, int]:
        rows = self._select(InboxQuery(since=since, until=until)).order_by()
        grouped = rows.values_list("reason").annotate(n=Count("id"))
        return {reason: int(n) for reason, n in grouped}

    def slowest(
        self,
        *,
        limit: int = 10,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[ReceivedDelivery]:
        check_limit(limit)
        rows = self._select(InboxQuery(since=since, until=until)).filter(handler_time__isnull=False)
        ordered = rows.order_by("-handler_time", "-received_at", "-id")[:limit]
        return [_delivery(row) for row in ordered]

    def prune(self) -> int:
        deleted = self._prune_expired(math.inf)
        if self.max_bytes is not None:
            deleted += self._prune_bytes(math.inf)
        return deleted

    def _prune_expired(self, batches: float) -> int:
        """Delete the records past retention, oldest first, :data:`_PRUNE_BATCH` per
        statement (no one statement holds the table, on SQLite the write lock every
        delivery's record waits for, for the whole backlog); at most ``batches``
        statements."""
        cutoff = _stored_time(from_micros(int((self._clock() - self.retention) * 1_000_000)))
        expired = self._rows.filter(received_at__lt=cutoff).order_by("received_at", "id")
        deleted = 0
        while batches > 0:
            batches -= 1
            doomed = list(expired.values_list("id", flat=True)[:_PRUNE_BATCH])
            deleted += self._rows.filter(id__in=doomed).delete()[0] if doomed else 0
            if len(doomed) < _PRUNE_BATCH:
                break
        return deleted

    def _prune_bytes(self, batches: float) -> int:
        """Delete the oldest records past the ``max_bytes`` cap, at most ``batches``
        statements of :data:`_PRUNE_BATCH`."""
        assert self.max_bytes is not None
        deleted = 0
        # the cap: the database sums the sizes; the oldest records go, a batch at a time,
        # until the rest fits (only the IDs and sizes of the records deleted are read)
        total = self._rows.aggregate(total=Sum("size"))["total"] or 0
        oldest_first = self._rows.order_by("received_at", "id").values_list("id", "size")
        while total > self.max_bytes and batches > 0:
            batches -= 1
            doomed = []
            for record_id, size in oldest_first[:_PRUNE_BATCH]:
                if total <= self.max_bytes:
                    break
                doomed.append(record_id)
                total -= size
            if not doomed:  # emptied meanwhile (a purge)
                break
            deleted += self._rows.filter(id__in=doomed).delete()[0]
        return deleted

    def purge(self, query: InboxQuery | None = None) -> int:
        deleted, _ = self._select(query).delete()
        return deleted

    def _select(self, query: InboxQuery | None) -> QuerySet[ReceivedDeliveryRecord]:
        rows = self._rows
        if query is None:
            return rows
        if query.reasons:
            rows = rows.filter(reason__in=query.reasons)
        if query.status_class is not None:
            low = query.status_class * 100
            rows = rows.filter(status__gte=low, status__lte=low + 99)
        if query.event_name is not None:
            rows = rows.filter(event_name=query.event_name)
        if query.organization_id is not None:
            rows = rows.filter(organization_id=query.organization_id)
        if query.since is not None:
            rows = rows.filter(received_at__gte=_stored_time(query.since))
        if query.until is not None:
            rows = rows.filter(received_at__lt=_stored_time(query.until))
        if query.id_prefix:
            rows = rows.filter(id__startswith=query.id_prefix)
        return rows

    async def arecord(self, delivery: ReceivedDelivery) -> int:
        return await sync_to_async(self.record)(delivery)

    async def aadd_replay(self, delivery_id: str, replay: Replay) -> bool:
        return await sync_to_async(self.add_replay)(delivery_id, replay)

    async def aget(self, delivery_id: str) -> ReceivedDelivery | None:
        return await sync_to_async(self.get)(delivery_id)

    async def asearch(
        self,
        query: InboxQuery | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
    ) -> InboxPage:
        return await sync_to_async(self.search)(query, limit=limit, cursor=cursor)

    async def acounts(
        self, *, since: datetime.datetime | None = None, until: datetime.datetime | None = None
    ) -> dict[str, int]:
        return await sync_to_async(self.counts)(since=since, until=until)

    async def aslowest(
        self,
        *,
        limit: int = 10,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[ReceivedDelivery]:
        return await sync_to_async(self.slowest)(limit=limit, since=since, until=until)

    async def aprune(self) -> int:
        return await sync_to_async(self.prune)()

    async def apurge(self, query: InboxQuery | None = None) -> int:
        return await sync_to_async(self.purge)(query)


def _stored_time(moment: datetime.datetime) -> datetime.datetime:
    """An aware UTC time as Django stores it (naive UTC when ``USE_TZ`` is off)."""
    moment = moment.astimezone(datetime.UTC)
    return moment if settings.USE_TZ else moment.replace(tzinfo=None)


def _delivery(row: ReceivedDeliveryRecord) -> ReceivedDelivery:
    values = {name: getattr(row, name) for name in _FIELDS}
    moment = row.received_at
    values["received_at"] = moment.replace(tzinfo=datetime.UTC) if moment.tzinfo is None else moment
    values["body"] = bytes(row.body)
    replays = msgspec.convert(row.replays, tuple[Replay, ...])
    return ReceivedDelivery(**values, seen=row.seen, replays=replays)
