"""``WebhookReceiver.close()`` / ``aclose()``: what the store and the inbox opened is
closed, the receiver stays usable, and a failing store still lets the inbox close."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from sw_closing import ClosingStore

from service_webhooks import MemoryStore, WebhookReceiver

Signed = Callable[..., tuple[bytes, str]]


def test_close_closes_the_store_and_a_store_without_close_is_left_alone(
    secret: str,
) -> None:
    store = ClosingStore()
    WebhookReceiver(secret, store=store, inbox=False).close()
    assert store.calls == ["close"]
    WebhookReceiver(secret, store=MemoryStore(), inbox=False).close()  # no close(): fine


async def test_aclose_closes_this_loops_connections_then_the_rest(secret: str) -> None:
    store = ClosingStore()
    await WebhookReceiver(secret, store=store, inbox=False).aclose()
    assert store.calls == ["aclose", "close"]


def test_the_inbox_is_closed_even_when_the_store_fails_to_close(
    secret: str, tmp_path: Path, signed: Signed
) -> None:
    receiver = WebhookReceiver(
        secret, store=ClosingStore(OSError("cannot close")), inbox=f"sqlite:{tmp_path / 'inbox.db'}"
    )
    receiver.on("note.created", lambda event: None)
    assert receiver.process(*signed()).reason == "processed"  # the inbox connects
    inbox = receiver.inbox
    closed: list[str] = []
    original = inbox.close  # type: ignore[union-attr]

    def close() -> None:
        closed.append("inbox")
        original()

    inbox.close = close  # type: ignore[union-attr]
    with pytest.raises(OSError, match="cannot close"):
        receiver.close()
    assert closed == ["inbox"]


def test_a_closed_sqlite_receiver_reopens_its_file_on_the_next_delivery(
    secret: str, tmp_path: Path, signed: Signed
) -> None:
    receiver = WebhookReceiver(secret, store=f"sqlite:{tmp_path / 'hooks.db'}")
    receiver.on("note.created", lambda event: None)
    first = signed()
    assert receiver.process(*first).reason == "processed"
    receiver.close()
    receiver.close()  # again: harmless
    assert receiver.process(*first).reason == "duplicate"  # the same file, reopened
    assert receiver.inbox is not None
    assert [r.reason for r in receiver.inbox.search().items] == ["duplicate", "processed"]


async def test_aclose_ends_the_postgres_connections_the_receiver_opened(
    secret: str, postgres_url: str, signed: Signed
) -> None:
    import psycopg

    from service_webhooks.stores import PostgresStore

    name = f"sw-close-{uuid.uuid4().hex[:12]}"
    table = f"service_webhooks_close_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(f"{postgres_url}?application_name={name}", table=table)
    store.create_schema()
    receiver = WebhookReceiver(secret, store=store, inbox=False)

    def backends() -> int:
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            row = connection.execute(query, (name,)).fetchone()
        assert row is not None
        return int(row[0])

    receiver.on("note.created", lambda event: None)
    try:
        assert (await receiver.aprocess(*signed())).reason == "processed"
        receiver.process(*signed())  # the sync pool too
        assert backends() >= 2
        await receiver.aclose()
        deadline = time.monotonic() + 10
        while backends() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backends() == 0
    finally:
        await receiver.aclose()
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {table}")


async def test_leaving_a_with_block_closes_the_receiver(secret: str) -> None:
    store = ClosingStore()
    with WebhookReceiver(secret, store=store, inbox=False) as receiver:
        assert isinstance(receiver, WebhookReceiver)
        assert store.calls == []
    assert store.calls == ["close"]
    async with WebhookReceiver(secret, store=store, inbox=False) as receiver:
        assert isinstance(receiver, WebhookReceiver)
    assert store.calls == ["close", "aclose", "close"]
