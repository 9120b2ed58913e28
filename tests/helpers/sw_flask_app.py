"""The Flask app the adapter tests drive, in-process and under gunicorn.

``create_app()`` reads ``SW_TEST_STORE`` (a SQLite file shared with the test process, so
a test can hold a claim) and ``SW_TEST_BROKEN_STORE`` (a SQLite path in a missing
directory: that store is unreachable). Gunicorn runs it as ``webhook_app:create_app()``.
"""

from __future__ import annotations

import os

from flask import Flask, Response, current_app, g, request

from service_webhooks import Event, SQLiteStore, Unprocessable, WebhookReceiver
from service_webhooks.adapters.flask import ServiceWebhooks, webhook_blueprint

SECRET = "whsec-flask-0123456789abcdef0123456789abcdef"

webhooks = ServiceWebhooks()
seen: list[tuple[str, str, str]] = []  # (event name, app name, g.request_marker)


@webhooks.on("note.created")
def note_created(event: Event[object]) -> None:
    seen.append((event.name, current_app.name, g.get("marker", "")))


@webhooks.on("test.raise")
def raises(event: Event[object]) -> None:
    raise RuntimeError("the database is down")


@webhooks.on("test.refuse")
def refuses(event: Event[object]) -> None:
    raise Unprocessable("this event can never be processed", status=422)


def create_app(store: str | None = None, broken: str | None = None) -> Flask:
    app = Flask("webhook_app")
    app.config["SERVICE_WEBHOOKS_SECRETS"] = SECRET
    app.config["SERVICE_WEBHOOKS_STORE"] = "sqlite:" + (store or os.environ["SW_TEST_STORE"])
    app.config["SERVICE_WEBHOOKS_URL"] = "/webhooks"
    app.config["SERVICE_WEBHOOKS_SUCCESS_BODY"] = os.environ.get("SW_TEST_SUCCESS_BODY") != "0"
    webhooks.init_app(app)

    broken_receiver = WebhookReceiver(
        SECRET, store=SQLiteStore(broken or os.environ["SW_TEST_BROKEN_STORE"])
    )
    broken_receiver.on("note.created", note_created)
    app.register_blueprint(webhook_blueprint(broken_receiver, url="/broken", name="broken"))

    @app.before_request
    def mark() -> None:
        g.marker = "set-by-before-request"

    @app.before_request
    def read_body_first() -> None:  # an app hook reading the body before the view
        if request.headers.get("X-Test-Read-Body") == "before":
            g.body = request.get_data()

    @app.after_request
    def read_body_after(response: Response) -> Response:  # and one reading it after
        if request.headers.get("X-Test-Read-Body") == "after":
            response.headers["X-Test-Body-Size"] = str(len(request.get_data()))
        return response

    @app.get("/bare")
    def bare() -> str:
        return "ok"

    return app
