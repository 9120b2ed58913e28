"""PostgreSQL idempotency store for applications without Django: shared by every process.

Built on psycopg 3 and psycopg_pool, not SQLAlchemy: the store is four fixed SQL
statements, so an ORM or expression layer would add a dependency and a translation
step without removing any code; psycopg 3 gives sync and asyncio connections with
the same API, server-side parameters and pools for both, and it is what SQLAlchemy's
own ``postgresql+psycopg`` dialect drives underneath. Applications that already use
SQLAlchemy can pass the same database URL here.

Every operation is one autocommitted statement, so it is atomic, and every time is
taken from the *server's* clock (``now()``), so receivers on several machines need no
synchronised clocks:

* ``claim``: ``INSERT … ON CONFLICT (key) DO UPDATE … WHERE expires_at <= now()
  OR (state = 'in_flight' AND token = <the caller's>)`` (the second arm is a lease
  renewal); a row is returned only when the caller got or renewed the claim.
  Otherwise the key's state is read ``FOR SHARE``: a locking read answers the row as
  last committed (a completion that committed while the claim waited on its row lock
  answers ``DONE``), not as the statement's snapshot saw it (``IN_FLIGHT``).
* ``complete``: the same upsert to ``'done'``, ``WHERE`` the claim is the caller's or
  has expired.
* ``release``: ``DELETE`` the caller's in-flight row.

The table is created on first use: a statement that finds it missing creates it
(``CREATE TABLE IF NOT EXISTS`` under an advisory lock, so concurrent processes do not
race) and runs again. Call :meth:`PostgresStore.create_schema` at deployment to fail
early, or run :meth:`PostgresStore.schema_sql` in your own migrations; when the table is missing and
cannot be created, calls raise :class:`ConfigurationError` naming both fixes. Expired
rows are deleted by
:meth:`PostgresStore.prune` (all of them: call it from a periodic job) and, every
``prune_every`` claims, at most :data:`PRUNE_BATCH` of them, oldest first: a step whose
work does not grow with a backlog of expired rows, so it stays well inside the
statement timeout. A step that fails anyway is logged and does not fail the claim it
followed (that claim is written: failing it would leave its key in flight, unanswered,
for a whole lease).

Every call is bounded client-side: it fails within ``timeout`` seconds (5 by default)
in all, waiting for a pool connection included. A server that stops answering without
closing its connections (a frozen process, a hung host) is not noticed by libpq, TCP
keepalives or ``statement_timeout`` (the kernel keeps acknowledging), so a statement
still running at the call's deadline has its connection's socket shut down by a
watchdog (one daemon thread for every store; a ``loop.call_later`` timer for asyncio);
that connection is then discarded.

Errors: whatever psycopg raises (:class:`psycopg.OperationalError` when the server is
down, :class:`psycopg_pool.PoolTimeout` when no connection can be had within
``timeout`` seconds, :class:`psycopg.errors.QueryCanceled` past the statement
timeout) propagates, and :class:`TimeoutError` when a statement outlives the call's
deadline; the receiver turns it into :class:`~service_webhooks._exceptions.StoreError`
(503, fail closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
from collections.abc import Sequence
from typing import Any

from .._exceptions import ConfigurationError
from ._base import ClaimState, check_prune_every
from ._pg_deadline import Deadlines, LoopPools, connection_kwargs
from ._pg_fork import close_at_exit, forget_pools_after_fork
from ._url import redact_url

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool
except ImportError as error:  # pragma: no cover - depends on the environment
    from .._extras import missing_extra

    raise missing_extra(
        "postgres", "psycopg", "psycopg_pool", what="PostgresStore", cause=error
    ) from error

__all__ = ["DEFAULT_TABLE", "PRUNE_BATCH", "SCHEMA_LOCK", "SCHEMA_SQL", "PostgresStore"]

logger = logging.getLogger("service_webhooks")

PRUNE_BATCH = 2000
"""Most expired rows one periodic prune step deletes (twice the rows ``prune_every``
claims add at the default, so a backlog shrinks while new keys keep coming)."""

DEFAULT_TABLE = "service_webhooks_idempotency"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    key        text PRIMARY KEY,
    state      text NOT NULL CHECK (state IN ('in_flight', 'done')),
    token      text NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS {index} ON {table} (expires_at)"""

SCHEMA_SQL = _SCHEMA.format(table=DEFAULT_TABLE, index=DEFAULT_TABLE + "_expires_at").strip()
"""The DDL :meth:`PostgresStore.create_schema` runs, for the default table name: copy
it into your migrations if you manage the schema yourself."""

