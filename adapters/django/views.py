"""The delivery view: reads at most ``max_body_size + 1`` raw bytes, answers the core's
:class:`~service_webhooks._outcome.Outcome` (spec §6.1, §7).

CSRF-exempt (deliveries are authenticated by their signature) and outside
``ATOMIC_REQUESTS`` (a handler failure must not commit half its work). The body is
read from the request stream before Django parses anything; a chunked body under a
WSGI server that terminates the input (gunicorn) is read from ``wsgi.input`` itself,
since Django reads no body without ``Content-Length`` there.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse

from service_webhooks._outcome import Outcome
from service_webhooks._receiver import WebhookReceiver

from .._stream import read_capped
from .conf import get_config
from .conf import receiver as project_receiver

__all__ = ["webhook_view"]

View = Callable[[HttpRequest], Any]
"""A Django view: ``async def`` or plain, returning an ``HttpResponse``."""


def webhook_view(
    receiver: WebhookReceiver | None = None, *, asynchronous: bool | None = None
) -> View:
    """A view answering deliveries with ``receiver`` (default: the project's receiver).

    Args:
        receiver: The receiver; default :data:`~service_webhooks.adapters.django.receiver`.
        asynchronous: An ``async def`` view (for ASGI) or a plain one (for WSGI).
            Default: ``SERVICE_WEBHOOKS["ASYNC_VIEW"]``, else async exactly when this
            process loaded Django's ASGI handler and not its WSGI handler.
    """
    target = project_receiver if receiver is None else receiver
    if asynchronous is None:
        asynchronous = get_config().get("ASYNC_VIEW")
    if asynchronous is None:
        modules = sys.modules
        asynchronous = "django.core.handlers.asgi" in modules and (
            "django.core.handlers.wsgi" not in modules
        )

    def deliver(request: HttpRequest) -> HttpResponse:
        outcome = target.precheck(request.method or "", _length(request))
        if outcome is None:
            body = read_capped(_stream(request), target.max_body_size + 1)
            outcome = target.process(
                body, _signature(request), method=request.method or "", **_described(request)
            )
        return _respond(outcome)

    async def adeliver(request: HttpRequest) -> HttpResponse:
        outcome = target.precheck(request.method or "", _length(request))
        if outcome is None:
            body = read_capped(_stream(request), target.max_body_size + 1)  # spooled by Django
            signature = _signature(request)
            outcome = await target.aprocess(
                body, signature, method=request.method or "", **_described(request)
            )
        return _respond(outcome)

    view: Any = transaction.non_atomic_requests(adeliver if asynchronous else deliver)
    view.csrf_exempt = True  # what @csrf_exempt sets; async-safe on Django 4.2 too
    return view  # type: ignore[no-any-return]


def _length(request: HttpRequest) -> int | None:
    value = request.META.get("CONTENT_LENGTH", "")
    return int(value) if isinstance(value, str) and value.isdigit() else None


_SIGNATURE_META = "HTTP_" + WebhookReceiver.signature_header.upper().replace("-", "_")


def _described(request: HttpRequest) -> dict[str, str | None]:
    """Content-Type and User-Agent, kept in the receiver's inbox."""
    meta = request.META
    return {"content_type": meta.get("CONTENT_TYPE"), "user_agent": meta.get("HTTP_USER_AGENT")}


def _signature(request: HttpRequest) -> str | None:
    value = request.META.get(_SIGNATURE_META)  # servers join repeated headers with ","
    return value if isinstance(value, str) else None


def _stream(request: HttpRequest) -> IO[bytes] | HttpRequest:
    meta = request.META
    if _length(request) is None and meta.get("wsgi.input_terminated"):
        stream: IO[bytes] = meta["wsgi.input"]  # chunked: the server ends the stream
        return stream
    return request  # bounded by Content-Length (WSGI) or already spooled (ASGI)


def _respond(outcome: Outcome) -> HttpResponse:
    response = HttpResponse(outcome.body, status=outcome.status, content_type=outcome.content_type)
    for name, value in outcome.headers:
        response[name] = value
    return response
