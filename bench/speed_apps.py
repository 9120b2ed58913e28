"""The servers of the HTTP speed bench (``bench/speed_http.py``): each adapter beside the
inline endpoint a user would hand-roll in the same framework.

ASGI kinds run under uvicorn (``python bench/speed_apps.py KIND PORT``): with h11 on
asyncio, what ``pip install uvicorn`` gives, or with ``@std`` after the kind
(``asgi-async@std``) on httptools and uvloop, what ``pip install 'uvicorn[standard]'``
gives and production deployments run. Flask and Django
kinds are WSGI factories for gunicorn (``gunicorn "speed_apps:wsgi_app('flask-adapter')"``
with ``--chdir bench``). Every server answers ``POST /webhooks``; the receivers use the
real clock (the bench signs its bodies at the current time).

Kinds:

* ``asgi-async``: ``WebhookApp`` on a Starlette ``Route``, ``MemoryStore``, async handlers.
* ``asgi-sync``: the same with plain ``def`` handlers and default settings (they run in
  a worker thread).
* ``asgi-sqlite``: ``asgi-async`` with the default store (SQLite file in the cwd).
* ``asgi-middleware`` / ``asgi-middleware-sync``: ``asgi-async`` / ``asgi-sync`` mounted
  the other documented way, ``WebhookMiddleware`` in front of the Starlette app (which
  then never sees a delivery).
* ``starlette-inline``: a Starlette endpoint verifying and decoding by hand.
* ``starlette-inline-json``, ``flask-inline-json``, ``django-inline-json``: the inline
  endpoints answering a small JSON body as the adapters do (``{"status":200,...}``), as
  a hand-written endpoint often does (``jsonify(success=True)``); beside the empty
  answers, this shows what the body itself costs on each server.
* ``starlette-bare``: a Starlette endpoint answering 200 without reading the body: the
  ceiling no receiver behind a Starlette route can pass on this server.
* ``asgi-floor``: a raw ASGI app (no Starlette) doing only what every verifying receiver
  must: read the body, HMAC and ``compare_digest``, an untyped ``msgspec`` decode, an
  empty 200 (with ``Content-Length: 0``: one write per answer). No claim, no handler,
  no timestamp check: the ceiling for any ASGI receiver on this server, the middleware
  mount included.
* ``starlette-floor``: that raw ASGI app mounted as ``WebhookApp`` is, on a Starlette
  ``Route``: the ceiling for any receiver mounted on a route (the route mount).
* ``flask-adapter`` / ``flask-inline``: ``webhook_blueprint`` / a hand-written view.
* ``django-adapter`` / ``django-inline``: ``webhook_view`` / a hand-written view.
* ``flask-floor`` / ``django-floor``: a view of that framework doing only what
  ``asgi-floor`` does (the body read from the WSGI input as the adapters read it, HMAC
  and ``compare_digest``, an untyped ``msgspec`` decode, an empty 200): the ceiling for
  any receiver mounted as a view of that framework on gunicorn.
* ``asgi-middleware-empty``, ``flask-adapter-empty``, ``django-adapter-empty``: those
  adapters with ``success_body=False``: a 200 carries no body, as the inline endpoints'
  does.

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

import msgspec

SECRET = "bench-secret-0123456789abcdef0123456789abcdef"
PATH = "/webhooks"
ASGI_KINDS = (
    "asgi-async",
    "asgi-sync",
    "asgi-middleware",
    "asgi-middleware-sync",
    "asgi-middleware-empty",
    "asgi-sqlite",
    "starlette-inline",
    "starlette-inline-json",
    "starlette-bare",
    "asgi-floor",
    "starlette-floor",
)
WSGI_KINDS = (
    "flask-adapter",
    "flask-adapter-empty",
    "flask-inline",
    "flask-inline-json",
    "flask-floor",
    "django-adapter",
    "django-adapter-empty",
    "django-inline",
    "django-inline-json",
    "django-floor",
)

_KEY = SECRET.encode()
_JSON = "application/json"


def inline_answer(status: int) -> bytes:
    """The JSON body of the ``-json`` inline kinds: the same bytes the adapters send."""
    return b'{"status":%d,"reason":"%s"}' % (status, b"processed" if status == 200 else b"refused")


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


def _receiver(store: Any, asynchronous: bool, success_body: bool = True) -> Any:
    from service_webhooks import WebhookReceiver

    # the row measures the store: the inbox (on by default beside SQLite) has its own bench
    receiver = WebhookReceiver(SECRET, store=store, inbox=False, success_body=success_body)
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


def floor_status(body: bytes, header: str) -> int:
    """The floor's check: HMAC, ``compare_digest``, an untyped ``msgspec`` decode."""
    o, t, v = (pair[2:] for pair in header.split(","))
    mac = hmac.new(_KEY, body, hashlib.sha256)
    mac.update(f":{o}:{t}".encode())
    ok = hmac.compare_digest(mac.digest(), base64.b64decode(v))
    return 200 if ok and msgspec.json.decode(body)["data"]["id"] else 401


