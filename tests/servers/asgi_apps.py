"""ASGI apps the server tests run under a real uvicorn (not a test module).

Every app shares one receiver (secret ``SW_SECRET``, a memory store) whose
``note.created`` handler appends the note id to the file ``SW_CALLS``:

* ``mounted``: ``Mount("/api", app=WebhookMiddleware(...))`` inside a Starlette app;
* ``middleware``: ``WebhookMiddleware`` around a Starlette app, for ``--root-path``;
* ``routes``: a Starlette app built from ``webhook_routes(receiver, "/webhooks")``;
* ``fastapi_prefixed``: those routes in an ``APIRouter`` included with ``prefix="/hooks"``;
* ``quiet``: ``WebhookMiddleware`` of a receiver built with ``success_body=False``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from service_webhooks import Event, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookMiddleware, webhook_routes

CALLS = Path(os.environ["SW_CALLS"])

receiver = WebhookReceiver(secrets=os.environ["SW_SECRET"], store="memory")


@receiver.on("note.created")
def note_created(event: Event[Any]) -> None:
    with CALLS.open("a") as calls:
        calls.write(f"{event.data.id}\n")


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("home")


inner = Starlette(routes=[Route("/", home)])
middleware = WebhookMiddleware(inner, receiver=receiver, path="/webhooks")
mounted = Starlette(routes=[Mount("/api", app=middleware), Route("/", home)])
routes = Starlette(routes=[*webhook_routes(receiver, "/webhooks"), Route("/", home)])
_router = APIRouter()
_router.routes.extend(webhook_routes(receiver, "/webhooks"))
fastapi_prefixed = FastAPI()
fastapi_prefixed.include_router(_router, prefix="/hooks")

quiet_receiver = WebhookReceiver(
    secrets=os.environ["SW_SECRET"], store="memory", success_body=False
)
quiet_receiver.on("note.created", note_created)
quiet = WebhookMiddleware(inner, receiver=quiet_receiver, path="/webhooks")
