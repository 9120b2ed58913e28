"""``WebhookApp`` served as the application: its lifespan shutdown closes what the
receiver's store and inbox opened, the app serves again after a new startup (as
``TestClient`` runs one per ``with``), and a close that fails is reported to the server
as ``lifespan.shutdown.failed`` with the reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient
from sw_closing import ClosingStore

from service_webhooks import WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp

Signed = Callable[..., tuple[bytes, str]]


def post(client: TestClient, signed: Signed) -> Any:
    body, header = signed()
    return client.post("/webhooks", content=body, headers={"Service-Signature": header})


def test_shutdown_closes_the_store_and_a_new_startup_serves_again(
    secret: str, signed: Signed, tmp_path: Path
) -> None:
    store = ClosingStore()
    receiver = WebhookReceiver(secret, store=store, inbox=f"sqlite:{tmp_path / 'inbox.db'}")
    receiver.on("note.created", lambda event: None)
    app = WebhookApp(receiver)
    with TestClient(app) as client:
        assert post(client, signed).status_code == 200
        assert store.calls == []
    assert store.calls == ["aclose", "close"]
    with TestClient(app) as client:  # the inbox's file is opened again
        assert post(client, signed).status_code == 200
    assert receiver.inbox is not None
    assert len(receiver.inbox.search().items) == 2


async def test_a_failing_close_is_reported_as_shutdown_failed(secret: str) -> None:
    app = WebhookApp(WebhookReceiver(secret, store=ClosingStore(OSError("disk gone")), inbox=False))
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "lifespan"}, receive, send)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.failed"]
    assert sent[1]["message"] == "closing the receiver failed: OSError: disk gone"
