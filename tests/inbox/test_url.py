"""``inbox_from_url``: each form it takes, and the refusals."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from service_webhooks import ConfigurationError
from service_webhooks.inbox import MemoryInbox, SQLiteInbox, inbox_from_url


def test_memory() -> None:
    assert isinstance(inbox_from_url("memory"), MemoryInbox)
    assert isinstance(inbox_from_url("  MEMORY "), MemoryInbox)


@pytest.mark.parametrize("form", ["sqlite:{path}", "sqlite://{path}"])
def test_sqlite_relative_and_absolute(tmp_path: Path, form: str) -> None:
    path = tmp_path / "inbox.sqlite3"
    inbox = inbox_from_url(form.format(path=path))
    assert isinstance(inbox, SQLiteInbox)
    assert inbox.search().items == ()  # usable at once: the file and table exist
    assert path.exists()


def test_sqlite_timeout_is_an_option_not_part_of_the_file_name(tmp_path: Path) -> None:
    """The same URL as the store's (``sqlite:PATH?timeout=2``) puts the inbox in PATH."""
    path = tmp_path / "inbox.sqlite3"
    inbox = inbox_from_url(f"sqlite:{path}?timeout=2")
    assert isinstance(inbox, SQLiteInbox)
    assert inbox.search().items == ()
    assert inbox._timeout == 2  # type: ignore[attr-defined]
    assert path.exists()
    assert not (tmp_path / "inbox.sqlite3?timeout=2").exists()


def test_the_default_inbox_beside_a_sqlite_store_waits_as_long_as_the_store(
    tmp_path: Path,
) -> None:
    """``store="sqlite:PATH?timeout=2"``: the inbox in that file waits 2 s for its lock
    too (it waited the default 5 s, past the store's bound, for the same lock)."""
    from service_webhooks import WebhookReceiver

    path = tmp_path / "hooks.sqlite3"
    receiver = WebhookReceiver("whsec-test", store=f"sqlite:{path}?timeout=2")
    assert isinstance(receiver.inbox, SQLiteInbox)
    assert receiver.inbox._timeout == 2  # type: ignore[attr-defined]
    assert receiver.inbox.path == path  # type: ignore[attr-defined]


@pytest.mark.parametrize("query", ["?mode=ro", "?timeout=-1"])
def test_sqlite_refuses_other_query_parameters(tmp_path: Path, query: str) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        inbox_from_url(f"sqlite:{tmp_path / 'inbox.sqlite3'}{query}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["sqlite:", "sqlite://"])
def test_sqlite_needs_a_path(url: str) -> None:
    with pytest.raises(ConfigurationError, match="file path"):
        inbox_from_url(url)


@pytest.mark.parametrize("url", ["redis://:pw@localhost/0", "ftp://host/x", "nonsense"])
def test_other_schemes_are_refused_without_showing_the_url(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        inbox_from_url(url)
    assert "pw" not in str(caught.value)
    assert "memory, sqlite:PATH or postgresql://" in str(caught.value)


@pytest.mark.parametrize("text", ["jk-31fj0vojdbyjcslqxq2", "x" * 30 + ":y", "a b:c"])
def test_text_that_is_no_url_is_never_echoed(text: str) -> None:
    """A secret pasted into the inbox setting must not reach the error (or a log)."""
    with pytest.raises(ConfigurationError, match=r"^no inbox for URL: use memory") as caught:
        inbox_from_url(text)
    message = str(caught.value).lower()
    assert all(text.lower()[i : i + 6] not in message for i in range(len(text) - 5))


def test_postgresql_keeps_the_driver_options_and_takes_its_own_table() -> None:
    inbox = inbox_from_url(
        "postgresql://127.0.0.1:5432/test?inbox_table=my_inbox&table=store_table&connect_timeout=3",
        create_schema=False,
    )
    assert type(inbox).__name__ == "PostgresInbox"
    assert inbox.table == "my_inbox"  # type: ignore[attr-defined]
    text = repr(inbox)
    assert "store_table" not in text


@pytest.mark.parametrize("prepared", ["true", "false"])
def test_a_postgresql_inbox_url_can_turn_prepared_statements_off(
    postgres_url: str, prepared: str
) -> None:
    """As the store's URL (a pooler in transaction mode): libpq never sees the option."""
    from service_webhooks import WebhookReceiver

    url = f"{postgres_url}?prepared_statements={prepared}"
    receiver = WebhookReceiver("whsec-test", store=url, inbox=True)  # the inbox beside
    inbox: Any = receiver.inbox
    with inbox._sync_pool().connection() as connection:
        threshold = connection.prepare_threshold
    inbox.close()
    receiver.store.close()  # type: ignore[attr-defined]
    assert (threshold is None) is (prepared == "false")


def test_a_postgresql_inbox_made_beforehand_serves_a_role_that_may_not_create(
    postgres_url: str,
) -> None:
    """The table made from ``schema_sql()`` by its owner (migrations) and granted to the
    receiver's role: ``inbox="postgresql://…"`` records into it. Before, its ``CREATE …
    IF NOT EXISTS`` was refused (``permission denied``) even though the table existed,
    and the receiver did not start. A missing table that role may not create is still
    the database's refusal."""
    import psycopg

    from service_webhooks import MemoryStore, WebhookReceiver, sign
    from service_webhooks.inbox import PostgresInbox

    run = uuid.uuid4().hex[:10]
    role, schema = f"sw_inbox_writer_{run}", f"sw_inbox_made_{run}"
    parts = urlsplit(postgres_url)
    url = parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}").geturl()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN".encode())
        try:
            admin.execute(f"CREATE SCHEMA {schema}".encode())
            admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}".encode())
            admin.execute(PostgresInbox.schema_sql(f"{schema}.inbox").encode())
            grant = f"GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.inbox TO {role}"
            admin.execute(grant.encode())

            receiver = WebhookReceiver(
                "whsec-made", store=MemoryStore(), inbox=f"{url}?inbox_table={schema}.inbox"
            )
            inbox = receiver.inbox
            assert inbox is not None
            try:
                data = b'{"id": "n-1", "author": "a@b.c", "text": "hi"}'
                body = b'{"eventName": "note.created", "version": 1, "data": ' + data + b"}"
                outcome = receiver.process(body, sign(body, "whsec-made", "o-1"))
                assert (outcome.status, outcome.reason) == (200, "unhandled")
                assert [r.reason for r in inbox.search().items] == ["unhandled"]
            finally:
                inbox.close()  # type: ignore[attr-defined]

            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                inbox_from_url(f"{url}?inbox_table={schema}.never_made")
        finally:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())
            admin.execute(f"DROP OWNED BY {role}".encode())
            admin.execute(f"DROP ROLE {role}".encode())
