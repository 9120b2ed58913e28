"""The documented pattern: a webhook handler reads current state through the API."""

from __future__ import annotations

import pytest

from service_webhooks import Event, NoteCreated, WebhookReceiver
from service_webhooks.api import AsyncClient, Client, OperationState, OperationType
from service_webhooks.testing.fake_api import FakeAPI, Fault
from service_webhooks.testing.signer import Signer

SECRET = "whsec-test-handler-0123456789abcdef"
NOTE = {"id": "n-1", "author": "ana@example.com", "text": "hello"}


@pytest.fixture
def fake() -> FakeAPI:
    return FakeAPI()


def no_pending_deletions(fake: FakeAPI) -> None:
    fake.operations[:] = [
        op
        for op in fake.operations
        if not (op["state"] == "PENDING" and op["type"] == "DELETE_SESSION")
    ]


def test_sync_handler_reads_operations(fake: FakeAPI) -> None:
    api = Client("test-key", base_url="http://fake", transport=fake.sync_transport())
    receiver = WebhookReceiver(secrets=SECRET, store="memory")
    indexed: list[str] = []

    @receiver.on("note.created")
    def handle(event: Event[NoteCreated]) -> None:
        pending = api.operations.iter(
            state=OperationState.PENDING, type=OperationType.DELETE_SESSION
        )
        if any(True for _ in pending):
            raise RuntimeError("a session deletion is in progress; retry later")
        indexed.append(event.data.id)

    body, headers = Signer(SECRET).delivery("note.created", NOTE)
    signature = headers["Service-Signature"]
    assert receiver.process(body, signature).status == 500  # retried by the service
    no_pending_deletions(fake)
    outcome = receiver.process(body, signature)
    assert outcome.status == 200
    assert indexed == ["n-1"]
    assert dict(fake.requests[-1].params) == {"state": "PENDING", "type": "DELETE_SESSION"}
    api.close()


async def test_async_handler_and_api_failure_make_the_service_retry(fake: FakeAPI) -> None:
    no_pending_deletions(fake)
    receiver = WebhookReceiver(secrets=SECRET, store="memory")
    states: list[str] = []
    async with AsyncClient(
        "test-key", base_url="http://fake", transport=fake.async_transport(), max_retries=0
    ) as api:

        @receiver.on("note.created")
        async def handle(event: Event[NoteCreated]) -> None:
            async for op in api.operations.iter(type=OperationType.DELETE_SESSION, limit=5):
                states.append(op.state)

        body, headers = Signer(SECRET).delivery("note.created", NOTE)
        fake.inject(Fault(status=503))
        failed = await receiver.aprocess(body, headers["Service-Signature"])
        assert failed.status == 500  # the API error escaped the handler: retried later
        assert states == []
        processed = await receiver.aprocess(body, headers["Service-Signature"])
        assert processed.status == 200
        assert set(states) == {"COMPLETED", "FAILED"}
