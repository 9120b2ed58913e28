"""ASGI adapter: a mountable app and a path-scoped middleware (Starlette, FastAPI, any ASGI).

Read, call, write: the adapter hands the method, the raw header list and a body
reader to :meth:`~service_webhooks.WebhookReceiver.ahandle`, which decides everything
(405, 413, 401, ...), and writes the :class:`~service_webhooks.Outcome` it returns.

::

    receiver = WebhookReceiver(secrets=...)
    app = Starlette(routes=webhook_routes(receiver, "/webhooks"))
    fastapi_app.router.routes.extend(webhook_routes(receiver, "/webhooks"))
    # or, in front of any ASGI app:
    app = WebhookMiddleware(app, receiver=receiver, path="/webhooks")

Both spellings of the URL (``/webhooks`` and ``/webhooks/``) are answered as
deliveries: the service follows no redirect (spec §7), so a 307 to the other spelling
would fail every delivery. For the same reason use routes, not ``Mount("/webhooks")``
(Starlette answers ``POST /webhooks`` to such a mount with a 307).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from service_webhooks import Outcome, WebhookReceiver

from . import require_extra

if TYPE_CHECKING:  # Starlette is needed by webhook_routes only, imported when called
    from starlette.routing import Route

__all__ = [
    "ASGIApp",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "WebhookApp",
    "WebhookMiddleware",
    "webhook_routes",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


_NOT_ASYNCIO = (
    "service-webhooks needs an asyncio event loop (uvicorn, hypercorn's asyncio or uvloop "
    "workers, granian, daphne); this server runs another one, such as trio "
    "(hypercorn -k trio), where its thread hand-offs and store calls cannot run"
)


class WebhookApp:
    """An ASGI application that answers every HTTP request as a webhook delivery.

    Runs on an asyncio event loop (any ASGI server's default; uvloop is one). Under
    another loop, such as trio's (``hypercorn -k trio``), the lifespan startup fails
    and every delivery raises :class:`RuntimeError` saying so (the server answers 500
    and logs it): plain-function handlers, the stores' async calls and the claim's
    release after a failure need asyncio.

    Served as the application itself (``uvicorn module:app``), its lifespan shutdown
    closes what the receiver's store and inbox opened
    (:meth:`~service_webhooks.WebhookReceiver.aclose`); mounted inside another
    application, that application's lifespan does it.

    Args:
        receiver: The configured receiver.
    """

    def __init__(self, receiver: WebhookReceiver) -> None:
        if not isinstance(receiver, WebhookReceiver):
            raise TypeError("WebhookApp needs a WebhookReceiver")
        self.receiver = receiver
        self._on_asyncio = False  # an asyncio loop was seen: the check is not repeated

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if not self._on_asyncio:
                _require_asyncio()
                self._on_asyncio = True
            outcome = await self.receiver.ahandle(
                scope["method"], scope["headers"], _reader(receive)
            )
            if outcome is not None:  # None: the client went away; nothing was processed
                await _respond(send, outcome)
        elif kind == "lifespan":
            await _lifespan(receive, send, self.receiver)
        # websocket: not ours


class WebhookMiddleware:
    """Handles deliveries on one path and passes every other request to ``app``.

    The path is matched below the application's mount point (``scope["root_path"]``:
    a Starlette ``Mount`` or ``uvicorn --root-path``), with or without a trailing
    slash.

    Args:
        app: The ASGI application to wrap.
        receiver: The configured receiver.
        path: The request path deliveries arrive on, below the mount point (default
            ``/webhooks``).

    Raises:
        ValueError: ``path`` does not start with ``/``.
    """

    def __init__(self, app: ASGIApp, *, receiver: WebhookReceiver, path: str = "/webhooks") -> None:
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        self.app = app
        bare = path.rstrip("/") or "/"
        self.path = path
        self._paths = {bare, bare.rstrip("/") + "/"}
        self.webhooks = WebhookApp(receiver)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _below_root(scope) in self._paths:
            await self.webhooks(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def webhook_routes(receiver: WebhookReceiver, path: str = "/webhooks") -> list[Route]:
    """Starlette routes answering deliveries on ``path`` and ``path + "/"``.

    Every method reaches the receiver (which answers 405 itself) and neither spelling
    is redirected to the other. The path followed by more slashes (``/webhooks//``) is
    a 404, as from the Flask and Django adapters, not the 307 Starlette's
    ``redirect_slashes`` answers (spec §7: no redirect is followed); a route of the
    app that matches such a URL still wins, and ``redirect_slashes`` stays on for
    every other URL. Needs Starlette (``pip install 'service-webhooks[asgi]'``).

    Raises:
        ValueError: ``path`` does not start with ``/`` or is ``/``.
        ImportError: Starlette is not installed (the message names the extra).
    """
    require_extra("asgi", "starlette")
    from starlette.routing import Route

    if not path.startswith("/") or path.rstrip("/") == "":
        raise ValueError("path must start with '/' and name a URL below the root")
    from ._slashes import RepeatedSlashes

    app = WebhookApp(receiver)
    bare = path.rstrip("/")
    return [Route(bare, app), Route(bare + "/", app), RepeatedSlashes(bare)]


def _below_root(scope: Scope) -> str:
    """The request path below the application's mount point."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :]
    return path


def _reader(receive: Receive) -> Callable[[int], Awaitable[bytes | None]]:
    """The receiver's async body reader over ASGI ``http.request`` messages."""
    more = True

    async def read(size: int) -> bytes | None:
        nonlocal more
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            more = message.get("more_body", False)
            chunk: bytes = message.get("body", b"")
            if chunk:
                return chunk
        return b""

    return read


def _require_asyncio() -> None:
    """Raise unless an asyncio event loop runs this coroutine.

    Raises:
        RuntimeError: Another event loop (trio) runs it.
    """
    if asyncio._get_running_loop() is None:
        raise RuntimeError(_NOT_ASYNCIO)


async def _lifespan(receive: Receive, send: Send, receiver: WebhookReceiver) -> None:
    """Startup checks the event loop (it fails under another one than asyncio's, with
    the reason); shutdown closes what the receiver's store and inbox opened."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if asyncio._get_running_loop() is None:
                await send({"type": "lifespan.startup.failed", "message": _NOT_ASYNCIO})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await receiver.aclose()
            except Exception as error:  # the server logs it and still exits
                failed = f"closing the receiver failed: {type(error).__name__}: {error}"
                await send({"type": "lifespan.shutdown.failed", "message": failed})
                return
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _respond(send: Send, outcome: Outcome) -> None:
    body = outcome.body
    headers = [
        (b"content-type", outcome.content_type.encode("latin-1")),
        (b"content-length", b"%d" % len(body)),
    ]
    if outcome.headers:  # only 405 and 503 answers have any
        headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in outcome.headers]
    await send({"type": "http.response.start", "status": outcome.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
