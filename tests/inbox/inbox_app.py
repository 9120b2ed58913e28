"""The ASGI app the SIGKILL test serves with a real uvicorn (not a test module).

Configured by environment: SW_SECRET, SW_STORE (store URL), SW_INBOX (inbox URL).
"""

from __future__ import annotations

import os
from typing import Any

from service_webhooks import Event, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookMiddleware

receiver = WebhookReceiver(
    os.environ["SW_SECRET"], store=os.environ["SW_STORE"], inbox=os.environ["SW_INBOX"]
)


@receiver.on("note.created")
async def note_created(event: Event[Any]) -> None:
    if event.data.text == "fail":
        raise RuntimeError("handler failed")


async def not_found(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


app = WebhookMiddleware(not_found, receiver=receiver, path="/webhooks")
