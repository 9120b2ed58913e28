"""The servers of the HTTP speed bench (``bench/speed_http.py``): each adapter beside the
inline endpoint a user would hand-roll in the same framework.

ASGI kinds run under uvicorn (``python bench/speed_apps.py KIND PORT``); Flask and Django
kinds are WSGI factories for gunicorn (``gunicorn "speed_apps:wsgi_app('flask-adapter')"``
with ``--chdir bench``). Every server answers ``POST /webhooks``; the receivers use the
real clock (the bench signs its bodies at the current time).

Kinds:

* ``asgi-async``: ``WebhookApp`` on a Starlette ``Route``, ``MemoryStore``, async handlers.
* ``asgi-sync``: the same with plain ``def`` handlers and default settings (they run in
  a worker thread).
* ``asgi-sqlite``: ``asgi-async`` with the default store (SQLite file in the cwd).
* ``starlette-inline``: a Starlette endpoint verifying and decoding by hand.
* ``starlette-bare``: a Starlette endpoint answering 200 without reading the body: the
  ceiling no ASGI receiver can pass on this server.
* ``flask-adapter`` / ``flask-inline``: ``webhook_blueprint`` / a hand-written view.
* ``django-adapter`` / ``django-inline``: ``webhook_view`` / a hand-written view.

Every handler, and every inline endpoint, reads the data's ``id``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sys
import time
from typing import Any

SECRET = "bench-secret-0123456789abcdef0123456789abcdef"
PATH = "/webhooks"
ASGI_KINDS = ("asgi-async", "asgi-sync", "asgi-sqlite", "starlette-inline", "starlette-bare")
WSGI_KINDS = ("flask-adapter", "flask-inline", "django-adapter", "django-inline")

_KEY = SECRET.encode()


def inline_check(body: bytes, header: str | None) -> int:
    """What a user hand-rolls (spec §5.2): parse ``Service-Signature``, HMAC, compare,
    timestamp, ``json.loads``; returns the status to answer."""
    if not header:
        return 400
    try:
        fields = dict(pair.split(":", 1) for pair in header.split(","))
        mac = hmac.new(_KEY, body, hashlib.sha256)
        mac.update(f":{fields['o']}:{fields['t']}".encode())
        if not hmac.compare_digest(mac.digest(), base64.b64decode(fields["v"])):
            return 401
        if abs(time.time() - int(fields["t"])) > 300:
            return 401
        _ = json.loads(body)["data"]["id"]  # the "handler" reads one field
    except (KeyError, ValueError, TypeError):
        return 400
    return 200


def _receiver(store: Any, asynchronous: bool) -> Any:
    from service_webhooks import WebhookReceiver

    # the row measures the store: the inbox (on by default beside SQLite) has its own bench
    receiver = WebhookReceiver(SECRET, store=store, inbox=False)
    receiver.router.declare("order.created")  # not in the spec's catalogue: no warning
    if asynchronous:

        @receiver.on("order.created")
        async def order_created(event: Any) -> None:
            _ = event.data["id"]

        @receiver.on("note.created")
        async def note_created(event: Any) -> None:
            _ = event.data.id

    else:

        @receiver.on("order.created")
        def order_created_sync(event: Any) -> None:
            _ = event.data["id"]

        @receiver.on("note.created")
        def note_created_sync(event: Any) -> None:
            _ = event.data.id

    return receiver


def asgi_app(kind: str) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    if kind == "starlette-inline":

        async def inline(request: Request) -> Response:
            body = await request.body()
            status = inline_check(body, request.headers.get("service-signature"))
            return Response(status_code=status)

        return Starlette(routes=[Route(PATH, inline, methods=["POST"])])

    if kind == "starlette-bare":

        async def bare(request: Request) -> Response:
            return Response(status_code=200)

        return Starlette(routes=[Route(PATH, bare, methods=["POST"])])

    from service_webhooks import MemoryStore
    from service_webhooks.adapters.asgi import WebhookApp

    if kind == "asgi-async":
        receiver = _receiver(MemoryStore(), asynchronous=True)
    elif kind == "asgi-sync":
        receiver = _receiver(MemoryStore(), asynchronous=False)
    elif kind == "asgi-sqlite":
        receiver = _receiver(None, asynchronous=True)  # the default store
    else:
        raise SystemExit(f"unknown ASGI kind {kind!r}")
    return Starlette(routes=[Route(PATH, WebhookApp(receiver), methods=["POST"])])


def wsgi_app(kind: str) -> Any:
    if kind.startswith("flask"):
        from flask import Flask, request

        app = Flask("bench")
        if kind == "flask-adapter":
            from service_webhooks import MemoryStore
            from service_webhooks.adapters.flask import webhook_blueprint

            app.register_blueprint(webhook_blueprint(_receiver(MemoryStore(), False)))
        else:

            @app.post(PATH)
            def inline() -> Any:
                body = request.get_data()
                status = inline_check(body, request.headers.get("Service-Signature"))
                return app.response_class(b"", status=status)

        return app

    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="bench",
        DEBUG=False,
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=["service_webhooks.adapters.django"],
        DATABASES={},
        MIDDLEWARE=[
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
        ],
        SERVICE_WEBHOOKS={"SECRETS": SECRET, "STORE": "memory"},
    )
    django.setup()
    from django.core.wsgi import get_wsgi_application
    from django.http import HttpRequest, HttpResponse
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt

    if kind == "django-adapter":
        from service_webhooks import MemoryStore
        from service_webhooks.adapters.django.views import webhook_view

        view: Any = webhook_view(_receiver(MemoryStore(), False), asynchronous=False)
    elif kind == "django-inline":

        @csrf_exempt
        def view(request: HttpRequest) -> HttpResponse:
            if request.method != "POST":
                return HttpResponse(status=405)
            status = inline_check(request.body, request.headers.get("Service-Signature"))
            return HttpResponse(status=status)

    else:
        raise SystemExit(f"unknown WSGI kind {kind!r}")
    urlpatterns.append(path(PATH.lstrip("/"), view))
    return get_wsgi_application()


urlpatterns: list[Any] = []  # Django's ROOT_URLCONF is this module; filled by wsgi_app


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(
        asgi_app(sys.argv[1]),
        host="127.0.0.1",
        port=int(sys.argv[2]),
        workers=1,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