_CLAIM = """
WITH claimed AS (
    INSERT INTO {table} AS t (key, state, token, expires_at)
    VALUES (%(key)s, 'in_flight', %(token)s, now() + make_interval(secs => %(seconds)s))
    ON CONFLICT (key) DO UPDATE
        SET state = 'in_flight', token = excluded.token, expires_at = excluded.expires_at
        WHERE t.expires_at <= now() OR (t.state = 'in_flight' AND t.token = excluded.token)
    RETURNING 'new'::text AS state
), held AS (
    SELECT state FROM {table} WHERE key = %(key)s AND expires_at > now()
        AND NOT EXISTS (SELECT FROM claimed)
    FOR SHARE
)
SELECT state FROM claimed
UNION ALL
SELECT state FROM held
LIMIT 1"""
_COMPLETE = """
INSERT INTO {table} AS t (key, state, token, expires_at)
VALUES (%(key)s, 'done', %(token)s, now() + make_interval(secs => %(seconds)s))
ON CONFLICT (key) DO UPDATE
    SET state = 'done', token = excluded.token, expires_at = excluded.expires_at
    WHERE t.token = excluded.token OR t.expires_at <= now()"""
_RELEASE = "DELETE FROM {table} WHERE key = %(key)s AND token = %(token)s AND state = 'in_flight'"
_PRUNE = "DELETE FROM {table} WHERE expires_at <= now()"
# Oldest first through the expires_at index; SKIP LOCKED: two processes' steps (or a
# claim taking an expired key over) never wait on each other's rows.
_PRUNE_STEP = f"""
DELETE FROM {{table}} WHERE expires_at <= now() AND key IN (
    SELECT key FROM {{table}} WHERE expires_at <= now()
    ORDER BY expires_at LIMIT {PRUNE_BATCH} FOR UPDATE SKIP LOCKED
)"""
SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(hashtext('service_webhooks:' || %(name)s))"
"""Serializes the making of a table's schema (the PostgreSQL inbox takes it too): a
transaction-scoped advisory lock on the table name, ``%(name)s``."""
_MISSING = (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName)

