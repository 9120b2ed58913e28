"""PostgreSQL inbox (psycopg 3): shared by every process and machine.

Every write is one autocommitted statement (the record and its ``seen`` count in one
``INSERT … RETURNING``). The table and its indexes are made by
:meth:`PostgresInbox.create_schema`, or by running :func:`schema_sql` in your own
migrations: the keyset order ``(received_at DESC, id DESC)``, the idempotency key, and
one per filter (``reason``, ``event_name``, ``organization_id``, the status class
``status / 100``, and an organization's status class) followed by the keyset order, so
a filtered page and the pages after it read one index range in order. Errors are
whatever psycopg raises; the receiver answers 503 when a record cannot be written.

For the ``max_bytes`` cap, :meth:`PostgresInbox.create_schema` on an inbox with
``max_bytes`` set (or ``schema_sql(size_total=True)``) also makes the table's **size
total**: ``<table>_size_total``, a table of amounts whose sum is the records' total
size. Triggers add to it in the transaction of every write: a row per record inserted
(its size), one per change of ``size``; every ``DELETE`` statement on the inbox (each
prune step runs one) folds the amounts into one row, less what it deleted, and a
``TRUNCATE`` starts it over. Writers only append (no row they would wait for), so
several processes write at once as before. The trigger function runs as the role that
made it (``SECURITY DEFINER``, a fixed ``search_path``): a role that may only write the
inbox table needs nothing more, and ``SELECT`` on the size total for the cap to read
it. Made once, under a lock that holds writers back while it sums the records already
there. Without it the cap still holds, summing every record at each prune (a warning
says so once).
"""

from __future__ import annotations

import asyncio
import datetime
import re
import threading
from collections.abc import Sequence
from typing import Any

from .._exceptions import ConfigurationError
from .._forking import after_fork_of
from ..stores._base import check_prune_every, check_timeout
from ..stores._pg_deadline import Deadlines, LoopPools, connection_kwargs
from ..stores._pg_fork import close_at_exit, forget_pools
from ..stores._postgres import SCHEMA_LOCK, PostgresStore
from ..stores._url import redact_url
from ._base import DEFAULT_INBOX_RETENTION, ReceivedDelivery, Replay, check_bounds
from ._sql import SQLInbox, derived_name, derived_table, encode_replay, schema, size_total_table

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool
except ImportError as error:  # pragma: no cover - depends on the environment
    from .._extras import missing_extra

    raise missing_extra(
        "postgres", "psycopg", "psycopg_pool", what="PostgresInbox", cause=error
    ) from error

__all__ = ["DEFAULT_POSTGRES_INBOX_TABLE", "PostgresInbox", "schema_sql"]

DEFAULT_POSTGRES_INBOX_TABLE = "service_webhooks_inbox"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_TYPES = {
    "text": "text",
    "time": "timestamptz",
    "bytes": "bytea",
    "float": "double precision",
    "json": "jsonb",
    "int": "bigint",
}
_IDLE = psycopg.pq.TransactionStatus.IDLE
_MISSING = (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName)


def _checked(table: str) -> str:
    parts = table.split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.fullmatch(part) for part in parts):
        raise ConfigurationError(
            f"table must be 'name' or 'schema.name' (letters, digits, _), not {table!r}"
        )
    return table


def schema_sql(table: str = DEFAULT_POSTGRES_INBOX_TABLE, *, size_total: bool = False) -> str:
    """The DDL :meth:`PostgresInbox.create_schema` runs, for your own migrations
    (idempotent); ``size_total``: with the size total the ``max_bytes`` cap reads (what
    it runs for an inbox with ``max_bytes`` set; see the module)."""
    return ";\n".join(_statements(_checked(table), size_total=size_total)) + ";"


def _statements(table: str, *, size_total: bool) -> list[str]:
    statements = schema(table, _TYPES, table.split(".")[-1])
    if size_total:
        statements.append(_size_total_sql(table))
    return statements


