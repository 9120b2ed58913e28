"""FastAPI applications composed as users compose them, with the webhook mount inside
their middleware stack, for the composition tests under a real uvicorn (not a test
module).

Configured by environment: ``SW_SECRET``, ``SW_STORE`` (a SQLite file shared with the
test process, so a test can hold a claim) and ``SW_BROKEN_STORE`` (a SQLite path in a
missing directory: that store is unreachable). Each app answers deliveries on
``/webhooks`` and, through the unreachable store, on ``/broken``:

* ``routes``: ``webhook_routes`` in the app's route list;
* ``middleware``: ``app.add_middleware(WebhookMiddleware, ...)``, added first, so the
  user's middleware wraps it;
* ``mounted``: a sub-application holding the routes, ``app.mount("/sub", ...)``:
  its URLs are ``/sub/webhooks`` and ``/sub/broken``.

Each is wrapped in GZip, CORS, TrustedHost (``127.0.0.1``), a ``BaseHTTPMiddleware``
that adds ``x-stack: seen`` and an ``@app.middleware("http")`` that turns exceptions
into a 500 of its own. The redirect hazards of the quick start:

* ``https_redirect``: the routes under ``HTTPSRedirectMiddleware``;
* ``https_redirect_wrapped``: that app wrapped in ``WebhookMiddleware``;
* ``mount_at_path``: ``app.mount("/webhooks", WebhookApp(receiver))``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.middleware.httpsredirect import HTTPSRedirectMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from service_webhooks import Event, SQLiteStore, Unprocessable, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp, WebhookMiddleware, webhook_routes

SECRET = os.environ["SW_SECRET"]


def _receiver(store: str) -> WebhookReceiver:
    receiver = WebhookReceiver(secrets=SECRET, store=SQLiteStore(store), inbox=False)

    @receiver.on("note.created")
    async def note_created(event: Event[Any]) -> None:
        pass

    @receiver.on("test.raise")
    async def raises(event: Event[Any]) -> None:
        raise RuntimeError("the database is down")

    @receiver.on("test.refuse")
    async def refuses(event: Event[Any]) -> None:
        raise Unprocessable("this event can never be processed", status=422)

    return receiver


receiver = _receiver(os.environ["SW_STORE"])
broken = _receiver(os.environ["SW_BROKEN_STORE"])


class Stamp(BaseHTTPMiddleware):
    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        response.headers["x-stack"] = "seen"
        return response


def _stacked(app: FastAPI) -> FastAPI:
    """``app`` inside the user's middleware (the last one added is the outermost)."""

    @app.middleware("http")
    async def errors_as_json(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        try:
            return await call_next(request)
        except Exception:
            return JSONResponse({"error": "caught by the app"}, status_code=500)

    app.add_middleware(Stamp)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1"])
    app.add_middleware(CORSMiddleware, allow_origins=["https://app.example"], allow_methods=["*"])
    app.add_middleware(GZipMiddleware, minimum_size=1)
    return app


def _with_routes(app: FastAPI) -> FastAPI:
    app.router.routes.extend(webhook_routes(receiver, "/webhooks"))
    app.router.routes.extend(webhook_routes(broken, "/broken"))
    return app


routes = _stacked(_with_routes(FastAPI()))

middleware = FastAPI()
middleware.add_middleware(WebhookMiddleware, receiver=receiver, path="/webhooks")
middleware.add_middleware(WebhookMiddleware, receiver=broken, path="/broken")
_stacked(middleware)

mounted = FastAPI()
mounted.mount("/sub", _with_routes(FastAPI()))
_stacked(mounted)

https_redirect = _with_routes(FastAPI())
https_redirect.add_middleware(HTTPSRedirectMiddleware)
https_redirect_wrapped = WebhookMiddleware(https_redirect, receiver=receiver, path="/webhooks")

mount_at_path = FastAPI()
mount_at_path.mount("/webhooks", WebhookApp(receiver))
