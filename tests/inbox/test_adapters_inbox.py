"""Each adapter hands Content-Type and User-Agent to the inbox (never the signature)."""

from __future__ import annotations

import pytest

from service_webhooks import SIGNATURE_HEADER, MemoryStore, WebhookReceiver, sign
from service_webhooks.inbox import MemoryInbox

SECRET = "whsec-adapters-inbox"
ORG = "o-ADAPT"
BODY = b'{"eventName":"note.created","version":1,"data":{"id":"n","author":"a","text":"t"}}'
HEADERS = {
    "Content-Type": "application/json; charset=utf-8",
    "User-Agent": "Service-Webhooks/2.0",
}


def receiver_and_inbox() -> tuple[WebhookReceiver, MemoryInbox]:
    inbox = MemoryInbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)
    receiver.on("note.created")(lambda event: None)
    return receiver, inbox


def check(inbox: MemoryInbox) -> None:
    [record] = inbox.search().items
    assert (record.reason, record.body) == ("processed", BODY)
    assert (record.content_type, record.user_agent) == (
        HEADERS["Content-Type"],
        HEADERS["User-Agent"],
    )


def test_flask() -> None:
    flask = pytest.importorskip("flask")
    from service_webhooks.adapters.flask import webhook_blueprint

    receiver, inbox = receiver_and_inbox()
    app = flask.Flask("inbox_test")
    app.register_blueprint(webhook_blueprint(receiver))
    headers = {**HEADERS, SIGNATURE_HEADER: sign(BODY, SECRET, ORG)}
    assert app.test_client().post("/webhooks", data=BODY, headers=headers).status_code == 200
    check(inbox)


async def test_asgi() -> None:
    httpx = pytest.importorskip("httpx")
    from service_webhooks.adapters.asgi import WebhookApp

    receiver, inbox = receiver_and_inbox()
    transport = httpx.ASGITransport(app=WebhookApp(receiver))
    headers = {**HEADERS, SIGNATURE_HEADER: sign(BODY, SECRET, ORG)}
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        assert (await client.post("/", content=BODY, headers=headers)).status_code == 200
    check(inbox)