def _size_total_sql(table: str) -> str:
    """One ``DO`` block (one transaction, inside a migration's or alone) that gives
    ``table`` its size total unless it has one: the table of amounts, its first row (the
    records' sum), the trigger function and its four triggers, under a ``SHARE ROW
    EXCLUSIVE`` lock on ``table`` so that no concurrent write is missed or counted
    twice. The function's names are qualified when it is made (it runs with a fixed
    ``search_path``)."""
    name = table.split(".")[-1]
    total = size_total_table(table)
    function = derived_table(table, "size_total_change")
    triggers = {
        "insert": "AFTER INSERT ON {table} FOR EACH ROW",
        "delete": "AFTER DELETE ON {table} REFERENCING OLD TABLE AS removed FOR EACH STATEMENT",
        "update": (
            "AFTER UPDATE OF size ON {table} FOR EACH ROW WHEN (OLD.size IS DISTINCT FROM NEW.size)"
        ),
        "truncate": "AFTER TRUNCATE ON {table} FOR EACH STATEMENT",
    }
    create_triggers = "\n".join(
        f"      DROP TRIGGER IF EXISTS {derived_name(name, f'size_total_{event}')} ON {table};\n"
        f"      CREATE TRIGGER {derived_name(name, f'size_total_{event}')}"
        f" {when.format(table=table)} EXECUTE PROCEDURE {function}();"
        for event, when in triggers.items()
    )
    return f"""DO $size_total$
DECLARE
  total text;
BEGIN
  IF to_regclass('{total}') IS NULL THEN
    LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE;
    IF to_regclass('{total}') IS NULL THEN
      CREATE TABLE {total} (bytes bigint NOT NULL);
      INSERT INTO {total} (bytes) SELECT COALESCE(SUM(size), 0) FROM {table};
      SELECT format('%I.%I', n.nspname, c.relname) INTO total FROM pg_class AS c
        JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE c.oid = to_regclass('{total}');
      EXECUTE format($function$
        CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
        BEGIN
          IF TG_OP = 'INSERT' THEN
            INSERT INTO %1$s (bytes) VALUES (NEW.size);
          ELSIF TG_OP = 'UPDATE' THEN
            INSERT INTO %1$s (bytes) VALUES (NEW.size - OLD.size);
          ELSIF TG_OP = 'DELETE' THEN
            WITH folded AS (DELETE FROM %1$s RETURNING bytes)
            INSERT INTO %1$s (bytes) SELECT COALESCE((SELECT SUM(bytes) FROM folded), 0)
              - COALESCE((SELECT SUM(size) FROM removed), 0);
          ELSE
            DELETE FROM %1$s;
            INSERT INTO %1$s (bytes) VALUES (0);
          END IF;
          RETURN NULL;
        END
        $body$
      $function$, total);
{create_triggers}
    END IF;
  END IF;
END
$size_total$"""


