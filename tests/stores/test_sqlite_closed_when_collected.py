"""A SQLite store or inbox closes its connections: when dropped without ``close()``,
and each thread's once that thread ends.

The docs make closing optional; Python 3.13 reports a connection garbage-collected open
(``ResourceWarning: unclosed database``, an error under ``filterwarnings = error``),
where 3.11 and 3.12 closed it silently. Each thread gets a connection of its own: a
server that starts a thread per request (``flask run``, Django's ``runserver``) would
otherwise leave one open connection per request it served (measured through werkzeug's
threaded server: 5,000 deliveries left 18,500 file descriptors and 1.1 GB of memory).
"""

from __future__ import annotations

import asyncio
import gc
import http.client
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest
from sw_closing import is_closed

from service_webhooks import WebhookReceiver, sign
from service_webhooks.inbox import SQLiteInbox
from service_webhooks.stores import SQLiteStore
from service_webhooks.testing import Signer

SECRET = "whsec-unclosed-0123456789abcdef0123456789ab"
THREADS_SECRET = "whsec-threads-0123456789abcdef0123456789ab"
ORG = "o-UNCLOSED-na1"
NOTE = (
    b'{"eventName":"note.created","version":1,"organizationId":"o-UNCLOSED-na1",'
    b'"data":{"id":"n-1","author":"a@example.com","text":"hi"}}'
)


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
        assert all(is_closed(connection) for connection in connections)
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
    assert is_closed(connection)


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
    assert all(is_closed(connection) for connection in connections)


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
    assert all(is_closed(connection) for connection in connections)


def _in_threads(count: int, work: Callable[[int], sqlite3.Connection]) -> list[sqlite3.Connection]:
    """Run ``work(i)`` in ``count`` threads, one after the other; the connections they used."""
    used: list[sqlite3.Connection] = []
    for i in range(count):
        _in_a_thread(lambda i=i: used.append(work(i)))
    return used


def test_a_store_closes_the_connection_of_a_thread_that_ended(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")

    def claim(i: int) -> sqlite3.Connection:
        store.claim(f"k{i}", "a", 60)
        return store._connection()

    used = _in_threads(20, claim)
    assert len(set(map(id, used))) == 20
    assert all(is_closed(connection) for connection in used)
    assert store._connections == []
    store.claim("main", "a", 60)  # the threads that live keep theirs
    assert len(store._connections) == 1
    store.close()


def test_a_store_still_closes_the_connections_of_threads_that_live(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    opened, stop = threading.Event(), threading.Event()

    def claim_and_wait() -> None:
        store.claim("k", "a", 60)
        opened.set()
        stop.wait()

    thread = threading.Thread(target=claim_and_wait)
    thread.start()
    try:
        opened.wait()
        [connection] = store._connections
        store.close()
        assert is_closed(connection)
        assert store._connections == []
    finally:
        stop.set()
        thread.join()


def test_an_inbox_closes_the_connection_of_a_thread_that_ended(tmp_path: Path) -> None:
    inbox = SQLiteInbox(tmp_path / "inbox.sqlite3")

    def search(i: int) -> sqlite3.Connection:
        inbox.search()
        return inbox._connection()

    used = _in_threads(20, search)
    assert len(set(map(id, used))) == 20
    assert all(is_closed(connection) for connection in used)
    assert inbox._connections == []
    inbox.close()


def test_a_store_closes_the_connection_of_an_event_loop_once_collected(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    for i in range(10):  # asyncio.run: a new event loop each time
        asyncio.run(store.aclaim(f"k{i}", "a", 60))
    gc.collect()
    assert store._connections == []
    store.close()


def test_a_thread_per_request_server_keeps_no_connection_per_request(tmp_path: Path) -> None:
    """werkzeug's threaded server (what ``flask run`` serves with) starts a thread for
    each connection."""
    from flask import Flask
    from werkzeug.serving import make_server

    from service_webhooks.adapters.flask import webhook_blueprint

    receiver = WebhookReceiver(THREADS_SECRET, store=f"sqlite:{tmp_path / 'hooks.sqlite3'}")
    receiver.on("note.created")(lambda event: None)
    app = Flask("threads")
    app.register_blueprint(webhook_blueprint(receiver))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    signer = Signer(THREADS_SECRET)
    store, inbox = receiver.store, receiver.inbox
    assert isinstance(store, SQLiteStore)
    assert isinstance(inbox, SQLiteInbox)
    try:
        for i in range(40):
            body, headers = signer.delivery(
                "note.created", {"id": f"n-{i}", "author": "a@b.c", "text": "hi"}
            )
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            connection.request("POST", "/webhooks", body=body, headers=headers)
            response = connection.getresponse()
            assert (response.status, response.read()) == (
                200,
                b'{"status":200,"reason":"processed"}',
            )
            connection.close()
        deadline = time.monotonic() + 10  # the request threads end just after answering
        while len(store._connections) + len(inbox._connections) > 2:
            assert time.monotonic() < deadline, (store._connections, inbox._connections)
            time.sleep(0.01)
    finally:
        server.shutdown()
        serving.join()
        store.close()
        inbox.close()
