"""The receiver the dashboard's browser tests replay with (not a test module).

Configured by environment: SW_SECRET, SW_STORE (store URL), SW_INBOX (inbox URL) and
SW_FLAG (a file path): the handler fails until that file exists, i.e. until the test
"fixes" it. ``app`` is a FastAPI app answering deliveries on ``/webhooks`` with the
dashboard mounted at ``/webhooks/admin`` (credentials in SW_DASHBOARD_AUTH).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.routing import Mount

from service_webhooks import Event, WebhookReceiver
from service_webhooks.adapters.asgi import webhook_routes
from service_webhooks.dashboard import dashboard

receiver = WebhookReceiver(
    os.environ["SW_SECRET"], store=os.environ["SW_STORE"], inbox=os.environ["SW_INBOX"]
)


@receiver.on("note.created")
def note_created(event: Event[Any]) -> None:
    if not Path(os.environ["SW_FLAG"]).exists():
        raise RuntimeError("the handler is not fixed yet")


app = FastAPI()
app.router.routes.extend(webhook_routes(receiver, "/webhooks"))
app.router.routes.append(
    Mount(
        "/webhooks/admin",
        app=dashboard(receiver=receiver, basic_auth=os.environ.get("SW_DASHBOARD_AUTH", "a:b")),
    )
)
