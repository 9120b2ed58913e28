"""The SQL both database backends share: one table, keyset paging, pruning by age and size.

Statements are written with ``?`` placeholders; a backend with another paramstyle
rewrites them once (:attr:`SQLInbox._placeholder`). Times are stored as the backend
likes (:meth:`SQLInbox._time_param`, :meth:`SQLInbox._time_value`).

The ``max_bytes`` cap reads the table's total size from a small side table, the **size
total** (``<table>_size_total``: the sum of its ``bytes``), that triggers on the inbox
table keep in the transaction of every ``INSERT``, ``DELETE`` and size change, whoever
runs it (this process, another one, a store's joined write); each backend's module says
how. With it a cap step reads a few rows and deletes the oldest records, one batch at
most, whatever the inbox's size; without it (a PostgreSQL table made without it) the
cap sums every record's size at each prune, as it always did.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from .._outcome import PROCESSED
from ._base import (
    DEFAULT_PAGE_SIZE,
    InboxPage,
    InboxQuery,
    ReceivedDelivery,
    Replay,
    SyncInbox,
    check_limit,
    decode_cursor,
    encode_cursor,
    from_micros,
    to_micros,
)

COLUMNS = (
    "id",
    "received_at",
    "organization_id",
    "event_name",
    "version",
    "idempotency_key",
    "body",
    "content_type",
    "user_agent",
    "status",
    "reason",
    "detail",
    "seen",
    "error_type",
    "error_message",
    "traceback",
    "handler_time",
    "replays",
)
_SELECT = ", ".join(COLUMNS)
_INSERTED = [c for c in COLUMNS if c not in ("seen", "replays")]
_PROCESSED = [
    c
    for c in _INSERTED
    if c not in ("status", "reason", "detail", "error_type", "error_message", "traceback")
]
"""The columns a processed delivery's record sets by parameter: the answer's status and
reason are written into its SQL, ``detail`` and the error columns keep their defaults
(``''``, ``NULL``)."""

logger = logging.getLogger("service_webhooks")

PRUNE_BATCH = 2000
"""Most records one ``DELETE`` of a prune removes, oldest first: a prune's hold on the
table (SQLite's write lock) and a delivery's automatic prune step stay short however
large the backlog of expired records (a lowered retention, a first prune)."""

MAX_IDENTIFIER = 63
"""Longest name PostgreSQL keeps (bytes; a longer one is cut): the longest table name
both backends accept, and the length :func:`derived_name` keeps to."""

_replays_decoder = msgspec.json.Decoder(tuple[Replay, ...])
_encoder = msgspec.json.Encoder()

INDEXES = (
    ("received", "received_at DESC, id DESC"),
    ("key", "idempotency_key"),
    ("reason", "reason, received_at DESC, id DESC"),
    ("event", "event_name, received_at DESC, id DESC"),
    ("organization", "organization_id, received_at DESC, id DESC"),
    ("status_class", "(status / 100), received_at DESC, id DESC"),
    ("organization_status_class", "organization_id, (status / 100), received_at DESC, id DESC"),
)
"""Every index: keyset order, the ``seen`` count, then one per filter followed by the
keyset order (a filtered page, and the page after it, is a range of one index read in
order), and one for the dashboard's most used pair: an organization's failures
(``status / 100`` is the status class the queries compare)."""

ESSENTIAL_INDEXES = INDEXES[:2]
"""Keyset order and the ``seen`` count only: filtered queries walk the keyset index."""

_HEX = "0123456789abcdef"


def _prefix_end(prefix: str) -> str | None:
    """The smallest hex string above every string starting with ``prefix`` (lowercase
    hex), or ``None`` when there is none (``prefix`` is all ``f``)."""
    stem = prefix.rstrip("f")
    if not stem:
        return None
    return stem[:-1] + _HEX[_HEX.index(stem[-1]) + 1]


def derived_name(name: str, suffix: str) -> str:
    """``<name>_<suffix>``, the name of something made for the table ``name`` (unqualified):
    when longer than :data:`MAX_IDENTIFIER`, ``name`` is cut and followed by 8 hex digits
    of its hash, so that PostgreSQL does not cut it (two such names would then be one)."""
    full = f"{name}_{suffix}"
    if len(full) <= MAX_IDENTIFIER:
        return full
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_IDENTIFIER - len(suffix) - 10]}_{digest}_{suffix}"


def derived_table(table: str, suffix: str) -> str:
    """:func:`derived_name` for a table named ``name`` or ``schema.name``, in its schema."""
    schema_name, dot, name = table.rpartition(".")
    return f"{schema_name}{dot}{derived_name(name, suffix)}"


def size_total_table(table: str) -> str:
    """The size total's table for the inbox table ``table`` (``<table>_size_total``)."""
    return derived_table(table, "size_total")


class SQLInbox(SyncInbox):
    """A table-backed inbox; subclasses provide connections and dialect details."""

    table: str
    _placeholder = "?"
    _prune_every = 1000

    def __init__(self) -> None:
        super().__init__()
        self._records_since_prune = 0
        self._count_lock = threading.Lock()
        self._warned_no_size_total = False
        table = self._table_sql()
        self._insert_only = self._sql(_insert_sql(table, _INSERTED))
        """The record's ``INSERT`` as a store runs it in its own transaction: no
        ``RETURNING`` (nobody reads the row back there, and SQLite's costs 10-15 µs)."""
        self._insert = self._insert_only + " RETURNING seen"
        self._insert_processed = self._sql(
            _insert_sql(
                table,
                _PROCESSED,
                {"status": str(PROCESSED.status), "reason": f"'{PROCESSED.reason}'"},
            )
        )
        """A processed delivery's record as a store runs it with its completion: the
        answer's constant columns written into the SQL, only the rest as parameters
        (:meth:`processed_statement`)."""
        self._get = self._sql(f"SELECT {_SELECT} FROM {table} WHERE id = ?")

    # -- dialect hooks ----------------------------------------------------------------

    def _table_sql(self) -> str:
        return self.table

    def _time_param(self, micros: int) -> Any:
        return micros

    def _time_value(self, value: Any) -> datetime.datetime:
        return from_micros(int(value))

    def _replays_value(self, value: Any) -> tuple[Replay, ...]:
        if isinstance(value, str | bytes):
            return _replays_decoder.decode(value)
        return msgspec.convert(value, tuple[Replay, ...])

    def _append_replay_sql(self) -> str:
        raise NotImplementedError

    def _page(self, where: str, params: list[Any], order: str) -> list[tuple[Any, ...]]:
        """The first rows matching ``where`` (``" WHERE …"`` or ``""``, with ``params``)
        in ``order`` (an ``ORDER BY`` list of :data:`COLUMNS`, every term descending),
        as many as the last parameter (``LIMIT ?``)."""
        statement = f"SELECT {_SELECT} FROM {self._table_sql()}{where} ORDER BY {order} LIMIT ?"
        return self._query(self._sql(statement), params)

    def _query(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (``[]`` when it returns none)."""
        raise NotImplementedError

    def _execute(self, statement: str, params: Sequence[Any]) -> int:
        """Run one statement; its row count."""
        raise NotImplementedError

    def _delivery_query(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """:meth:`_query` on the delivery path (recording a delivery, reading one
        record): a backend may bound it by its timeout."""
        return self._query(statement, params)

    def _delivery_execute(self, statement: str, params: Sequence[Any]) -> int:
        """:meth:`_execute` on the delivery path (appending a replay); see
        :meth:`_delivery_query`."""
        return self._execute(statement, params)

    def _now(self) -> float:
        return time.time()

    def _ready(self) -> None:
        """Called before handing a statement to a store (it runs it on its own
        connection): whatever must exist first, e.g. the table."""

    def _has_size_total(self, delivery: bool) -> bool:
        """Whether the table has its size total (the cap then reads it instead of
        summing every record); a backend may make it here. ``delivery``: asked on a
        delivery's path (see :meth:`_delivery_query`). ``False`` here."""
        return False

    def _size_total_hint(self) -> str:
        """How to give the table its size total (for the warning when it has none)."""
        return "it is made with the table"

    # -- helpers ----------------------------------------------------------------------

    def _sql(self, statement: str) -> str:
        return statement if self._placeholder == "?" else statement.replace("?", self._placeholder)

    def _row(self, row: Sequence[Any]) -> ReceivedDelivery:
        (
            record_id,
            received_at,
            organization_id,
            event_name,
            version,
            key,
            body,
            content_type,
            user_agent,
            status,
            reason,
            detail,
            seen,
            error_type,
            error_message,
            traceback,
            handler_time,
            replays,
        ) = row
        return ReceivedDelivery(
            id=record_id,
            received_at=self._time_value(received_at),
            organization_id=organization_id,
            event_name=event_name,
            version=version,
            idempotency_key=key,
            body=bytes(body),
            content_type=content_type,
            user_agent=user_agent,
            status=status,
            reason=reason,
            detail=detail,
            seen=seen,
            error_type=error_type,
            error_message=error_message,
            traceback=traceback,
            handler_time=handler_time,
            replays=self._replays_value(replays),
        )

    def _where(self, query: InboxQuery | None) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if query is None:
            return clauses, params
        if query.reasons:
            clauses.append(f"reason IN ({', '.join('?' for _ in query.reasons)})")
            params.extend(query.reasons)
        if query.status_class is not None:
            clauses.append("status / 100 = ?")  # the expression the status class indexes hold
            params.append(query.status_class)
        if query.event_name is not None:
            clauses.append("event_name = ?")
            params.append(query.event_name)
        if query.organization_id is not None:
            clauses.append("organization_id = ?")
            params.append(query.organization_id)
        if query.since is not None:
            clauses.append("received_at >= ?")
            params.append(self._time_param(to_micros(query.since)))
        if query.until is not None:
            clauses.append("received_at < ?")
            params.append(self._time_param(to_micros(query.until)))
        if query.id_prefix:
            # a range of the primary key (LIKE would read every row under most collations)
            clauses.append("id >= ?")
            params.append(query.id_prefix)
            end = _prefix_end(query.id_prefix)
            if end is not None:
                clauses.append("id < ?")
                params.append(end)
        return clauses, params

    @staticmethod
    def _and(clauses: list[str]) -> str:
        return (" WHERE " + " AND ".join(clauses)) if clauses else ""

    # -- the contract -----------------------------------------------------------------

    def _insert_values(self, delivery: ReceivedDelivery) -> list[Any]:
        return [
            delivery.id,
            self._time_param(to_micros(delivery.received_at)),
            delivery.organization_id,
            delivery.event_name,
            delivery.version,
            delivery.idempotency_key,
            delivery.body,
            delivery.content_type,
            delivery.user_agent,
            delivery.status,
            delivery.reason,
            delivery.detail,
            delivery.error_type,
            delivery.error_message,
            delivery.traceback,
            delivery.handler_time,
            delivery.size,
            delivery.idempotency_key,
        ]

    def _prune_due(self) -> bool:
        if not self._prune_every:
            return False
        with self._count_lock:
            self._records_since_prune += 1
            if self._records_since_prune < self._prune_every:
                return False
            self._records_since_prune = 0
            return True

    def record(self, delivery: ReceivedDelivery) -> int:
        rows = self._delivery_query(self._insert, self._insert_values(delivery))
        if self._prune_due():
            self._prune_step()
        return int(rows[0][0]) if rows else 1

    # -- joined writes: the record in the idempotency store's transaction ----------------

    def shares_database(self, store: object) -> bool:
        """Whether ``store`` writes to this inbox's database, so that a completion and
        its record can be one transaction (:meth:`record_statement`). ``False`` here."""
        return False

    def record_statement(self, delivery: ReceivedDelivery) -> tuple[str, list[Any]]:
        """The ``INSERT`` :meth:`record` runs, without its ``RETURNING``, for a store to
        run in its own transaction (``store.complete_with``); call :meth:`recorded` once
        it committed."""
        self._ready()
        return self._insert_only, self._insert_values(delivery)

    def processed_statement(
        self,
        record_id: str,
        micros: int,
        organization_id: str,
        event_name: str,
        version: int | None,
        key: str,
        body: bytes,
        content_type: str | None,
        user_agent: str | None,
        handler_time: float,
    ) -> tuple[str, list[Any]]:
        """The ``INSERT`` of a ``processed`` (200) delivery's record, for a store to run
        with its completion: what :meth:`record_statement` gives for that record,
        without building the record first (its fields as
        :class:`~service_webhooks.inbox.ReceivedDelivery` names them; ``micros``: the
        received time in microseconds since the Unix epoch). Call :meth:`recorded`
        once it committed."""
        self._ready()
        return self._insert_processed, [
            record_id,
            self._time_param(micros),
            organization_id,
            event_name,
            version,
            key,
            body,
            content_type,
            user_agent,
            handler_time,
            len(body),
            key,
        ]

    def recorded(self) -> None:
        """A record was written through :meth:`record_statement`: prune when due."""
        if self._prune_due():
            self._prune_step()

    async def arecorded(self) -> None:
        """Async twin of :meth:`recorded` (a due prune runs in a worker thread)."""
        if self._prune_due():
            await asyncio.to_thread(self._prune_step)

    def _prune_step(self) -> None:
        """The automatic prune, on a delivery's path: one batch of expired records, then
        one batch of the oldest records past the ``max_bytes`` cap, bounded like the
        record; a failure is logged, never the delivery's answer (its record is
        written)."""
        try:
            self._prune_batch(self._delivery_execute)
            if self.max_bytes is not None:
                self._prune_bytes(delivery=True)
        except Exception as error:  # housekeeping: the answer stands
            logger.warning("service_webhooks: inbox prune step failed: %s", type(error).__name__)

    def add_replay(self, delivery_id: str, replay: Replay) -> bool:
        params = [encode_replay(replay), delivery_id]
        return self._delivery_execute(self._append_replay_sql(), params) == 1

    def get(self, delivery_id: str) -> ReceivedDelivery | None:
        rows = self._delivery_query(self._get, [delivery_id])
        return self._row(rows[0]) if rows else None

    def search(
        self,
        query: InboxQuery | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
    ) -> InboxPage:
        check_limit(limit)
        clauses, params = self._where(query)
        if cursor is not None:
            micros, record_id = decode_cursor(cursor)
            # a row comparison: an index condition, so page N costs what page 1 costs
            clauses.append("(received_at, id) < (?, ?)")
            params.extend((self._time_param(micros), record_id))
        rows = self._page(self._and(clauses), [*params, limit + 1], "received_at DESC, id DESC")
        items = [self._row(row) for row in rows[:limit]]
        more = len(rows) > limit
        return InboxPage(tuple(items), encode_cursor(items[-1]) if more else None)

    def counts(
        self, *, since: datetime.datetime | None = None, until: datetime.datetime | None = None
    ) -> dict[str, int]:
        clauses, params = self._where(InboxQuery(since=since, until=until))
        statement = (
            f"SELECT reason, count(*) FROM {self._table_sql()}{self._and(clauses)} GROUP BY reason"
        )
        return {reason: int(n) for reason, n in self._query(self._sql(statement), params)}

    def window_counts(
        self, windows: Sequence[tuple[datetime.datetime | None, datetime.datetime | None]]
    ) -> list[dict[str, int]]:
        # The windows' bounds, sorted, cut time into slices; one GROUP BY (reason, slice)
        # over the union of the windows counts every slice, and each window adds up its
        # own slices. A row finds its slice in a few comparisons (a nested CASE, a binary
        # search over the bounds), whatever the number of windows.
        queries = [InboxQuery(since=since, until=until) for since, until in windows]
        if not queries:
            return []
        bounds = sorted(
            {to_micros(b) for q in queries for b in (q.since, q.until) if b is not None}
        )
        position = {micros: index for index, micros in enumerate(bounds)}
        sinces = [q.since for q in queries]
        untils = [q.until for q in queries]
        clauses, params = self._where(
            InboxQuery(
                since=None if None in sinces else min(s for s in sinces if s is not None),
                until=None if None in untils else max(u for u in untils if u is not None),
            )
        )
        slice_sql, slice_params = self._slice(bounds, 0, len(bounds))
        statement = (
            f"SELECT reason, {slice_sql}, count(*) FROM {self._table_sql()}"
            f"{self._and(clauses)} GROUP BY 1, 2"
        )
        per_slice = self._query(self._sql(statement), [*slice_params, *params])
        result: list[dict[str, int]] = []
        for query in queries:
            first = 0 if query.since is None else position[to_micros(query.since)] + 1
            last = len(bounds) if query.until is None else position[to_micros(query.until)]
            counted: dict[str, int] = {}
            for reason, index, number in per_slice:
                if first <= index <= last:
                    counted[reason] = counted.get(reason, 0) + int(number)
            result.append(counted)
        return result

    def _slice(self, bounds: list[int], low: int, high: int) -> tuple[str, list[Any]]:
        """SQL giving a row's slice, ``low``..``high``: slice ``i`` holds the rows received
        in ``[bounds[i - 1], bounds[i])`` (slice 0: before the first bound)."""
        if low == high:
            return str(low), []
        middle = (low + high) // 2
        below, below_params = self._slice(bounds, low, middle)
        above, above_params = self._slice(bounds, middle + 1, high)
        return (
            f"CASE WHEN received_at < ? THEN {below} ELSE {above} END",
            [self._time_param(bounds[middle]), *below_params, *above_params],
        )

    async def awindow_counts(
        self, windows: Sequence[tuple[datetime.datetime | None, datetime.datetime | None]]
    ) -> list[dict[str, int]]:
        return await asyncio.to_thread(self.window_counts, windows)

    def slowest(
        self,
        *,
        limit: int = 10,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[ReceivedDelivery]:
        check_limit(limit)
        clauses, params = self._where(InboxQuery(since=since, until=until))
        clauses.append("handler_time IS NOT NULL")
        rows = self._page(
            self._and(clauses),
            [*params, limit],
            "handler_time DESC, received_at DESC, id DESC",
        )
        return [self._row(row) for row in rows]

    def prune(self) -> int:
        deleted = 0
        while True:  # in batches: no one statement holds the table for the whole backlog
            batch = self._prune_batch(self._execute)
            deleted += batch
            if batch < PRUNE_BATCH:
                break
        if self.max_bytes is not None:
            deleted += self._prune_bytes(delivery=False)
        return deleted

    def _prune_batch(self, execute: Any) -> int:
        """Delete the oldest :data:`PRUNE_BATCH` records past retention with ``execute``."""
        table = self._table_sql()
        cutoff = to_micros(from_micros(int((self._now() - self.retention) * 1_000_000)))
        return int(
            execute(
                self._sql(
                    f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table}"
                    f" WHERE received_at < ? ORDER BY received_at LIMIT {PRUNE_BATCH})"
                ),
                [self._time_param(cutoff)],
            )
        )

    def _prune_bytes(self, *, delivery: bool) -> int:
        """Delete the oldest records past the ``max_bytes`` cap: those received before
        the newest ones that total at most ``max_bytes`` (ties in ``received_at`` by
        ID). With the size total, in batches of at most :data:`PRUNE_BATCH` (one on a
        delivery's path, as many as needed otherwise); without it, in one statement
        that sums every record's size (logged once)."""
        table = self._table_sql()
        if not self._has_size_total(delivery):
            if not self._warned_no_size_total:
                self._warned_no_size_total = True
                logger.warning(
                    "service_webhooks: %r has no size total: its max_bytes cap sums the size"
                    " of every record at each prune; %s",
                    self,
                    self._size_total_hint(),
                )
            return self._execute(self._sql(_cap_by_scan_sql(table)), [self.max_bytes])
        execute = self._delivery_execute if delivery else self._execute
        statement = self._sql(_cap_batch_sql(table, size_total_table(table)))
        deleted = 0
        while True:
            batch = execute(statement, [self.max_bytes])
            deleted += batch
            if delivery or batch < PRUNE_BATCH:
                return deleted

    def purge(self, query: InboxQuery | None = None) -> int:
        # In batches of PRUNE_BATCH records, oldest first, each a range of the keyset
        # index after the last: no one statement holds the table (SQLite's write lock,
        # which every delivery's record waits for) for the whole inbox.
        table = self._table_sql()
        clauses, params = self._where(query)
        deleted = 0
        after: list[Any] = []
        while True:
            since = ["(received_at, id) > (?, ?)"] if after else []
            bound = self._query(
                self._sql(
                    f"SELECT received_at, id FROM {table}{self._and([*clauses, *since])}"
                    f" ORDER BY received_at, id LIMIT 1 OFFSET {PRUNE_BATCH - 1}"
                ),
                [*params, *after],
            )
            until = ["(received_at, id) <= (?, ?)"] if bound else []
            deleted += self._execute(
                self._sql(f"DELETE FROM {table}{self._and([*clauses, *since, *until])}"),
                [*params, *after, *(bound[0] if bound else ())],
            )
            if not bound:
                return deleted
            after = list(bound[0])


def _insert_sql(table: str, parameters: list[str], constants: dict[str, str] | None = None) -> str:
    """A record's ``INSERT``: ``parameters`` and its ``size`` as ``?`` placeholders, the
    ``constants`` as written, ``seen`` counted from the key's records so far (its last
    placeholder: the key again), no replays."""
    fixed = constants or {}
    columns = [*parameters, "size", *fixed, "seen", "replays"]
    values = ["?" for _ in parameters] + ["?", *fixed.values()]
    values += [f"(SELECT count(*) FROM {table} WHERE idempotency_key = ?) + 1", "'[]'"]
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(values)})"