def wsgi_floor_body(environ: Any) -> bytes:
    """The body as the WSGI adapters read it: ``Content-Length`` bytes of the input."""
    data: bytes = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    return data


async def asgi_floor(scope: Any, receive: Any, send: Any) -> None:
    """The least an ASGI receiver does per delivery (see ``asgi-floor`` above)."""
    chunks = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    header = next(v for k, v in scope["headers"] if k == b"service-signature").decode()
    status = floor_status(body, header)
    # a Content-Length, as every other app here sends: without one the server answers
    # chunked, one more write (system call) per answer
    headers = [(b"content-length", b"0")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def asgi_app(kind: str) -> Any:
    if kind == "asgi-floor":
        return asgi_floor
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    if kind.startswith("starlette-inline"):
        answers_json = kind.endswith("-json")

        async def inline(request: Request) -> Response:
            body = await request.body()
            status = inline_check(body, request.headers.get("service-signature"))
            if answers_json:
                return Response(inline_answer(status), status, media_type=_JSON)
            return Response(status_code=status)

        return Starlette(routes=[Route(PATH, inline, methods=["POST"])])

    if kind == "starlette-floor":

        class Endpoint:  # an instance, not a function: Route mounts it as an ASGI app
            async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
                await asgi_floor(scope, receive, send)

        return Starlette(routes=[Route(PATH, Endpoint(), methods=["POST"])])

    if kind == "starlette-bare":

        async def bare(request: Request) -> Response:
            return Response(status_code=200)

        return Starlette(routes=[Route(PATH, bare, methods=["POST"])])

    from service_webhooks import MemoryStore
    from service_webhooks.adapters.asgi import WebhookApp, WebhookMiddleware

    if kind.startswith("asgi-middleware"):

        async def other(request: Request) -> Response:
            return Response(status_code=200)

        receiver = _receiver(
            MemoryStore(),
            asynchronous=not kind.endswith("-sync"),
            success_body=not kind.endswith("-empty"),
        )
        application = Starlette(routes=[Route("/other", other)])  # the rest of a user's app
        return WebhookMiddleware(application, receiver=receiver, path=PATH)
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
        if kind.startswith("flask-adapter"):
            from service_webhooks import MemoryStore
            from service_webhooks.adapters.flask import webhook_blueprint

            receiver = _receiver(MemoryStore(), False, success_body=kind == "flask-adapter")
            app.register_blueprint(webhook_blueprint(receiver))
        elif kind == "flask-floor":

            @app.post(PATH)
            def floor() -> Any:
                environ = request.environ
                body = wsgi_floor_body(environ)
                status = floor_status(body, environ["HTTP_SERVICE_SIGNATURE"])
                return app.response_class(b"", status=status)

        else:
            answers_json = kind.endswith("-json")

            @app.post(PATH)
            def inline() -> Any:
                body = request.get_data()
                status = inline_check(body, request.headers.get("Service-Signature"))
                if answers_json:
                    return app.response_class(inline_answer(status), status, content_type=_JSON)
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

    if kind.startswith("django-adapter"):
        from service_webhooks import MemoryStore
        from service_webhooks.adapters.django.views import webhook_view

        receiver = _receiver(MemoryStore(), False, success_body=kind == "django-adapter")
        view: Any = webhook_view(receiver, asynchronous=False)
    elif kind.startswith("django-inline"):
        answers_json = kind.endswith("-json")

        @csrf_exempt
        def view(request: HttpRequest) -> HttpResponse:
            if request.method != "POST":
                return HttpResponse(status=405)
            status = inline_check(request.body, request.headers.get("Service-Signature"))
            if answers_json:
                return HttpResponse(inline_answer(status), status=status, content_type=_JSON)
            return HttpResponse(status=status)

    elif kind == "django-floor":

        @csrf_exempt
        def view(request: HttpRequest) -> HttpResponse:
            meta = request.META
            body = wsgi_floor_body(meta)
            return HttpResponse(status=floor_status(body, meta["HTTP_SERVICE_SIGNATURE"]))

    else:
        raise SystemExit(f"unknown WSGI kind {kind!r}")
    urlpatterns.append(path(PATH.lstrip("/"), view))
    return get_wsgi_application()


urlpatterns: list[Any] = []  # Django's ROOT_URLCONF is this module; filled by wsgi_app


if __name__ == "__main__":
    import uvicorn

    kind, _, stack = sys.argv[1].partition("@")
    uvicorn.run(
        asgi_app(kind),
        host="127.0.0.1",
        port=int(sys.argv[2]),
        workers=1,
        log_level="warning",
        access_log=False,
        lifespan="off",
        loop="uvloop" if stack == "std" else "asyncio",
        http="httptools" if stack == "std" else "h11",
    )
