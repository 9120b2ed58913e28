"""A Starlette app that receives the service's webhooks at ``/webhooks`` beside a normal route.

Run it from the repository root (with the ``asgi`` and ``cli`` extras installed)::

    export SERVICE_WEBHOOKS_SECRET=whsec-development-only-0123456789abcdef0123
    uvicorn --app-dir examples asgi_app:app --port 8000   # or: python examples/asgi_app.py

(``--app-dir examples``, not ``examples.asgi_app``: the repository root's
``service_webhooks/`` folder would shadow the installed package, which holds the
adapters.)

then, from another terminal, send it a signed delivery::

    service-webhooks send http://127.0.0.1:8000/webhooks \\
        --secret whsec-development-only-0123456789abcdef0123 \\
        --org o-1 --event note.created --allow-private-destinations \\
        --data '{"id": "n-1", "author": "ana@example.com", "text": "hello"}'

``send`` prints ``HTTP 200 OK: success`` and this app prints the note. Sending the same
command again is a duplicate: answered 200, the handler does not run twice. A wrong
``--secret`` is answered 401.

Note ``webhook_routes`` for the webhook path: it answers ``/webhooks`` and ``/webhooks/``
alike. A single ``Route("/webhooks", ...)`` would have Starlette answer ``/webhooks/``
with a 307 redirect, and ``Mount("/webhooks", ...)`` would answer ``/webhooks`` with one;
the service follows no redirect (spec §7), so such deliveries would never arrive.
"""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from service_webhooks import Duration, Event, NoteCreated, SegmentTrendAlert, WebhookReceiver

# mypy run on the source tree cannot see service_webhooks.adapters (a package-dir
# mapping); on an installed wheel it can, hence both codes.
from service_webhooks.adapters.asgi import (  # type: ignore[import-not-found,unused-ignore]
    webhook_routes,
)

SECRETS = os.environ.get(
    "SERVICE_WEBHOOKS_SECRET", "whsec-development-only-0123456789abcdef0123"
).split()
"""The endpoint's signing secret; set ``SERVICE_WEBHOOKS_SECRET`` outside development: one
secret, or several separated by spaces, newest first (a rotation), as the
``service-webhooks`` command reads it."""

# "memory" forgets processed events on restart; use "sqlite:webhooks.sqlite3" (or Redis,
# PostgreSQL) when duplicates must be caught across restarts and processes.
receiver = WebhookReceiver(SECRETS, store="memory")

received: list[Event[NoteCreated] | Event[SegmentTrendAlert]] = []
"""Every event the handlers ran for, oldest first (the tests read it)."""


@receiver.on("note.created", version=1)
def note_created(event: Event[NoteCreated]) -> None:
    """A plain function: the receiver runs it in a worker thread under ASGI."""
    received.append(event)
    print(
        f"[{event.organization_id}] note {event.data.id} by {event.data.author}: {event.data.text}"
    )


@receiver.on("segment.trend.alert", version=1)
async def trend_alert(event: Event[SegmentTrendAlert]) -> None:
    """An async handler. ``duration`` is a :class:`Duration`, or a new value as a str."""
    received.append(event)
    if event.data.duration == Duration.DAILY:
        print(f"[{event.organization_id}] daily trend alert")
    else:
        print(f"[{event.organization_id}] trend alert ({event.data.duration})")


async def home(request: Request) -> JSONResponse:
    """The application's own routes keep working beside the webhook endpoint."""
    return JSONResponse({"service": "example", "webhooks": "/webhooks", "received": len(received)})


app = Starlette(
    routes=[
        Route("/", home),
        *webhook_routes(receiver, "/webhooks"),  # every method: the receiver answers 405
    ]
)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
