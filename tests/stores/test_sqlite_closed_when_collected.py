"""A SQLite store or inbox dropped without ``close()`` closes its connections.

The docs make closing optional; Python 3.13 reports a connection garbage-collected open
(``ResourceWarning: unclosed database``, an error under ``filterwarnings = error``),
where 3.11 and 3.12 closed it silently.
"""

from __future__ import annotations

import gc
import sqlite3
import threading
import weakref
from pathlib import Path

import pytest

from service_webhooks import WebhookReceiver, sign
from service_webhooks.inbox import SQLiteInbox
from service_webhooks.stores import SQLiteStore

SECRET = "whsec-unclosed-0123456789abcdef0123456789ab"
ORG = "o-UNCLOSED-na1"
NOTE = (
    b'{"eventName":"note.created","version":1,"organizationId":"o-UNCLOSED-na1",'
    b'"data":{"id":"n-1","author":"a@example.com","text":"hi"}}'
)


def _is_closed(connection: sqlite3.Connection) -> bool:
    try:
        connection.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def _in_a_thread(work: object) -> None:
    thread = threading.Thread(target=work)  # type: ignore[arg-type]
    thread.start()
    thread.join()


def test_a_dropped_store_closes_the_connections_of_every_thread(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.claim("k", "a", 60)
    opened, stop = threading.Event(), threading.Event()

    def claim_and_wait(ref: weakref.ref[SQLiteStore]) -> None:
        ref().claim("j", "a", 60)  # type: ignore[union-attr]
        opened.set()
        stop.wait()  # a thread that lives on keeps its connection

    thread = threading.Thread(target=claim_and_wait, args=(weakref.ref(store),))
    thread.start()
    try:
        opened.wait()
        connections = list(store._connections)
        assert len(connections) == 2
        del store
        gc.collect()
        assert all(_is_closed(connection) for connection in connections)
    finally:
        stop.set()
        thread.join()


def test_a_store_closed_then_used_again_still_closes_when_dropped(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.claim("k", "a", 60)
    store.close()
    store.claim("j", "a", 60)  # a new connection, after close()
    [connection] = store._connections
    del store
    gc.collect()
    assert _is_closed(connection)


def test_a_dropped_inbox_closes_its_connections(tmp_path: Path) -> None:
    inbox = SQLiteInbox(tmp_path / "inbox.sqlite3")
    inbox.search()
    _in_a_thread(inbox.search)
    inbox.close()
    inbox.search()  # a new connection, after close()
    connections = list(inbox._connections)
    assert connections
    del inbox
    gc.collect()
    assert all(_is_closed(connection) for connection in connections)


@pytest.mark.filterwarnings("error")
def test_a_dropped_receiver_closes_its_sqlite_inbox(tmp_path: Path) -> None:
    receiver = WebhookReceiver(SECRET, store=f"sqlite:{tmp_path / 'hooks.sqlite3'}")
    receiver.on("note.created")(lambda event: None)
    assert receiver.process(NOTE, sign(NOTE, SECRET, ORG)).status == 200
    inbox = receiver.inbox
    assert isinstance(inbox, SQLiteInbox)
    connections = list(inbox._connections)
    assert connections
    del receiver, inbox
    gc.collect()
    assert all(_is_closed(connection) for connection in connections)
