"""A SQLite file deleted, or replaced by another file (a restored backup), while a store
or an inbox has it open is opened again at the next call, with no restart.

In WAL mode SQLite goes on writing into the file it opened even once no path leads to
it: a receiver answered 200 for deliveries whose records went where no other
connection (a new thread's, another process's, the CLI's, the next start's) would ever
see them, and a thread that opened the path anew made another file, so one event was
processed twice, once per file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from service_webhooks import SQLiteStore, WebhookReceiver, sign
from service_webhooks.inbox import SQLiteInbox
from service_webhooks.stores import ClaimState, _sqlite

SECRET = "whsec-moved"
ORG = "o-MOVED"
BODY = b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a","text":"t"}}'


@pytest.fixture(autouse=True)
def _look_at_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The path is looked at on every call here (once a second otherwise)."""
    monkeypatch.setattr(_sqlite, "MOVED_LOOK_EVERY", 0.0)


def _delete(path: Path) -> None:
    """Delete the database file and its WAL and shared-memory files."""
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)


def _replace(path: Path) -> None:
    """Put another database file (an empty store's) in the place of ``path``."""
    other = path.with_name("other.sqlite3")
    SQLiteStore(other).create_schema()
    _delete(path)
    os.replace(other, path)


@pytest.mark.parametrize("change", [_delete, _replace], ids=["deleted", "replaced"])
@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_a_store_whose_file_was_deleted_or_replaced_writes_to_the_file_at_its_path(
    tmp_path: Path, run_async: bool, change: Callable[[Path], None]
) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")

    async def claim(key: str) -> ClaimState:
        return await store.aclaim(key, "t", 60) if run_async else store.claim(key, "t", 60)

    assert await claim("k-1") is ClaimState.NEW
    change(store.path)
    assert await claim("k-2") is ClaimState.NEW
    other = SQLiteStore(store.path)  # what a new thread, process or start opens
    assert other.claim("k-2", "u", 60) is ClaimState.IN_FLIGHT  # was: NEW, in another file
    other.close()
    store.close()


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_a_receiver_whose_file_was_deleted_records_its_deliveries_in_the_new_one(
    tmp_path: Path, run_async: bool
) -> None:
    path = tmp_path / "webhooks.sqlite3"
    receiver = WebhookReceiver(SECRET, store=f"sqlite:{path}")  # its inbox: the same file
    receiver.on("note.created")(lambda event: None)
    receiver.process(b"{}", sign(b"{}", SECRET, ORG))  # both tables made, the file open
    _delete(path)
    signature = sign(BODY, SECRET, ORG)
    outcome = (
        await receiver.aprocess(BODY, signature) if run_async else receiver.process(BODY, signature)
    )
    assert (outcome.status, outcome.reason) == (200, "processed")
    inbox = SQLiteInbox(path)  # what the CLI and the dashboard read
    assert [record.reason for record in inbox.search().items] == ["processed"]
    inbox.close()
    receiver.store.close()  # type: ignore[attr-defined]
    receiver.inbox.close()  # type: ignore[union-attr]


def test_an_inbox_whose_file_was_deleted_records_in_the_new_one(tmp_path: Path) -> None:
    """A SQLite inbox beside another store records through its own connections."""
    path = tmp_path / "inbox.sqlite3"
    inbox = SQLiteInbox(path)
    assert not inbox.search().items  # the file open
    _delete(path)
    receiver = WebhookReceiver(SECRET, store="memory", inbox=inbox)
    assert receiver.process(BODY, sign(BODY, SECRET, ORG)).reason == "unhandled"
    reader = SQLiteInbox(path)
    assert [record.reason for record in reader.search().items] == ["unhandled"]
    reader.close()
    inbox.close()


def test_the_path_is_looked_at_once_a_second_per_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a stat per store call would cost two per delivery: at most one per interval
    monkeypatch.setattr(_sqlite, "MOVED_LOOK_EVERY", 3600.0)
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    assert store.claim("k-1", "t", 60) is ClaimState.NEW  # looked: unchanged
    _delete(store.path)
    assert store.claim("k-2", "t", 60) is ClaimState.NEW  # within the interval: not looked
    assert not store.path.exists()
    monkeypatch.setattr(_sqlite, "MOVED_LOOK_EVERY", 0.0)
    for connection in list(store._connections):
        connection.next_look = 0.0  # the interval over
    assert store.claim("k-3", "t", 60) is ClaimState.NEW
    assert store.path.exists()  # the path opened again
    store.close()
