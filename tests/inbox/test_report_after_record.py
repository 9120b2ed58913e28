"""A delivery is reported (log line, outcome observers, the tracer's span) once, with
the answer actually sent: when its inbox record cannot be written, that answer is 503
``store_unavailable``, not the 200 the pipeline had decided."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator

import pytest

from service_webhooks import DeliveryRecord, MemoryStore, WebhookReceiver, sign
from service_webhooks.inbox import MemoryInbox, ReceivedDelivery

SECRET = "whsec-report-after-record"
ORG = "o-REPORT"
BODY = json.dumps(
    {"eventName": "note.created", "version": 1, "data": {"id": "n-1", "author": "a", "text": "t"}}
).encode()


class FailingInbox(MemoryInbox):
    """An inbox whose writes fail once ``down`` is set (its database went away)."""

    down = False

    def record(self, delivery: ReceivedDelivery) -> int:
        if self.down:
            raise ConnectionError("inbox database went away")
        return super().record(delivery)

    async def arecord(self, delivery: ReceivedDelivery) -> int:
        return self.record(delivery)


class Spans:
    """A tracer that notes which reports arrive while its delivery span is open."""

    def __init__(self) -> None:
        self.open = False

    @contextlib.contextmanager
    def delivery(self) -> Iterator[None]:
        self.open = True
        try:
            yield
        finally:
            self.open = False

    @contextlib.contextmanager
    def handlers(self, event: object) -> Iterator[None]:
        yield


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_an_answer_changed_by_a_failed_record_is_the_one_reported(
    run_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = FailingInbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)
    receiver.tracer = spans = Spans()
    reported: list[tuple[int, str, str, str | None, bool]] = []

    @receiver.on_outcome
    def observe(record: DeliveryRecord) -> None:
        reported.append(
            (record.status, record.reason, record.detail, record.error_type, spans.open)
        )

    receiver.on("note.created", lambda event: None)

    def deliver() -> tuple[int, str]:
        header = sign(BODY, SECRET, ORG)
        if run_async:
            outcome = asyncio.run(receiver.aprocess(BODY, header))
        else:
            outcome = receiver.process(BODY, header)
        return outcome.status, outcome.reason

    assert deliver() == (200, "processed")
    inbox.down = True
    caplog.clear()  # the first delivery's line, when an earlier test left INFO enabled
    with caplog.at_level(logging.INFO, "service_webhooks"):
        assert deliver() == (503, "store_unavailable")  # a duplicate, but not recorded
    assert reported == [
        (200, "processed", "", None, True),
        (503, "store_unavailable", "the inbox is unavailable", "ConnectionError", True),
    ]
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(lines) == 1
    assert "503" in lines[0]
    assert "duplicate" not in lines[0]