def _cap_batch_sql(table: str, total: str) -> str:
    """One batch of the cap: of the :data:`PRUNE_BATCH` oldest records, delete those
    received before the newest records that total at most the cap (the parameter, in
    bytes). The total comes from the size total's table: a record goes when the records
    older than it leave more than the cap (``total - before > cap``); the oldest batch
    is read in the order of the keyset index. The total and the records are read in the
    statement's one snapshot, so two writers' batches never delete more than the newer
    snapshot asks."""
    return (
        f"DELETE FROM {table} WHERE id IN (SELECT id FROM (SELECT id, SUM(size) OVER"
        " (ORDER BY received_at, id ROWS UNBOUNDED PRECEDING) - size AS before"
        f" FROM (SELECT id, received_at, size FROM {table} ORDER BY received_at, id"
        f" LIMIT {PRUNE_BATCH}) AS oldest) AS running"
        f" WHERE before < (SELECT COALESCE(SUM(bytes), 0) FROM {total}) - ?)"
    )


def _cap_by_scan_sql(table: str) -> str:
    """The cap without a size total, in one statement: every record's size summed newest
    first, and the records past the cap (the parameter, in bytes) deleted."""
    return (
        f"DELETE FROM {table} WHERE id IN (SELECT id FROM (SELECT id, SUM(size)"
        " OVER (ORDER BY received_at DESC, id DESC) AS running"
        f" FROM {table}) AS sized WHERE running > ?)"
    )