class PostgresInbox(SQLInbox):
    """Inbox in a PostgreSQL table (thread-safe, shared across machines).

    Args:
        conninfo: A libpq connection string or URL; the pool opens on first use.
        pool: A :class:`psycopg_pool.ConnectionPool` to use instead (you open and
            close it).
        table: The table name, optionally ``schema.table``.
        retention: Seconds a record is kept (30 days, spec §6.3).
        max_bytes: Total record size kept, in bytes; ``None``: no cap. The oldest
            records past it go: all at :meth:`prune`, at most ``PRUNE_BATCH`` (2,000)
            per automatic step. :meth:`create_schema` then adds the size total the
            cap reads (see the module).
        max_size: Most connections the pool this inbox opens holds.
        timeout: Seconds after which recording a delivery, appending a replay or
            reading one record fails (``TimeoutError``; waiting for a pool connection
            included), so that a database that stops answering is answered 503 in
            time; searches, counts and pruning are not bounded.
        prune_every: Prune once every this many records by this object (0: never).
        prepared_statements: ``False`` behind a pooler in transaction mode; see
            :class:`~service_webhooks.stores.PostgresStore`.

    Raises:
        ConfigurationError: Neither ``conninfo`` nor ``pool``, a bad table name, a
            ``retention`` or ``max_bytes`` out of range, a ``timeout`` that is not a
            finite number of seconds > 0, a ``max_size`` below 1, or a ``prune_every``
            that is not an ``int`` >= 0.
    """

    _placeholder = "%s"

    def __init__(
        self,
        conninfo: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        table: str = DEFAULT_POSTGRES_INBOX_TABLE,
        retention: float = DEFAULT_INBOX_RETENTION,
        max_bytes: int | None = None,
        max_size: int = 10,
        timeout: float = 5.0,
        prune_every: int = 1000,
        prepared_statements: bool = True,
    ) -> None:
        if conninfo is None and pool is None:
            raise ConfigurationError("PostgresInbox needs a conninfo or a pool")
        check_bounds(retention, max_bytes)
        check_timeout("timeout", timeout)
        check_prune_every(prune_every)
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ConfigurationError(f"max_size must be an int >= 1, not {max_size!r}")
        self.table = _checked(table)
        self.retention = retention
        self.max_bytes = max_bytes
        self._conninfo = conninfo
        self._pool = pool
        self._own_pool = False
        self._max_size = max_size
        self._timeout = timeout
        self._deadlines = Deadlines(timeout, self._timed_out)
        self._kwargs = connection_kwargs(conninfo, timeout, None, prepared_statements)
        self._prune_every = prune_every
        self._size_total_found = False
        self._lock = threading.Lock()
        self._apools = LoopPools(self._new_apool, "the inbox's PostgreSQL pool")
        super().__init__()
        after_fork_of(self, type(self)._after_fork)  # gunicorn --preload, prefork pools

    def _after_fork(self) -> None:
        """In a forked child: the pools as the store's (see
        :func:`~service_webhooks.stores._pg_fork.forget_pools`), and a new lock for the
        prune count (another thread of the parent may have held it at the fork)."""
        forget_pools(self)
        self._count_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PostgresInbox(table={self.table!r})"

    @staticmethod
    def schema_sql(table: str = DEFAULT_POSTGRES_INBOX_TABLE, *, size_total: bool = False) -> str:
        """The DDL :meth:`create_schema` runs for ``table``: copy it into your migrations.

        Args:
            table: The table name, optionally ``schema.table``.
            size_total: With the size total the ``max_bytes`` cap reads (what
                :meth:`create_schema` makes for an inbox with ``max_bytes`` set): a
                ``DO`` block, idempotent, safe to run while other processes write.

        Raises:
            ConfigurationError: A bad table name.
        """
        return schema_sql(table, size_total=size_total)

    def _time_param(self, micros: int) -> Any:
        return datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
            microseconds=micros
        )

    def _time_value(self, value: Any) -> datetime.datetime:
        moment: datetime.datetime = value
        return moment.astimezone(datetime.UTC)

    def _append_replay_sql(self) -> str:
        return (
            f"UPDATE {self.table} SET replays = replays || jsonb_build_array(%s::jsonb)"
            " WHERE id = %s"
        )

    def _sync_pool(self) -> ConnectionPool[Any]:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    assert self._conninfo is not None
                    self._pool = ConnectionPool(self._conninfo, open=True, **self._pool_options())
                    close_at_exit(self._pool)  # Python 3.13: see _pg_fork
                    self._own_pool = True
        return self._pool

    def shares_database(self, store: object) -> bool:
        """Whether ``store`` is a :class:`~service_webhooks.stores.PostgresStore` on this
        inbox's connection string (or its pool)."""
        if not isinstance(store, PostgresStore):
            return False
        if self._conninfo is not None:
            return store._conninfo == self._conninfo
        return self._pool is not None and store._pool is self._pool

    def _run(
        self, statement: str, params: Sequence[Any], *, bounded: bool = False
    ) -> tuple[int, list[tuple[Any, ...]]]:
        pool = self._sync_pool()
        checkout = self._deadlines.connection(pool) if bounded else pool.connection()
        with checkout as connection:
            try:
                cursor = connection.execute(statement.encode(), params)
            except _MISSING as error:
                raise self._missing_table(error) from error
            rows = cursor.fetchall() if cursor.description is not None else []
            if connection.info.transaction_status != _IDLE:
                connection.commit()  # a pool you passed in may not be autocommit
            return cursor.rowcount, rows

    def _missing_table(self, error: psycopg.Error) -> ConfigurationError:
        """The fix for a statement on a table that was never created."""
        where = "" if self._conninfo is None else f" at {redact_url(self._conninfo)}"
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return ConfigurationError(
            f"the inbox table {self.table!r} does not exist in PostgreSQL{where} "
            f"({type(error).__name__}: {reason}); create it once with "
            "PostgresInbox.create_schema() or by running PostgresInbox.schema_sql() in your "
            "migrations (inbox_from_url() and inbox=True create it for you)"
        )

    def _query(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._run(statement, params)[1]

    def _has_size_total(self, delivery: bool) -> bool:
        """Whether the size total exists and this role may read it (asked until it does)."""
        if not self._size_total_found:
            total = size_total_table(self.table)
            query = self._delivery_query if delivery else self._query
            rows = query(
                "SELECT to_regclass(%s) IS NOT NULL"
                " AND has_table_privilege(to_regclass(%s), 'SELECT')",
                [total, total],
            )
            self._size_total_found = bool(rows[0][0])
        return self._size_total_found

    def _size_total_hint(self) -> str:
        return (
            "make it once with create_schema() on an inbox with max_bytes set, or by"
            " running PostgresInbox.schema_sql(table, size_total=True) in your migrations"
            f" (and grant SELECT on {size_total_table(self.table)} to the role that writes"
            " the inbox, if another role made it)"
        )

    def _execute(self, statement: str, params: Sequence[Any]) -> int:
        return self._run(statement, params)[0]

    def _timed_out(self) -> TimeoutError:
        where = "" if self._conninfo is None else f" at {redact_url(self._conninfo)}"
        return TimeoutError(
            f"PostgreSQL{where} did not answer within {self._timeout:g} s (the inbox's"
            " timeout); the record was not written"
        )

    def _delivery_query(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._run(statement, params, bounded=True)[1]

    def _delivery_execute(self, statement: str, params: Sequence[Any]) -> int:
        return self._run(statement, params, bounded=True)[0]

    def ping(self) -> None:
        """Connect once, outside the pool, and close: fails fast with libpq's reason.

        A pool that cannot connect only times out (``PoolTimeout`` after ``timeout``
        seconds); this raises the connection's own error at once. A no-op for an inbox
        on a pool you passed in.

        Raises:
            psycopg.OperationalError: The database cannot be reached or refused the
                login (its message says why; it never holds the password).
        """
        if self._conninfo is None:
            return
        timeout = max(1, round(self._timeout))
        with psycopg.connect(self._conninfo, connect_timeout=timeout, autocommit=True):
            pass

    def has_table(self) -> bool:
        """Whether the database holds this inbox's table, asked without creating it
        (for readers that must leave another application's database as it is).

        Raises:
            psycopg.Error: The database cannot be reached or refused.
        """
        rows = self._query("SELECT to_regclass(%s) IS NOT NULL", [self.table])
        return bool(rows[0][0])

    def create_schema(self) -> None:
        """Create the table and its indexes if missing (idempotent), and, when
        ``max_bytes`` is set, the size total the cap reads (see the module; made once,
        from the records already there).

        Safe to run from several processes at once (workers starting together on a
        new database): one transaction, serialized by a transaction-scoped advisory
        lock on the table name, as
        :meth:`~service_webhooks.stores.PostgresStore.create_schema` does. Without it, two
        ``CREATE … IF NOT EXISTS`` of one table or index at once fail one of the
        processes with a ``UniqueViolation``.

        Raises:
            psycopg.Error: The server refused (e.g. no ``CREATE`` privilege).
        """
        with self._sync_pool().connection() as connection:
            with connection.transaction():
                connection.execute(SCHEMA_LOCK, {"name": self.table})
                for statement in _statements(self.table, size_total=self.max_bytes is not None):
                    connection.execute(statement.encode())
            if connection.info.transaction_status != _IDLE:
                connection.commit()  # a pool you passed in may not be autocommit

    def drop_schema(self) -> None:
        """Drop the table (and its indexes, its size total): every record is gone."""
        with self._sync_pool().connection() as connection:
            connection.execute(f"DROP TABLE IF EXISTS {self.table}".encode())
            connection.execute(f"DROP TABLE IF EXISTS {size_total_table(self.table)}".encode())
            function = derived_table(self.table, "size_total_change")
            connection.execute(f"DROP FUNCTION IF EXISTS {function}()".encode())
            if connection.info.transaction_status != _IDLE:
                connection.commit()
        self._size_total_found = False

    # -- async: recording and reading one record on the event loop ----------------------

    def _pool_options(self) -> dict[str, Any]:
        """What the pools this owns are made with, sync and async alike."""
        return {
            "min_size": 1,
            "max_size": self._max_size,
            "timeout": self._timeout,
            "kwargs": self._kwargs,
            "name": "service_webhooks_inbox",
        }

    def _new_apool(self) -> AsyncConnectionPool[Any]:
        """A new, unopened asyncio pool (one per event loop: see :class:`LoopPools`)."""
        assert self._conninfo is not None  # without one, _async_pool asks for none
        return AsyncConnectionPool(self._conninfo, open=False, **self._pool_options())

    async def _async_pool(self) -> AsyncConnectionPool[Any] | None:
        if self._conninfo is None:
            return None  # a sync pool only: run it in a worker thread
        return await self._apools.get()

    async def _arun(
        self, pool: AsyncConnectionPool[Any], statement: str, params: Sequence[Any]
    ) -> tuple[int, list[tuple[Any, ...]]]:
        async with self._deadlines.aconnection(pool) as connection:
            try:
                cursor = await connection.execute(statement.encode(), params)
            except _MISSING as error:
                raise self._missing_table(error) from error
            rows = await cursor.fetchall() if cursor.description is not None else []
            return cursor.rowcount, rows

    async def arecord(self, delivery: ReceivedDelivery) -> int:
        pool = await self._async_pool()
        if pool is None:
            return await asyncio.to_thread(self.record, delivery)
        rows = (await self._arun(pool, self._insert, self._insert_values(delivery)))[1]
        if self._prune_due():
            await asyncio.to_thread(self._prune_step)  # bounded, never fails the record
        return int(rows[0][0]) if rows else 1

    async def aget(self, delivery_id: str) -> ReceivedDelivery | None:
        pool = await self._async_pool()
        if pool is None:
            return await asyncio.to_thread(self.get, delivery_id)
        rows = (await self._arun(pool, self._get, [delivery_id]))[1]
        return self._row(rows[0]) if rows else None

    async def aadd_replay(self, delivery_id: str, replay: Replay) -> bool:
        pool = await self._async_pool()
        if pool is None:
            return await asyncio.to_thread(self.add_replay, delivery_id, replay)
        params = [encode_replay(replay), delivery_id]
        return (await self._arun(pool, self._append_replay_sql(), params))[0] == 1

    async def aclose(self) -> None:
        """Close the asyncio pool this inbox opened for the running event loop."""
        await self._apools.aclose()

    def close(self) -> None:
        """Close the pool this inbox opened (a pool you passed in stays open)."""
        if self._own_pool and self._pool is not None:
            self._pool.close()
            self._pool, self._own_pool = None, False
