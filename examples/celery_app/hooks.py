"""Webhooks whose handler takes longer than the service's 10 s deadline, via Celery.

The web process verifies, deduplicates (a shared Redis store) and enqueues; a Celery
worker runs the slow handler. Run it (see README.md)::

    celery -A hooks:celery_app worker --pool=solo --loglevel=info      # the worker
    uvicorn hooks:web --port 8000 --workers 2               # the receiver
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from celery import Celery

from service_webhooks import Event, NoteCreated, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp
from service_webhooks.handoff import CeleryHandoff
from service_webhooks.stores import RedisStore

REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# one secret, or several separated by spaces, newest first (a rotation), as the
# service-webhooks command reads this variable
SECRETS = os.environ.get(
    "SERVICE_WEBHOOKS_SECRET", "whsec-development-only-0123456789abcdef0123"
).split()
WORK_SECONDS = float(os.environ.get("EXAMPLE_WORK_SECONDS", "30"))

log = logging.getLogger("hooks")

# Both processes import this module: the web process to enqueue, the worker to run.
celery_app = Celery("hooks", broker=REDIS)
# a broker that accepts connections but never answers must not hang the request
celery_app.conf.broker_transport_options = {"socket_timeout": 1, "socket_connect_timeout": 1}
store = RedisStore.from_url(REDIS, prefix="example:idempotency:")
handoff = CeleryHandoff(  # store=: the worker dedups too
    celery_app,
    store=store,
    # the delivery is answered once queued: a failure in the worker is retried by Celery
    task_options={"autoretry_for": (Exception,), "max_retries": 5, "retry_backoff": True},
)


@handoff.on("note.created", version=1)
def index_note(event: Event[NoteCreated]) -> None:
    """Runs in the Celery worker, with the same Event the receiver built."""
    log.info("indexing note %s by %s ...", event.data.id, event.data.author)
    time.sleep(WORK_SECONDS)  # stands for slow work: far beyond the 10 s deadline
    log.info("indexed note %s", event.data.id)


@handoff.on_any
def log_other(event: Event[Any]) -> None:
    log.info("received %s v%d", event.name, event.version)


receiver = WebhookReceiver(secrets=SECRETS, store=store)
handoff.attach(receiver)  # the receiver's only handler: enqueue, then answer 200
web = WebhookApp(receiver)