def encode_replay(replay: Replay) -> str:
    """One replay as the JSON text appended to a record's ``replays``."""
    return _encoder.encode(replay).decode()


def schema(
    table: str,
    types: dict[str, str],
    index_prefix: str,
    indexes: tuple[tuple[str, str], ...] = INDEXES,
) -> list[str]:
    """``CREATE TABLE`` and ``CREATE INDEX`` statements (idempotent) for one dialect."""
    columns = ",\n    ".join(
        [
            f"id {types['text']} PRIMARY KEY",
            f"received_at {types['time']} NOT NULL",
            f"organization_id {types['text']} NOT NULL",
            f"event_name {types['text']}",
            f"version {types['int']}",
            f"idempotency_key {types['text']}",
            f"body {types['bytes']} NOT NULL",
            f"content_type {types['text']}",
            f"user_agent {types['text']}",
            "status integer NOT NULL",
            f"reason {types['text']} NOT NULL",
            f"detail {types['text']} NOT NULL DEFAULT ''",
            "seen integer NOT NULL DEFAULT 1",
            f"error_type {types['text']}",
            f"error_message {types['text']}",
            f"traceback {types['text']}",
            f"handler_time {types['float']}",
            f"replays {types['json']} NOT NULL DEFAULT '[]'",
            f"size {types['int']} NOT NULL DEFAULT 0",
        ]
    )
    statements = [f"CREATE TABLE IF NOT EXISTS {table} (\n    {columns}\n)"]
    for suffix, columns_sql in indexes:
        statements.append(
            f"CREATE INDEX IF NOT EXISTS {index_prefix}_{suffix} ON {table} ({columns_sql})"
        )
    return statements
