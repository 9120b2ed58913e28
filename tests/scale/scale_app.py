"""The ASGI app the scale and fault tests run under uvicorn (one or several workers).

Configured by environment variables, read once per worker process:

* ``SW_SCALE_STORE``: the idempotency store URL (``redis://…?prefix=…`` or
  ``postgresql://…?table=…``).
* ``SW_SCALE_COUNT``: where the handler records its runs: ``redis://…#hash`` (one
  ``HINCRBY hash <note id> 1`` per run) or ``postgresql://…#table`` (one ``INSERT``).
* ``SW_SCALE_LEASE``: the receiver's lease in seconds (default 120).
* ``SW_SCALE_SLEEP``: seconds the handler sleeps *after* recording that it started
  (to be killed mid-handler, or to keep deliveries in flight).
* ``SW_SCALE_STORE_TIMEOUT``: PostgreSQL pool timeout in seconds (default 5).
"""

from __future__ import annotations

import os
import time
from typing import Any
from urllib.parse import urlsplit

from service_webhooks import Event, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp
from service_webhooks.stores._base import IdempotencyStore
from service_webhooks.stores._url import store_from_url

SECRET = "whsec-test-0123456789abcdef0123456789abcdef"


def _store(url: str) -> IdempotencyStore:
    if url.startswith("postgres"):
        from service_webhooks.stores._postgres import PostgresStore

        parts = urlsplit(url)
        table = parts.query.removeprefix("table=")
        timeout = float(os.environ.get("SW_SCALE_STORE_TIMEOUT", "5"))
        return PostgresStore(
            parts._replace(query="").geturl(), table=table, timeout=timeout, max_size=4
        )
    return store_from_url(url)


def _recorder(target: str) -> Any:
    url, _, name = target.partition("#")
    if url.startswith("redis"):
        import redis

        client = redis.Redis.from_url(url)
        return lambda note_id: client.hincrby(name, note_id, 1)
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(url, min_size=1, max_size=4, kwargs={"autocommit": True}, open=True)

    def record(note_id: str) -> None:
        with pool.connection() as connection:
            connection.execute(f"INSERT INTO {name} (note_id) VALUES (%s)", (note_id,))  # noqa: S608

    return record


record = _recorder(os.environ["SW_SCALE_COUNT"])
sleep = float(os.environ.get("SW_SCALE_SLEEP", "0"))
receiver = WebhookReceiver(
    secrets=SECRET,
    store=_store(os.environ["SW_SCALE_STORE"]),
    lease=float(os.environ.get("SW_SCALE_LEASE", "120")),
)


@receiver.on("note.created")
def note_created(event: Event[Any]) -> None:
    record(event.data.id)
    if sleep:
        time.sleep(sleep)


app = WebhookApp(receiver)
