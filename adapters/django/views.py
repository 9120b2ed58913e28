"""The delivery view: read, call :meth:`~service_webhooks.WebhookReceiver.handle`, write.

CSRF-exempt (deliveries are authenticated by their signature) and outside
``ATOMIC_REQUESTS`` on every database (a handler failure must not commit half its work,
and Django refuses an ``async def`` view under ``ATOMIC_REQUESTS``). The body is
read from the request stream before Django parses anything; a chunked body under a
WSGI server that terminates the input (gunicorn) is read from ``wsgi.input`` itself,
since Django reads no body without ``Content-Length`` there.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, cast

from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse

from service_webhooks import Outcome, WebhookReceiver

from .._wsgi import body_reader, environ_headers
from .conf import flag_setting, get_config
from .conf import receiver as project_receiver

__all__ = ["outside_atomic_requests", "webhook_view"]

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
        asynchronous = flag_setting(get_config(), "ASYNC_VIEW", none=True)
    if asynchronous is None:
        modules = sys.modules
        asynchronous = "django.core.handlers.asgi" in modules and (
            "django.core.handlers.wsgi" not in modules
        )

    def deliver(request: HttpRequest) -> HttpResponse:
        method, headers = _request_line(request)
        read = body_reader(_stream(request).read)  # a broken chunked body: 4xx, not 500
        return _respond(target.handle(method, headers, read))

    async def adeliver(request: HttpRequest) -> HttpResponse:
        method, headers = _request_line(request)
        read = _stream(request).read  # Django's ASGI handler has spooled the body already
        outcome = await _finished(target.ahandle(method, headers, _async(read)))
        return _respond(cast(Outcome, outcome))  # None only when a read says disconnected

    view: Any = outside_atomic_requests(adeliver if asynchronous else deliver)
    view.csrf_exempt = True  # what @csrf_exempt sets; async-safe on Django 4.2 too
    view.service_webhooks_view = True  # found by the URL check (service_webhooks.W004)
    return view  # type: ignore[no-any-return]


def outside_atomic_requests(view: Any) -> Any:
    """``view`` exempt from ``ATOMIC_REQUESTS`` on every database of ``DATABASES``.

    ``transaction.non_atomic_requests`` alone exempts the ``default`` database only:
    with ``ATOMIC_REQUESTS`` on another one (where a router keeps the app's records),
    Django would answer every delivery to an ``async def`` view with a 500 ("You cannot
    use ATOMIC_REQUESTS with async views") and run a plain one inside a transaction.
    """
    for alias in connections:
        view = transaction.non_atomic_requests(using=alias)(view)
    return view


def _request_line(request: HttpRequest) -> tuple[str, Any]:
    """The method exactly as received, and one ``(name, value)`` pair per header line.

    Django upper-cases ``request.method``, but methods are case-sensitive (RFC 9110
    §9.1), so ``post`` must reach the receiver as is. Under ASGI the headers are the
    server's own list (Django joins repeated lines with ``","``, which could make two
    partial ``Service-Signature`` lines read as one valid value); under WSGI the few the
    receiver reads, straight from ``META`` (the server has joined them already).
    """
    scope = getattr(request, "scope", None)  # ASGI
    if scope is not None:
        return str(scope.get("method", "")), scope.get("headers", [])
    meta = request.META
    return str(meta.get("REQUEST_METHOD", request.method or "")), environ_headers(meta)


def _stream(request: HttpRequest) -> Any:
    meta = request.META
    if not meta.get("CONTENT_LENGTH") and meta.get("wsgi.input_terminated"):
        return meta["wsgi.input"]  # chunked: the server ends the stream
    return request  # bounded by Content-Length (WSGI) or already spooled (ASGI)


async def _finished(delivery: Coroutine[Any, Any, Outcome | None]) -> Outcome | None:
    """``await delivery``, carried to its end through one cancellation of the view.

    Django's ASGI handler (Django 5.0 on) cancels the view when the client disconnects,
    as the service does after waiting 10 s (spec §3.3). Cancelled there, a delivery
    whose plain handler had already run in its thread would release its claim with no
    record of that run, and the service's retry would run the handler again (every
    retry, for a handler slower than 10 s). Like every other mount (no server cancels
    an ASGI app when its client goes), the view lets the delivery finish and record
    its outcome, then lets the cancellation through; Django waits for the view.
    A second cancellation (the server shutting down) cancels the delivery itself.

    Raises:
        asyncio.CancelledError: The view was cancelled (after the delivery finished).
    """
    task = asyncio.ensure_future(delivery)  # the request's context: its thread, its ORM
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task  # cancelled again meanwhile: the task is cancelled with the view
        raise


def _async(read: Callable[[int], bytes]) -> Callable[[int], Any]:
    async def aread(size: int) -> bytes:
        return read(size)  # an in-memory or spooled file: no blocking worth a thread

    return aread


def _respond(outcome: Outcome) -> HttpResponse:
    body = outcome.body
    response = HttpResponse(body, status=outcome.status, content_type=outcome.content_type)
    # framed by its length even without CommonMiddleware: a server would otherwise send
    # it chunked (a third socket write per answer, the terminating chunk)
    response["Content-Length"] = str(len(body))
    for name, value in outcome.headers:
        response[name] = value
    return response
