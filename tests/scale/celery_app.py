"""The web app and Celery worker module of the Celery hand-off test.

Environment: ``SW_CELERY_BROKER`` (a Redis URL), ``SW_CELERY_QUEUE`` (a queue name
private to the test run), ``SW_SCALE_STORE`` (the idempotency store URL, shared by the
receiver and the worker) and ``SW_SCALE_COUNT`` (``redis://…#hash``: one ``HINCRBY``
per handler start). A note whose text is ``"slow"`` keeps its handler busy 30 s.
Optional: ``SW_CELERY_LEASE`` (the worker-side lease, seconds), ``SW_CELERY_ACKS_LATE``
(any value: the task acks late) and ``SW_CELERY_VISIBILITY`` (seconds before Redis
hands an unacknowledged message to another worker).
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery

from service_webhooks import Event, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp
from service_webhooks.handoff import CeleryHandoff
from service_webhooks.stores._url import store_from_url

SECRET = "whsec-test-0123456789abcdef0123456789abcdef"
SLOW_SECONDS = 30.0

celery_app = Celery("sw_test", broker=os.environ["SW_CELERY_BROKER"])
celery_app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)
if os.environ.get("SW_CELERY_VISIBILITY"):  # a killed worker's message comes back this soon
    celery_app.conf.broker_transport_options = {
        "visibility_timeout": float(os.environ["SW_CELERY_VISIBILITY"]),
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }
store = store_from_url(os.environ["SW_SCALE_STORE"])
handoff = CeleryHandoff(
    celery_app,
    queue=os.environ["SW_CELERY_QUEUE"],
    store=store,
    lease=float(os.environ.get("SW_CELERY_LEASE", "120")),
    task_options={"acks_late": True} if os.environ.get("SW_CELERY_ACKS_LATE") else None,
)
count_url, _, count_hash = os.environ["SW_SCALE_COUNT"].partition("#")
counter = redis.Redis.from_url(count_url)


@handoff.on("note.created")
def note_created(event: Event[Any]) -> None:
    counter.hincrby(count_hash, event.data.id, 1)
    if event.data.text == "slow":
        time.sleep(SLOW_SECONDS)


receiver = WebhookReceiver(secrets=SECRET, store=store)
handoff.attach(receiver)
web = WebhookApp(receiver)
