"""A ``PostgresInbox`` whose table was never created says how to create it.

Before, every delivery was answered 503 with psycopg's ``UndefinedTable`` in the log, and
``search()`` raised it raw: nothing named ``create_schema()``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from service_webhooks import ConfigurationError, MemoryStore, WebhookReceiver, sign

SECRET = "whsec-missing-inbox-table"
ORG = "o-MISSING"
BODY = json.dumps(
    {
        "eventName": "note.created",
        "version": 1,
        "data": {"id": "n-1", "author": "a@b.c", "text": "hi"},
    }
).encode()


@pytest.fixture
def uncreated(postgres_url: str) -> Iterator[Any]:
    from service_webhooks.inbox import PostgresInbox

    inbox = PostgresInbox(postgres_url, table=f"sw_never_made_{uuid.uuid4().hex[:12]}")
    yield inbox
    assert not inbox.has_table()  # nothing here creates it behind the user's back
    inbox.close()


def _says_how(message: str, table: str) -> None:
    assert f"the inbox table {table!r} does not exist in PostgreSQL at " in message
    assert "UndefinedTable" in message
    assert "PostgresInbox.create_schema()" in message
    assert "schema_sql()" in message


def test_reading_names_the_fix(uncreated: Any) -> None:
    with pytest.raises(ConfigurationError) as refused:
        uncreated.search()
    _says_how(str(refused.value), uncreated.table)


@pytest.mark.parametrize("run_async", [False, True], ids=["process", "aprocess"])
def test_a_delivery_is_refused_retryably_and_the_log_names_the_fix(
    uncreated: Any, run_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=uncreated)
    receiver.on("note.created", lambda event: ran.append(event.data.id))
    header = sign(BODY, SECRET, ORG)
    with caplog.at_level(logging.ERROR, logger="service_webhooks"):
        if run_async:

            async def deliver() -> Any:
                try:
                    return await receiver.aprocess(BODY, header)
                finally:
                    await uncreated.aclose()  # its pool belongs to this loop

            outcome = asyncio.run(deliver())
        else:
            outcome = receiver.process(BODY, header)
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")  # retried
    logged = "\n".join(record.getMessage() for record in caplog.records)
    _says_how(logged, uncreated.table)
