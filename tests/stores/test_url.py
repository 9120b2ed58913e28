"""``store_from_url``: one string (settings, ``SERVICE_WEBHOOKS_STORE``, the CLI) to a store."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest

from service_webhooks._exceptions import ConfigurationError
from service_webhooks._storage_url import pop_query
from service_webhooks.stores import MIN_RETENTION, ClaimState, MemoryStore, SQLiteStore
from service_webhooks.stores._url import ENV_VAR, store_from_env, store_from_url

from .conftest import POSTGRES_URL, require_postgres


def test_memory() -> None:
    assert isinstance(store_from_url("memory"), MemoryStore)


@pytest.mark.parametrize("form", ["sqlite:{path}", "sqlite://{path}"])
def test_sqlite_paths(tmp_path: Path, form: str) -> None:
    path = tmp_path / "keys.sqlite3"
    store = store_from_url(form.format(path=path))
    assert isinstance(store, SQLiteStore)
    assert store.path == path
    store.close()


def test_sqlite_needs_a_path() -> None:
    with pytest.raises(ConfigurationError, match="file path"):
        store_from_url("sqlite:")


def test_sqlite_timeout_is_an_option_not_part_of_the_file_name(tmp_path: Path) -> None:
    """``?timeout=`` bounds the wait for another process's write lock, as it bounds a
    server's calls; it is not the end of the file name (a second, empty database beside
    the one that ``inbox list --store sqlite:PATH`` reads)."""
    path = tmp_path / "keys.sqlite3"
    store = store_from_url(f"sqlite:{path}?timeout=2")
    assert isinstance(store, SQLiteStore)
    assert store.path == path
    assert store.timeout == 2
    assert store.claim("k", "t", 60) is ClaimState.NEW
    store.close()
    assert [p.name for p in tmp_path.iterdir() if "?" in p.name] == []


@pytest.mark.parametrize("query", ["?mode=ro", "?timeout=2&cache=shared", "?", "?timeout=0"])
def test_sqlite_refuses_other_query_parameters(tmp_path: Path, query: str) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        store_from_url(f"sqlite:{tmp_path / 'keys.sqlite3'}{query}")
    assert list(tmp_path.iterdir()) == []


def test_unknown_scheme_names_the_scheme_but_not_the_url() -> None:
    with pytest.raises(ConfigurationError, match="'mysql'") as caught:
        store_from_url("mysql://user:hunter2@db/x")
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "text", ["jk-31fj0vojdbyjcslqxq2", "Sd8_kq-xx9", "not a url:with spaces", "x" * 30 + ":y"]
)
def test_text_that_is_no_url_is_never_echoed(text: str) -> None:
    """A secret pasted into the store setting must not reach the error (or a log)."""
    with pytest.raises(ConfigurationError, match=r"^unknown store URL: use memory") as caught:
        store_from_url(text)
    message = str(caught.value)
    assert all(text.lower()[i : i + 6] not in message.lower() for i in range(len(text) - 5))


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "rediss://h:6380/1"])
def test_redis_urls_with_a_prefix(url: str) -> None:
    from service_webhooks.stores._redis import DEFAULT_PREFIX, RedisStore

    store = store_from_url(url)
    assert isinstance(store, RedisStore)
    assert store.prefix == DEFAULT_PREFIX
    prefixed = store_from_url(url + "?prefix=app1:")
    assert isinstance(prefixed, RedisStore)
    assert prefixed.prefix == "app1:"
    store.close()
    prefixed.close()


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgres_urls_with_a_table(scheme: str) -> None:
    from service_webhooks.stores._postgres import DEFAULT_TABLE, PostgresStore

    store = store_from_url(f"{scheme}://u@127.0.0.1:1/db?connect_timeout=3")
    assert isinstance(store, PostgresStore)
    assert store.table == DEFAULT_TABLE
    named = store_from_url(f"{scheme}://u@h/db?table=hooks.keys")
    assert isinstance(named, PostgresStore)
    assert named.table == "hooks.keys"


def test_a_store_url_may_name_the_inbox_table_beside_it(request: pytest.FixtureRequest) -> None:
    """``?inbox_table=`` is the inbox's (``inbox=True`` reads it from the store URL, as the
    CLI's ``--store`` does): the store passed it to libpq, which refused every URL."""
    import psycopg

    from service_webhooks import WebhookReceiver
    from service_webhooks.inbox import PostgresInbox
    from service_webhooks.stores._postgres import PostgresStore

    require_postgres(request)
    suffix = uuid.uuid4().hex[:12]
    separator = "&" if "?" in POSTGRES_URL else "?"
    url = f"{POSTGRES_URL}{separator}table=sw_keys_{suffix}&inbox_table=sw_inbox_{suffix}"
    receiver = WebhookReceiver("s" * 32, store=url, inbox=True)
    try:
        assert isinstance(receiver.store, PostgresStore)
        assert receiver.store.table == f"sw_keys_{suffix}"
        assert isinstance(receiver.inbox, PostgresInbox)
        assert receiver.inbox.table == f"sw_inbox_{suffix}"
        assert receiver.store.claim("k", "t", 60) is ClaimState.NEW
    finally:
        receiver.store.close()  # type: ignore[attr-defined]
        receiver.inbox.close()  # type: ignore[union-attr]
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS sw_keys_{suffix}")
            connection.execute(f"DROP TABLE IF EXISTS sw_inbox_{suffix}")


