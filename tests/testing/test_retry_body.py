"""A retry of one body, rerun-safe: ``deliver_webhook.body(...)`` is the body a call would
send (fresh per call), so a test that posts it twice sees ``processed`` then
``duplicate`` however often it runs against a receiver that outlives it (an app's,
made at import time, or a persistent store)."""

from __future__ import annotations

from typing import Any

import pytest

from service_webhooks import WebhookReceiver
from service_webhooks.testing import AsyncDeliverer, Deliverer, Signer, envelope

SECRET = "whsec-retry-0123456789abcdef0123456789abcdef"
NOTE = {"id": "n-1", "author": "ana@example.com", "text": "hi"}
APP_RECEIVER = WebhookReceiver(secrets=SECRET, store="memory")  # an app's: one per session
APP_RECEIVER.on("note.created", lambda event: None)


@pytest.fixture
def webhook_secret() -> str:
    return SECRET


def app_client() -> Any:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from service_webhooks.adapters.asgi import webhook_routes  # type: ignore[import-not-found,unused-ignore]

    return TestClient(Starlette(routes=webhook_routes(APP_RECEIVER, "/webhooks")))


@pytest.mark.parametrize("run", [1, 2])  # the same test twice (a rerun, another test)
def test_a_retry_is_processed_then_duplicate_in_every_run(
    run: int, deliver_webhook: Deliverer
) -> None:
    """Before, the page left the body to ``envelope()`` or ``webhook_signer.delivery()``:
    the same bytes in each run, so the second run's first post was a ``duplicate``."""
    client = app_client()
    body = deliver_webhook.body("note.created", NOTE)
    reasons = [deliver_webhook.post(client, "/webhooks", body).json()["reason"] for _ in "12"]
    assert reasons == ["processed", "duplicate"]


def test_the_body_is_a_calls_body(deliver_webhook: Deliverer) -> None:
    assert deliver_webhook.body("note.created", NOTE) != deliver_webhook.body("note.created", NOTE)
    fixed = deliver_webhook.body("note.created", NOTE, version=2, unique=False)
    assert fixed == envelope("note.created", NOTE, version=2)
    assert AsyncDeliverer(Signer(SECRET)).body("note.created", NOTE, unique=False) == envelope(
        "note.created", NOTE
    )
    with pytest.raises(TypeError, match="event data is not JSON-encodable"):
        deliver_webhook.body("note.created", {"at": object()})
