"""A Flask app receiving the service's webhooks (docs/flask.md).

Run it::

    export SERVICE_WEBHOOKS_SECRET=...   # the endpoint's signing secret ("new old" while rotating)
    flask --app examples/flask_app.py run --port 8000

then point the service (or ``service-webhooks send``) at http://127.0.0.1:8000/webhooks.
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask, current_app

from service_webhooks import Event, NoteCreated
from service_webhooks.adapters.flask import ServiceWebhooks

webhooks = ServiceWebhooks()


@webhooks.on("note.created", version=1)
def note_created(event: Event[NoteCreated]) -> None:
    current_app.logger.info("note %s by %s", event.data.id, event.data.author)


@webhooks.on_any
def everything_else(event: Event[Any]) -> None:
    current_app.logger.info(
        "event %s v%d from %s", event.name, event.version, event.organization_id
    )


def create_app() -> Flask:
    app = Flask(__name__)
    # one secret, or several separated by spaces, newest first (a rotation), as the
    # service-webhooks command reads this variable: split, or a rotation verifies nothing
    app.config["SERVICE_WEBHOOKS_SECRETS"] = os.environ.get(
        "SERVICE_WEBHOOKS_SECRET", "whsec-development-only-0123456789abcdef0123"
    ).split()
    app.config["SERVICE_WEBHOOKS_STORE"] = os.environ.get(
        "SERVICE_WEBHOOKS_STORE", "sqlite:webhooks.sqlite3"
    )
    webhooks.init_app(app)
    return app


app = create_app()

if __name__ == "__main__":
    app.run(port=8000)
