"""The inbox in the project's database, through the ORM (:class:`DjangoInbox`).

One row per authenticated delivery (:class:`~.models.ReceivedDeliveryRecord`); the
query API, paging and pruning follow :class:`~service_webhooks.inbox.Inbox` exactly
(the same contract tests run on it, on SQLite and PostgreSQL).
"""

from __future__ import annotations

import datetime
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

_PRUNE_BATCH = 500
"""Records deleted by one statement of the size cap (their IDs are read that many at once)."""
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
            self.prune()
        return row.seen

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
        cutoff = from_micros(int((self._clock() - self.retention) * 1_000_000))
        deleted, _ = self._rows.filter(received_at__lt=_stored_time(cutoff)).delete()
        if self.max_bytes is None:
            return deleted
        # the cap: the database sums the sizes; the oldest records go, a batch at a time,
        # until the rest fits (only the IDs and sizes of the records deleted are read)
        total = self._rows.aggregate(total=Sum("size"))["total"] or 0
        oldest_first = self._rows.order_by("received_at", "id").values_list("id", "size")
        while total > self.max_bytes:
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
