"""The idempotency store backends every contract test runs against.

To plug in a backend, add a factory to ``BACKENDS``: it receives the pytest
``request`` and returns a fresh, empty store (skipping or failing through the
``unavailable`` fixture when its server is absent) and registers its own cleanup.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
from sw_services import POSTGRES_URL, REDIS_URL, answering_redis

from service_webhooks.stores import IdempotencyStore, MemoryStore, SQLiteStore

if TYPE_CHECKING:
    import psycopg
    import redis


def _memory(request: pytest.FixtureRequest) -> IdempotencyStore:
    return MemoryStore()


def _sqlite(request: pytest.FixtureRequest) -> IdempotencyStore:
    path: Path = request.getfixturevalue("tmp_path") / "idempotency.sqlite3"
    store = SQLiteStore(path)
    request.addfinalizer(store.close)
    return store


@pytest.fixture
async def async_cleanup() -> AsyncIterator[list[Callable[[], Awaitable[None]]]]:
    """Coroutines to await in the test's own event loop once the test is over.

    An asyncio connection belongs to the loop that opened it, so a shared-server
    store must close its asyncio pool there, before pytest-asyncio closes the loop.
    """
    closers: list[Callable[[], Awaitable[None]]] = []
    yield closers
    for close in reversed(closers):
        await close()


def _redis(request: pytest.FixtureRequest) -> IdempotencyStore:
    from service_webhooks.stores._redis import RedisStore

    probe = answering_redis(request.getfixturevalue("unavailable"), socket_timeout=1)
    prefix = f"service_webhooks_test:{uuid.uuid4().hex}:"
    store = RedisStore.from_url(REDIS_URL, prefix=prefix)
    request.getfixturevalue("async_cleanup").append(store.aclose)

    def clean() -> None:
        keys = list(probe.scan_iter(match=prefix + "*", count=1000))
        if keys:
            probe.delete(*keys)
        probe.close()
        store.close()

    request.addfinalizer(clean)
    return store


@pytest.fixture
def redis_client(unavailable: Callable[[str, str], NoReturn]) -> Iterator[redis.Redis]:
    """A client of the tests' Redis (``REDIS_URL``); skips (or fails) when it does not
    answer."""
    client = answering_redis(unavailable)
    yield client
    client.close()


@pytest.fixture
def admin(postgres_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An autocommit connection to the tests' PostgreSQL database."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True, connect_timeout=2) as connection:
        yield connection


@pytest.fixture
def schema(admin: psycopg.Connection[tuple[object, ...]]) -> Iterator[str]:
    """A new schema of that database, dropped with everything in it afterwards."""
    name = f"sw_test_{uuid.uuid4().hex[:12]}"
    admin.execute(f"CREATE SCHEMA {name}")
    yield name
    admin.execute(f"DROP SCHEMA {name} CASCADE")


def require_postgres(request: pytest.FixtureRequest) -> None:
    """Skip (or fail, when services are required) unless PostgreSQL answers."""
    request.getfixturevalue("postgres_url")


def _postgres(request: pytest.FixtureRequest) -> IdempotencyStore:
    import psycopg

    from service_webhooks.stores._postgres import PostgresStore

    require_postgres(request)
    table = f"service_webhooks_test_{uuid.uuid4().hex[:16]}"
    store = PostgresStore(POSTGRES_URL, table=table, max_size=8)
    store.create_schema()
    request.getfixturevalue("async_cleanup").append(store.aclose)

    def clean() -> None:
        store.close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {table}")

    request.addfinalizer(clean)
    return store


BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Any]] = {
    "memory": _memory,
    "postgres": _postgres,
    "redis": _redis,
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest) -> IdempotencyStore:
    factory = BACKENDS[request.param]
    result: IdempotencyStore = factory(request)
    return result


# -- private servers a test may freeze (the shared servers are never touched) -----------


@dataclass
class Frozen:
    """A throwaway server: ``freeze()`` SIGSTOPs every process of it, ``thaw()`` resumes."""

    url: str
    pids: Callable[[], list[int]]

    def freeze(self) -> None:
        for pid in self.pids():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for_port(port: int, alive: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("the throwaway server exited before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on port {port} within {timeout} s")


def _children(parent: int) -> list[int]:
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(stat).read_text().rpartition(")")[2].split()
            if int(fields[1]) == parent:
                found.append(int(Path(stat).parent.name))
    return found


Unavailable = Callable[[str, str], NoReturn]


@pytest.fixture
def frozen_redis(unavailable: Unavailable) -> Iterator[Frozen]:
    """A private ``redis-server`` on a free port, stopped by its PID afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server", "not installed")
    port = _free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    command += ["--appendonly", "no", "--logfile", ""]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    server = Frozen(f"redis://127.0.0.1:{port}/0", lambda: [process.pid])
    try:
        _wait_for_port(port, lambda: process.poll() is None)
        yield server
    finally:
        server.thaw()
        process.kill()
        process.wait(10)


@pytest.fixture
def frozen_postgres(unavailable: Unavailable) -> Iterator[Frozen]:
    """A private PostgreSQL cluster (``initdb`` + ``pg_ctl``) on a free port."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        unavailable("PostgreSQL server binaries", "no /usr/lib/postgresql/*/bin/pg_ctl")
    binaries = Path(found[-1]).parent
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        runuser = shutil.which("runuser")
        if runuser is None:
            unavailable("runuser", "needed to run initdb as the postgres user")
        as_postgres = [runuser, "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="sw-pg-frozen-"))
    data = root / "data"
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    initdb = [*as_postgres, str(binaries / "initdb"), "-D", str(data), "-U", "postgres"]
    subprocess.run([*initdb, "--auth=trust", "--no-sync"], check=True, capture_output=True)
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = [*as_postgres, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(root / "log")]
    subprocess.run([*pg_ctl, "-o", options, "-w", "start"], check=True, capture_output=True)

    def pids() -> list[int]:
        postmaster = int((data / "postmaster.pid").read_text().split()[0])
        return [postmaster, *_children(postmaster)]

    server = Frozen(f"postgresql://postgres@127.0.0.1:{port}/postgres", pids)
    try:
        yield server
    finally:
        server.thaw()
        subprocess.run([*pg_ctl, "-m", "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
