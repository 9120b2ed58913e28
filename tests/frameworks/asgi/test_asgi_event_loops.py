"""The ASGI adapter runs on asyncio only, and says so under another event loop (trio,
as ``hypercorn -k trio`` runs apps): its lifespan startup fails with the reason, and a
delivery raises it (the server answers 500 and logs it) instead of failing half-way,
with its claim held, at a plain-function handler or a release."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service_webhooks import Event, MemoryStore, WebhookReceiver, sign
from service_webhooks.adapters.asgi import WebhookApp, WebhookMiddleware

trio = pytest.importorskip("trio", reason="trio comes with selenium, in the test extra")

SECRET = "whsec-event-loops-0123456789"
BODY = json.dumps(
    {"eventName": "note.created", "version": 1, "data": {"id": "n-1", "author": "a", "text": "t"}}
).encode()


def receiver() -> tuple[WebhookReceiver, list[str]]:
    runs: list[str] = []
    webhooks = WebhookReceiver(SECRET, store=MemoryStore(), inbox=False)

    @webhooks.on("note.created")
    def handler(event: Event[Any]) -> None:  # a plain function: run on a thread
        runs.append(event.data.id)

    return webhooks, runs


def http_scope() -> dict[str, Any]:
    headers = [
        (b"service-signature", sign(BODY, SECRET, "o-1").encode()),
        (b"content-length", str(len(BODY)).encode()),
    ]
    return {"type": "http", "method": "POST", "path": "/webhooks", "headers": headers}


async def deliver(app: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": BODY, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(http_scope(), receive, send)
    return sent


@pytest.mark.parametrize("mount", ["app", "middleware"])
def test_a_delivery_under_trio_raises_the_reason_and_runs_nothing(mount: str) -> None:
    webhooks, runs = receiver()
    app: Any = WebhookApp(webhooks)
    if mount == "middleware":

        async def other(scope: Any, receive: Any, send: Any) -> None:
            raise AssertionError("a delivery reached the wrapped app")

        app = WebhookMiddleware(other, receiver=webhooks)
    with pytest.raises(RuntimeError, match="needs an asyncio event loop"):
        trio.run(deliver, app)
    assert runs == []


def test_the_lifespan_startup_fails_under_trio_with_the_reason() -> None:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "lifespan.startup"}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def main() -> None:
        await WebhookApp(receiver()[0])({"type": "lifespan"}, receive, send)

    trio.run(main)
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]
    assert "trio" in sent[0]["message"]


async def test_the_same_app_under_asyncio_processes_the_delivery() -> None:
    webhooks, runs = receiver()
    sent = await deliver(WebhookApp(webhooks))
    assert sent[0]["status"] == 200
    assert runs == ["n-1"]
