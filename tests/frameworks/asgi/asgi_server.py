"""The ASGI app the end-to-end tests run under a real uvicorn (not a test module).

Configured by environment: SW_SECRET, SW_STORE (SQLite path), SW_CALLS (file each
handler run appends a line to), SW_STORE_DOWN (while this file exists the store fails).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from service_webhooks import ClaimState, Event, SQLiteStore, Unprocessable, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookMiddleware

CALLS = Path(os.environ["SW_CALLS"])
STORE_DOWN = Path(os.environ["SW_STORE_DOWN"])


class SwitchableStore(SQLiteStore):
    """A SQLite store that fails like an unreachable server while STORE_DOWN exists."""

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        if STORE_DOWN.exists():
            raise ConnectionError("store unreachable")
        return super().claim(key, token, lease)


receiver = WebhookReceiver(
    secrets=os.environ["SW_SECRET"], store=SwitchableStore(os.environ["SW_STORE"])
)


@receiver.on("note.created")
async def note_created(event: Event[Any]) -> None:
    if event.data.text == "slow":
        await asyncio.sleep(0.5)
    if event.data.text == "fail":
        raise RuntimeError("handler failed")
    if event.data.text == "refuse":
        raise Unprocessable("cannot process")
    with CALLS.open("a") as calls:
        calls.write(f"{event.data.id}\n")


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("home")


app = WebhookMiddleware(Starlette(routes=[Route("/", home)]), receiver=receiver, path="/webhooks")
