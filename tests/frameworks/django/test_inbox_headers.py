"""The Django view hands Content-Type and User-Agent to the receiver's inbox."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from service_webhooks import MemoryStore, WebhookReceiver, sign
from service_webhooks.adapters.django.views import webhook_view
from service_webhooks.inbox import MemoryInbox

SECRET = "whsec-django-inbox"
BODY = b'{"eventName":"note.created","version":1,"data":{"id":"n","author":"a","text":"t"}}'


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_the_view_records_content_type_and_user_agent(asynchronous: bool) -> None:
    inbox = MemoryInbox()
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)
    receiver.on("note.created")(lambda event: None)
    request = RequestFactory().post(
        "/webhooks",
        data=BODY,
        content_type="application/json",
        headers={
            "User-Agent": "Service-Webhooks/2.0",
            "Service-Signature": sign(BODY, SECRET, "o-1"),
        },
    )
    view = webhook_view(receiver, asynchronous=asynchronous)
    response = (await view(request)) if asynchronous else view(request)
    assert response.status_code == 200
    [record] = inbox.search().items
    assert (record.body, record.content_type, record.user_agent) == (
        BODY,
        "application/json",
        "Service-Webhooks/2.0",
    )
