"""ASGI adapter: a mountable app and a path-scoped middleware (Starlette, FastAPI, any ASGI).

Thin by design (STYLE.md habit 2): it reads the method, the ``Service-Signature``
header and at most ``max_body_size + 1`` bytes of body, in chunks, with or without
``Content-Length``, then writes the core's :class:`~service_webhooks._outcome.Outcome`
as the response. It never parses the signature, never touches JSON and never branches
on a status code: :class:`~service_webhooks.WebhookReceiver` decides everything.

::

    receiver = WebhookReceiver(secrets=...)
    app = Starlette(routes=[Route("/webhooks", WebhookApp(receiver))])
    fastapi_app.add_route("/webhooks", WebhookApp(receiver), methods=["POST"])
    # or, in front of any ASGI app:
    app = WebhookMiddleware(app, receiver=receiver, path="/webhooks")

Use ``Route``, not ``Mount``: a ``Mount("/webhooks", ...)`` answers ``POST /webhooks``
with a 307 redirect to ``/webhooks/``, which the service retries and never follows
(spec §7), so every delivery would fail.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from service_webhooks._outcome import Outcome
from service_webhooks._receiver import WebhookReceiver

__all__ = ["WebhookApp", "WebhookMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_SIGNATURE = WebhookReceiver.signature_header.lower().encode("latin-1")


class WebhookApp:
    """An ASGI application that answers every HTTP request as a webhook delivery.

    Args:
        receiver: The configured receiver.
    """

    def __init__(self, receiver: WebhookReceiver) -> None:
        if not isinstance(receiver, WebhookReceiver):
            raise TypeError("WebhookApp needs a WebhookReceiver")
        self.receiver = receiver

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websocket: not ours
        signature, content_length = _read_headers(scope["headers"])
        outcome = self.receiver.precheck(scope["method"], content_length)
        if outcome is None:
            body = await _read_body(receive, self.receiver.max_body_size + 1)
            if body is None:
                return  # the client went away; nothing was processed
            outcome = await self.receiver.aprocess(body, signature, method=scope["method"])
        await _respond(send, outcome)


class WebhookMiddleware:
    """Handles deliveries on one path and passes every other request to ``app``.

    Args:
        app: The ASGI application to wrap.
        receiver: The configured receiver.
        path: The exact request path deliveries arrive on (default ``/webhooks``).
    """

    def __init__(self, app: ASGIApp, *, receiver: WebhookReceiver, path: str = "/webhooks") -> None:
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        self.app = app
        self.path = path
        self.webhooks = WebhookApp(receiver)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == self.path:
            await self.webhooks(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _read_headers(headers: list[tuple[bytes, bytes]]) -> tuple[bytes | None, int | None]:
    """The signature (repeated headers joined by ',' so the core sees them all) and
    the declared length (``None`` when absent or unparsable)."""
    signatures: list[bytes] = []
    content_length: int | None = None
    for name, value in headers:
        if name == _SIGNATURE:
            signatures.append(value)
        elif name == b"content-length" and value.isdigit():
            content_length = int(value)
    return (b",".join(signatures) if signatures else None), content_length


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """Read the body in chunks, stopping once ``limit`` bytes are held; ``None`` if the
    client disconnected."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit or not message.get("more_body", False):
            break
    # one chunk is passed on as is; an oversized body is answered 413 by the core
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _lifespan(receive: Receive, send: Send) -> None:
    """Nothing to start or stop; acknowledge both so any server is happy."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _respond(send: Send, outcome: Outcome) -> None:
    body = outcome.body
    headers = [
        (b"content-type", outcome.content_type.encode("latin-1")),
        (b"content-length", str(len(body)).encode("latin-1")),
    ]
    headers.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in outcome.headers)
    await send({"type": "http.response.start", "status": outcome.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