def test_postgres_rejects_a_bad_table_name() -> None:
    with pytest.raises(ConfigurationError, match="table"):
        store_from_url("postgresql://u@h/db?table=x;drop")


def test_env_var_wins_over_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, "memory")
    assert isinstance(store_from_env(), MemoryStore)
    monkeypatch.delenv(ENV_VAR)
    store = store_from_env(f"sqlite:{tmp_path / 'k.sqlite3'}")
    assert isinstance(store, SQLiteStore)
    store.close()


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
        ("postgresql://app:hunter2@db/webhooks", "postgresql://app:***@db/webhooks"),
        ("rediss://user:hunter2@cache/1?prefix=x", "rediss://user:***@cache/1?prefix=x"),
        ("postgresql://app:hun/ter2@db/w", "postgresql://app:***@db/w"),  # unescaped "/"
        # libpq takes a password with an unescaped "?" or "#" (it connects): masked too
        ("postgresql://app:hun?ter2@db:5432/w", "postgresql://app:***@db:5432/w"),
        ("postgres://app:hun#ter2@db/w?sslmode=require", "postgres://app:***@db/w?sslmode=require"),
        ("postgresql://app@db/w?password=hun#ter2", "postgresql://app@db/w?password=***"),
        (
            "postgresql://app@db/w?password=hunter2&sslmode=require",
            "postgresql://app@db/w?password=***&sslmode=require",
        ),
        ("host=db user=app password=hunter2", "host=db user=app password=***"),
        ("host=db password='hunter 2' user=app", "host=db password=*** user=app"),
        ("postgresql://app@db/webhooks", "postgresql://app@db/webhooks"),
        ("redis://cache:6379/0", "redis://cache:6379/0"),
        ("sqlite:/var/lib/a@b.sqlite3", "sqlite:/var/lib/a@b.sqlite3"),
        ("memory", "memory"),
    ],
)
def test_redact_url_hides_only_the_password(url: str, redacted: str) -> None:
    from service_webhooks.stores._url import redact_url

    assert redact_url(url) == redacted


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hun#ter2@cache:6379/0",  # redis-py: port 'hun'
        "redis://app:hun/ter2@cache:6379/0",
        "redis://:hun?ter2@cache:6379/0",
        "postgresql://app:hun%zzter2@db/w",  # libpq: invalid percent-encoded token "..."
    ],
)
def test_a_refused_url_s_message_quotes_no_piece_of_its_password(url: str) -> None:
    """The driver's own message quotes what it could not read, which may be the
    password or its start: the ConfigurationError masks it."""
    pytest.importorskip("redis" if url.startswith("redis") else "psycopg")
    with pytest.raises(ConfigurationError) as caught:
        store_from_url(url)
    assert "hun" not in str(caught.value)
    assert "ter2" not in str(caught.value)
    assert "***" in str(caught.value)


def test_a_refused_inbox_url_is_a_configuration_error_without_the_password() -> None:
    """PostgresInbox parses its conninfo as the store does (it raised psycopg's
    ProgrammingError, quoting the password, out of ``inbox list``)."""
    pytest.importorskip("psycopg")
    from service_webhooks.inbox import PostgresInbox

    with pytest.raises(ConfigurationError) as caught:
        PostgresInbox("postgresql://app:hun%zzter2@db/w")
    assert "hun" not in str(caught.value)
    assert "***" in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter2@cache.internal:6379/0",
        "postgresql://app:hunter2@db.internal/w",
        "postgresql://app:hun?ter2@db.internal/w",
        "postgresql://app:hun#ter2@db.internal/w",
    ],
)
def test_store_reprs_show_where_but_never_the_password(url: str) -> None:
    pytest.importorskip("redis" if url.startswith("redis") else "psycopg")
    store = store_from_url(url)
    text = repr(store)
    assert "ter2" not in text
    assert ".internal" in text
    assert "***" in text


