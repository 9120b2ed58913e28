"""An ASGI entry for Django projects that answers deliveries before Django reads the body.

Django's own ASGI handler reads a request's whole body (spooling it to a temporary
file) before any view runs, so under it a 64 MiB body is read in full before the 413,
a client that announces an oversized ``Content-Length`` waits for an answer until it
has sent everything, and ``Expect: 100-continue`` is always answered ``100``.
:func:`webhook_asgi` puts the ASGI adapter's
:class:`~service_webhooks.adapters.asgi.WebhookMiddleware` in front of Django: the
delivery URL (both spellings, below ``root_path``) goes straight to the receiver,
which answers 405 and an announced 413 before reading, and reads at most
``max_body_size + 1`` bytes of any body; every other request goes to Django.

``asgi.py``::

    import os

    from django.core.asgi import get_asgi_application

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "myproject.settings")
    django_application = get_asgi_application()  # sets Django up first

    from service_webhooks.adapters.django.asgi import webhook_asgi

    application = webhook_asgi(django_application, path="/webhooks")

Database connections: around each delivery the entry sends Django's
``request_started`` and ``request_finished`` signals in Django's thread-sensitive
executor, as Django's handler does, so ``CONN_MAX_AGE`` and broken connections are
handled as for any request. The store's calls (:class:`~.store.DjangoStore`'s async
twins) run in that executor too; a ``TRANSACTIONAL`` receiver runs its whole pipeline
there. Django's middleware does not run for deliveries (they need none: no session,
no CSRF, no user).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.handlers.asgi import ASGIHandler

from service_webhooks import WebhookReceiver
from service_webhooks.adapters.asgi import ASGIApp, Receive, Scope, Send, WebhookMiddleware

from .conf import receiver as project_receiver

__all__ = ["webhook_asgi", "with_request_signals"]


def webhook_asgi(
    application: Any = None,
    *,
    path: str = "/webhooks",
    receiver: WebhookReceiver | None = None,
) -> ASGIApp:
    """The Django ASGI ``application`` with deliveries on ``path`` answered first.

    Args:
        application: The project's ASGI application (``get_asgi_application()``,
            called here when omitted: Django must be configured).
        path: The delivery URL below the mount point, answered with and without a
            trailing slash (default ``/webhooks``). Keep or drop the same URL in
            ``urls.py``: the entry answers it before Django's URL resolver runs.
        receiver: The receiver; default the project's
            (:data:`~service_webhooks.adapters.django.receiver`, built from
            ``settings.SERVICE_WEBHOOKS``, handlers from each app's ``webhooks.py``).

    Returns:
        An ASGI application to serve (uvicorn, daphne, hypercorn).

    Raises:
        ValueError: ``path`` does not start with ``/``.
    """
    if application is None:
        from django.core.asgi import get_asgi_application

        application = get_asgi_application()
    target = project_receiver if receiver is None else receiver
    middleware = WebhookMiddleware(application, receiver=target, path=path)
    middleware.webhooks = with_request_signals(middleware.webhooks)  # type: ignore[assignment]
    return middleware


def with_request_signals(application: ASGIApp) -> ASGIApp:
    """``application`` with each HTTP request run as Django's ASGI handler runs one.

    Each request gets a thread of its own for Django's thread-sensitive calls (the ORM
    through ``sync_to_async``, :class:`~.inbox.DjangoInbox`'s async twins), between
    Django's ``request_started`` and ``request_finished`` signals, so the database
    connections it opens are closed or reused (``CONN_MAX_AGE``) when it ends. Without
    it, an ASGI app outside Django (the dashboard beside a project) keeps one
    connection for the life of the process, dead after a database restart. Other
    scopes (lifespan) pass through.
    """

    async def request(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await application(scope, receive, send)
        async with ThreadSensitiveContext():
            await _signal(signals.request_started, scope=scope)
            try:
                await application(scope, receive, send)
            finally:
                await _signal(signals.request_finished)

    return request


async def _signal(signal: Any, **kwargs: Any) -> None:
    """Send a request signal where Django's handler sends it (closes stale connections)."""
    await sync_to_async(signal.send, thread_sensitive=True)(sender=ASGIHandler, **kwargs)