_IDLE = psycopg.pq.TransactionStatus.IDLE
_Params = dict[str, Any] | list[Any]
_Result = tuple[int, tuple[Any, ...] | None]
"""(rowcount, first row) of one statement."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def _schema_for(table: str) -> str:
    """The DDL for ``table`` (checked by :func:`_table`)."""
    index = '"' + table.split(".")[-1] + '_expires_at"'  # PostgreSQL cuts it at 63
    return _SCHEMA.format(table=_table(table), index=index).strip()


def _table(name: str) -> str:
    """``name`` or ``schema.name`` as quoted SQL identifiers: ``"schema"."name"``.

    Each part is letters, digits and ``_`` (checked here), so quoting needs no
    escaping, and the statements are rendered once, as bytes: psycopg would render a
    ``sql.Composed`` again on every execution (about 10 µs a statement).
    """
    parts = name.split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.fullmatch(part) for part in parts):
        raise ConfigurationError(
            f"table must be 'name' or 'schema.name' (letters, digits, _), not {name!r}"
        )
    return ".".join(f'"{part}"' for part in parts)


def _state(row: tuple[Any, ...] | None) -> ClaimState:
    if row is None:
        # The holder released or its record expired between our statement's snapshot
        # and the conflict check: say in flight so the service retries.
        return ClaimState.IN_FLIGHT
    return {"new": ClaimState.NEW, "done": ClaimState.DONE}.get(row[0], ClaimState.IN_FLIGHT)


class PostgresStore:
    """Idempotency store in a PostgreSQL table (thread-safe, shared across machines).

    Args:
        conninfo: A libpq connection string or URL (``postgresql://user@host/db``).
            Each of the sync and async pools is opened on first use; the asyncio pool
            is per event loop.
        pool: A :class:`psycopg_pool.ConnectionPool` to use instead (you open and
            close it); with no ``conninfo``, the async twins then run in a thread.
        apool: A :class:`psycopg_pool.AsyncConnectionPool` for the async twins
            (you open and close it).
        table: The table name, optionally ``schema.table``.
        min_size: Connections each pool this store opens keeps ready.
        max_size: Most connections each pool this store opens holds.
        timeout: Seconds after which any call fails, waiting for a pool connection
            included (also the connect timeout, and libpq's ``tcp_user_timeout``
            unless the connection string sets one); keep it well under the service's
            10 s deadline. Also ``?timeout=`` in a store URL.
        statement_timeout: Seconds after which the server cancels a statement (added
            to any ``options`` the connection string sets, e.g.
            ``options=-c synchronous_commit=off``).
        prune_every: Delete at most :data:`PRUNE_BATCH` expired rows once every this
            many successful claims made by this object (0: never; call :meth:`prune`
            yourself).
        prepared_statements: ``False`` behind a pooler in transaction mode (PgBouncer
            before 1.21, or without ``max_prepared_statements``): psycopg then prepares
            no statement, which another server connection would not know (URL:
            ``?prepared_statements=false``). Applies to the pools this store opens.

    Raises:
        ConfigurationError: Neither ``conninfo``, ``pool`` nor ``apool``; a bad table
            name; sizes and timeouts out of range; a ``prune_every`` that is not an
            ``int`` >= 0; or a ``conninfo`` libpq refuses as
            malformed (an unknown parameter, say), with its reason, passwords masked.
            Nothing is connected here: a server that is down fails at the first call,
            or at :meth:`ping`.
    """

    def __init__(
        self,
        conninfo: str | None = None,
        *,
        pool: ConnectionPool[Any] | None = None,
        apool: AsyncConnectionPool[Any] | None = None,
        table: str = DEFAULT_TABLE,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 5.0,
        statement_timeout: float = 5.0,
        prune_every: int = 1000,
        prepared_statements: bool = True,
    ) -> None:
        if conninfo is None and pool is None and apool is None:
            raise ConfigurationError("PostgresStore needs a conninfo, a pool or an apool")
        if not 1 <= min_size <= max_size:
            raise ConfigurationError("pool sizes must satisfy 1 <= min_size <= max_size")
        if not (timeout > 0 and statement_timeout > 0):
            raise ConfigurationError("timeout and statement_timeout must be > 0 seconds")
        check_prune_every(prune_every)
        self.table = table
        quoted = _table(table)
        self._schema = _schema_for(table).encode()
        self._claim_sql = _CLAIM.format(table=quoted).encode()
        self._complete_sql = _COMPLETE.format(table=quoted).encode()
        positional = re.sub(r"%\((?:key|token|seconds)\)s", "%s", _COMPLETE)
        self._complete_positional = positional.format(table=quoted).encode()
        self._joined: dict[str, bytes] = {}  # complete_with's statements, built once
        self._release_sql = _RELEASE.format(table=quoted).encode()
        self._prune_sql = _PRUNE.format(table=quoted).encode()
        self._prune_step_sql = _PRUNE_STEP.format(table=quoted).encode()
        self._conninfo = conninfo
        self._pool = pool
        self._own_pool = False
        self._apool = apool
        self._apools = LoopPools(self._new_apool, "a PostgreSQL pool")
        self._sizes = (min_size, max_size)
        self._timeout = timeout
        self._deadlines = Deadlines(timeout, self._timed_out)
        self._kwargs = connection_kwargs(conninfo, timeout, statement_timeout, prepared_statements)
        self._prune_every = prune_every
        self._claims = 0
        self._lock = threading.Lock()
        forget_pools_after_fork(self)  # gunicorn --preload, Celery's prefork pool

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresStore:
        """A store on the database at ``url``; see the class for ``options``."""
        return cls(url, **options)

    def __repr__(self) -> str:
        where = "pool" if self._conninfo is None else repr(redact_url(self._conninfo))
        return f"PostgresStore({where}, table={self.table!r})"

    # -- sync -------------------------------------------------------------------------

    def _sync_pool(self) -> ConnectionPool[Any]:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    if self._conninfo is None:
                        raise ConfigurationError(
                            "this PostgresStore has only an async pool: use aprocess(), "
                            "or pass a conninfo or a pool too"
                        )
                    self._pool = ConnectionPool(self._conninfo, open=True, **self._pool_options())
                    close_at_exit(self._pool)  # Python 3.13: see _pg_fork
                    self._own_pool = True
        return self._pool

    def _connection(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        """A pool connection whose statements are interrupted at the call's deadline."""
        return self._deadlines.connection(self._sync_pool())

    def _run(self, query: bytes, params: _Params) -> _Result:
        with self._connection() as connection:
            cursor = connection.execute(query, params)
            row = cursor.fetchone() if cursor.description is not None else None
            if connection.info.transaction_status != _IDLE:
                connection.commit()  # a pool you passed in may not be autocommit
            return cursor.rowcount, row

    def _execute(self, query: bytes, params: _Params) -> _Result:
        try:
            return self._run(query, params)
        except _MISSING:
            pass  # first use of a new table: create it, then run the statement again
        try:
            self.create_schema()
        except psycopg.Error as error:
            raise self._schema_error(error) from error
        return self._run(query, params)

    def _timed_out(self) -> TimeoutError:
        return TimeoutError(
            f"PostgreSQL{self._where()} did not answer within {self._timeout:g} s "
            "(the store's timeout); the statement was abandoned"
        )

    def _where(self) -> str:
        return "" if self._conninfo is None else f" at {redact_url(self._conninfo)}"

    def _schema_error(self, error: psycopg.Error) -> ConfigurationError:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return ConfigurationError(
            f"the idempotency table {self.table!r} does not exist in PostgreSQL"
            f"{self._where()} and could not be created ({type(error).__name__}: {reason}); "
            "create it once with PostgresStore.create_schema() or by running "
            f"PostgresStore.schema_sql({self.table!r}) as a role allowed to CREATE in "
            "its schema"
        )

    @staticmethod
    def schema_sql(table: str = DEFAULT_TABLE) -> str:
        """The DDL :meth:`create_schema` runs for ``table``: copy it into your migrations.

        Raises:
            ConfigurationError: A bad table name.
        """
        return _schema_for(table) + ";"

    def create_schema(self) -> None:
        """Create the table and its expiry index if missing (idempotent).

        Stores create their table on first use, so calling this is optional: do it at
        deployment to fail early, or when the receiver's role may not ``CREATE``.
        Safe to run from several processes at once (a transaction-scoped advisory
        lock on the table name serializes it).

        Raises:
            psycopg.Error: The server refused (e.g. no ``CREATE`` privilege, or the
                table's schema does not exist).
        """
        with self._connection() as connection, connection.transaction():
            connection.execute(SCHEMA_LOCK, {"name": self.table})
            connection.execute(self._schema)

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        params = {"key": key, "token": token, "seconds": lease}
        state = _state(self._execute(self._claim_sql, params)[1])
        if state is ClaimState.NEW and self._prune_due():
            try:
                self.prune_step()
            except (psycopg.Error, OSError) as error:
                self._prune_failed(error)
        return state

    def complete(self, key: str, token: str, retention: float) -> bool:
        params = {"key": key, "token": token, "seconds": retention}
        return self._execute(self._complete_sql, params)[0] == 1

    def complete_with(
        self, key: str, token: str, retention: float, statement: str, params: Sequence[Any]
    ) -> bool:
        """:meth:`complete`, and one more statement on this database, as one statement.

        ``WITH also AS (<statement>) <the completion>``: one round trip, and atomic
        (both rows are written or neither is); the completion's row count answers, as
        for :meth:`complete`, with no result rows to fetch. The receiver
        writes a processed delivery's inbox record this way when the inbox is on this
        store's database.

        Args:
            key: The idempotency key, as for :meth:`complete`.
            token: The caller's claim token.
            retention: Seconds the completed key is kept.
            statement: One ``INSERT``, ``UPDATE`` or ``DELETE`` (``%s`` placeholders) on
                this database, usable inside ``WITH`` (``RETURNING`` allowed).
            params: Its parameters.

        Returns:
            What :meth:`complete` returns: ``False`` when another claim owns ``key``.

        Raises:
            psycopg.Error, TimeoutError: As for :meth:`complete`; nothing was written.
        """
        query, values = self._with(key, token, retention, statement, params)
        return self._execute(query, values)[0] == 1

    def _with(
        self, key: str, token: str, retention: float, statement: str, params: Sequence[Any]
    ) -> tuple[bytes, list[Any]]:
        query = self._joined.get(statement)
        if query is None:
            query = b"".join(
                [
                    b"WITH also AS (",
                    statement.encode(),  # the inbox's own SQL
                    b")",
                    self._complete_positional,
                ]
            )
            self._joined[statement] = query
        return query, [*params, key, token, retention]

    def release(self, key: str, token: str) -> bool:
        return self._execute(self._release_sql, {"key": key, "token": token})[0] == 1

    def prune(self) -> int:
        """Delete every expired row now; returns how many were deleted."""
        return self._execute(self._prune_sql, {})[0]

    def prune_step(self) -> int:
        """Delete at most :data:`PRUNE_BATCH` expired rows, the oldest; returns how
        many were deleted. What a claim runs every ``prune_every`` claims.

        Raises:
            psycopg.Error: As :meth:`prune`.
        """
        return self._execute(self._prune_step_sql, {})[0]

    def _prune_failed(self, error: BaseException) -> None:
        logger.warning("service_webhooks: prune step of %r failed: %s", self, type(error).__name__)

    def ping(self) -> None:
        """Connect once, outside the pool, and close: a wrong URL or a server that is
        down fails here, at once and with libpq's reason, instead of as a 503 on the
        first delivery (a pool that cannot connect only times out). A no-op for a store
        on pools you passed in.

        Raises:
            psycopg.OperationalError: The database cannot be reached or refused the
                login (its message never holds the password).
        """
        if self._conninfo is not None:
            with psycopg.connect(self._conninfo, **self._kwargs):
                pass

    def close(self) -> None:
        """Close the sync pool this store opened (a pool you passed in stays open)."""
        if self._own_pool and self._pool is not None:
            self._pool.close()
            self._pool, self._own_pool = None, False

    def _prune_due(self) -> bool:
        if not self._prune_every:
            return False
        with self._lock:
            self._claims += 1
            return self._claims % self._prune_every == 0

    # -- async ------------------------------------------------------------------------

    def _pool_options(self) -> dict[str, Any]:
        """What the pools this owns are made with, sync and async alike."""
        return {
            "min_size": self._sizes[0],
            "max_size": self._sizes[1],
            "timeout": self._timeout,
            "kwargs": self._kwargs,
            "name": "service_webhooks",
        }

    def _new_apool(self) -> AsyncConnectionPool[Any]:
        """A new, unopened asyncio pool (one per event loop: see :class:`LoopPools`)."""
        assert self._conninfo is not None  # without one, _async_pool asks for none
        return AsyncConnectionPool(self._conninfo, open=False, **self._pool_options())

    async def _async_pool(self) -> AsyncConnectionPool[Any] | None:
        if self._apool is not None:
            return self._apool
        if self._conninfo is None:
            return None  # a sync pool only: run it in a worker thread
        return await self._apools.get()

    def _aconnection(
        self, pool: AsyncConnectionPool[Any]
    ) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        """Async twin of :meth:`_connection` (a loop timer instead of the watchdog)."""
        return self._deadlines.aconnection(pool)

    async def _arun(self, pool: AsyncConnectionPool[Any], query: bytes, params: _Params) -> _Result:
        async with self._aconnection(pool) as connection:
            cursor = await connection.execute(query, params)
            row = await cursor.fetchone() if cursor.description is not None else None
            if connection.info.transaction_status != _IDLE:
                await connection.commit()
            return cursor.rowcount, row

    async def _aexecute(
        self, pool: AsyncConnectionPool[Any], query: bytes, params: _Params
    ) -> _Result:
        try:
            return await self._arun(pool, query, params)
        except _MISSING:
            pass  # first use of a new table: create it, then run the statement again
        try:
            async with self._aconnection(pool) as connection, connection.transaction():
                await connection.execute(SCHEMA_LOCK, {"name": self.table})
                await connection.execute(self._schema)
        except psycopg.Error as error:
            raise self._schema_error(error) from error
        return await self._arun(pool, query, params)

    async def aclaim(self, key: str, token: str, lease: float) -> ClaimState:
        pool = await self._async_pool()
        if pool is None:
            return await asyncio.to_thread(self.claim, key, token, lease)
        params = {"key": key, "token": token, "seconds": lease}
        state = _state((await self._aexecute(pool, self._claim_sql, params))[1])
        if state is ClaimState.NEW and self._prune_due():
            try:
                await self._aexecute(pool, self._prune_step_sql, {})
            except (psycopg.Error, OSError) as error:
                self._prune_failed(error)
        return state

    async def acomplete(self, key: str, token: str, retention: float) -> bool:
        pool = await self._async_pool()
        if pool is None:
            return await asyncio.to_thread(self.complete, key, token, retention)
        params = {"key": key, "token": token, "seconds": retention}
        return (await self._aexecute(pool, self._complete_sql, params))[0] == 1

    async def acomplete_with(
        self, key: str, token: str, retention: float, statement: str, params: Sequence[Any]
    ) -> bool:
        """Async twin of :meth:`complete_with`."""
        pool = await self._async_pool()
        if pool is None:
            return await asyncio.to_thread(
                self.complete_with, key, token, retention, statement, params
            )
        query, values = self._with(key, token, retention, statement, params)
        return (await self._aexecute(pool, query, values))[0] == 1

    async def arelease(self, key: str, token: str) -> bool:
        pool = await self._async_pool()
        if pool is None:
            return await asyncio.to_thread(self.release, key, token)
        params = {"key": key, "token": token}
        return (await self._aexecute(pool, self._release_sql, params))[0] == 1

    async def aprune(self) -> int:
        """Async twin of :meth:`prune`."""
        pool = await self._async_pool()
        if pool is None:
            return await asyncio.to_thread(self.prune)
        return (await self._aexecute(pool, self._prune_sql, {}))[0]

    async def aclose(self) -> None:
        """Close the asyncio pool this store opened for the running event loop."""
        await self._apools.aclose()