def test_a_unix_socket_redis_url_reaches_the_server(
    tmp_path: Path, unavailable: Callable[[str, str], NoReturn]
) -> None:
    """``unix:///path`` (the store URL table's third Redis form), with our ``prefix``
    and ``timeout`` and the driver's ``db``: the empty host's ``//`` is kept, so
    redis-py takes it (it refused ``unix:/path`` as a URL without a scheme)."""
    from service_webhooks.stores._redis import RedisStore

    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server", "not installed")
    sock = tmp_path / "redis.sock"
    command = [binary, "--port", "0", "--unixsocket", str(sock), "--save", ""]
    command += ["--appendonly", "no", "--logfile", ""]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        store = store_from_url(f"unix://{sock}?db=3&prefix=app1:&timeout=2")
        assert isinstance(store, RedisStore)
        assert repr(store) == f"RedisStore('unix://{sock}?db=3', prefix='app1:')"
        try:
            assert store.claim("k", "t", 60) is ClaimState.NEW
            assert store_from_url(f"UNIX://{sock}").claim("k", "u", 60) is ClaimState.NEW  # db 0
            assert store.claim("k", "u", 60) is ClaimState.IN_FLIGHT
        finally:
            store.close()
    finally:
        process.kill()
        process.wait(10)


def test_driver_parameters_reach_the_driver_as_written() -> None:
    """Ours are taken out; the rest is not decoded and encoded again (``%20`` would
    become ``+``, which libpq reads as a plus sign)."""
    url = "postgresql://u@h/db?options=-c%20synchronous_commit%3Doff&table=a%2Eb&x=1+2&&y="
    assert pop_query(url, "table", "timeout") == (
        "postgresql://u@h/db?options=-c%20synchronous_commit%3Doff&x=1+2&y=",
        {"table": "a.b"},
    )
    assert pop_query("redis://h/0", "prefix") == ("redis://h/0", {})


def test_a_postgres_url_with_options_works(request: pytest.FixtureRequest) -> None:
    """``?options=-c%20synchronous_commit%3Doff`` (the docs' scaling advice) reaches
    libpq intact: the store claims and completes, and the session has the setting."""
    import psycopg

    from service_webhooks.stores._postgres import PostgresStore

    require_postgres(request)
    table = f"service_webhooks_test_{uuid.uuid4().hex[:16]}"
    separator = "&" if "?" in POSTGRES_URL else "?"
    url = f"{POSTGRES_URL}{separator}options=-c%20synchronous_commit%3Doff&table={table}&timeout=3"
    store = store_from_url(url)
    assert isinstance(store, PostgresStore)
    try:
        assert store.claim("k", "t", 60) is ClaimState.NEW
        assert store.complete("k", "t", MIN_RETENTION)
        with store._sync_pool().connection() as connection:  # the store's own session
            row = connection.execute("SHOW synchronous_commit").fetchone()
        assert row == ("off",)
    finally:
        store.close()
        with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("redis://", "must specify one of the following schemes"),
        ("redis://u:PW-never@host:notaport/0", "Port could not be cast to integer"),
        ("redis://u:PW-never@h/0?socket_timeout=x", "Invalid value for 'socket_timeout'"),
        ("postgresql://u:PW-never@h/db?bogus=1", 'invalid URI query parameter: "bogus"'),
    ],
)
def test_a_malformed_server_url_is_a_configuration_error_at_once(url: str, reason: str) -> None:
    """Refused when the store is made, with the driver's reason (not at the first
    delivery, not as the driver's own exception), and never with the password."""
    with pytest.raises(
        ConfigurationError, match=r"invalid (Redis URL|PostgreSQL conninfo)"
    ) as caught:
        store_from_url(url)
    assert reason in str(caught.value)
    assert "PW-never" not in str(caught.value)


@pytest.mark.parametrize("store", [MemoryStore, SQLiteStore])
def test_a_store_class_instead_of_an_instance_is_refused(store: type) -> None:
    from service_webhooks import WebhookReceiver

    with pytest.raises(ConfigurationError, match=f"not the class {store.__name__}"):
        WebhookReceiver("s", store=store)


@pytest.mark.parametrize(
    "url", ["redis://:hunter2@[::1", "postgresql://u:hunter2@[::1/db", "postgres://[::1:5432/db"]
)
def test_an_unclosed_ipv6_bracket_is_a_configuration_error(url: str) -> None:
    """urllib's bare ``ValueError`` ("Invalid IPv6 URL") had escaped the URL parsers."""
    with pytest.raises(ConfigurationError, match="unclosed") as caught:
        store_from_url(url)
    assert "hunter2" not in str(caught.value)
