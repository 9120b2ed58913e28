"""A Flask app receiving the service's webhooks (docs/flask.md).

Run it from the repository root (with the ``flask`` and ``cli`` extras installed)::

    export SERVICE_WEBHOOKS_SECRET=whsec-development-only-0123456789abcdef0123
    flask --app examples/flask_app.py run --port 8000   # or: python examples/flask_app.py

(the variable: the endpoint's signing secret, ``"new old"`` while rotating; unset, the
development secret above.) Then, from another terminal, send it a signed delivery::

    service-webhooks send http://127.0.0.1:8000/webhooks \\
        --secret whsec-development-only-0123456789abcdef0123 \\
        --org o-1 --event note.created --allow-private-destinations \\
        --data '{"id": "n-1", "author": "ana@example.com", "text": "hello"}'

``send`` prints ``HTTP 200 OK: success`` and the server's log shows
``INFO in flask_app: note n-1 by ana@example.com`` then ``event note.created v1 from
o-1``. The same command again is a duplicate: answered 200, no handler runs. Processed
deliveries are kept in ``webhooks.sqlite3`` in the current directory, so a duplicate is
caught across restarts too; ``SERVICE_WEBHOOKS_STORE=memory`` keeps no file.
"""

from __future__ import annotations

import logging
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
    # Flask's logger passes only warnings until told otherwise: show the handlers' lines
    app.logger.setLevel(logging.INFO)
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
    app.run(port=int(os.environ.get("PORT", "8000")))
