"""pytest plugin (entry point ``service_webhooks``, active once the package is installed).

Fixtures (each function-scoped; override ``webhook_secret`` or
``webhook_organization_id`` in your ``conftest.py`` to match your app's settings):

* ``webhook_secret``: a fresh random secret (``str``, 43 URL-safe characters); an
  override may return any form ``WebhookReceiver(secrets=...)`` takes (a rotation list,
  an ``{organization ID: secret(s)}`` mapping...): deliveries are signed with its newest
  secret for ``webhook_organization_id``.
* ``webhook_organization_id``: ``"o-TEST-na1"``, the ``o`` deliveries are signed as.
* ``webhook_signer``: a :class:`~service_webhooks.testing.signer.Signer` for those two;
  ``webhook_signer.delivery(name, data)`` returns ``(body, headers)``.
* ``deliver_webhook``: a :class:`~service_webhooks.testing.clients.Deliverer`;
  ``deliver_webhook(client, "/webhooks", "note.created", data)`` signs the envelope and
  POSTs it with a Starlette/FastAPI, httpx, Flask or Django test client, returning the
  client's response. ``deliver_webhook.post(client, url, body)`` sends raw bytes.
* ``adeliver_webhook``: the same for ``httpx.AsyncClient`` / ``django.test.AsyncClient``
  (``await adeliver_webhook(client, ...)``).
* ``webhook_receiver``: a :class:`~service_webhooks.WebhookReceiver` accepting
  ``webhook_secret``, with an in-memory idempotency store.

::

    @pytest.fixture
    def webhook_secret():
        return "whsec-test"            # what your test settings configure

    def test_note_created(client, deliver_webhook):
        response = deliver_webhook(client, "/webhooks", "note.created",
                                   {"id": "n-1", "author": "ana@example.com", "text": "hi"})
        assert response.status_code == 200
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

# pytest loads this plugin before coverage measurement starts: everything else is
# imported inside the fixtures, so the library's modules are measured like any other.
if TYPE_CHECKING:
    from .._credentials import SecretsConfig
    from .._receiver import WebhookReceiver
    from .clients import AsyncDeliverer, Deliverer
    from .signer import Signer


@pytest.fixture
def webhook_secret() -> str:
    """A fresh random signing secret; override it to return what your app's test
    settings configure (a secret, a rotation list, a mapping, as ``secrets=`` takes)."""
    from .._credentials import generate_secret

    return generate_secret()


@pytest.fixture
def webhook_organization_id() -> str:
    """The organization ID (``o``) deliveries are signed as."""
    from .signer import DEFAULT_ORGANIZATION_ID

    return DEFAULT_ORGANIZATION_ID


@pytest.fixture
def webhook_signer(webhook_secret: SecretsConfig, webhook_organization_id: str) -> Signer:
    """A signer for ``webhook_secret`` (its newest secret for the organization) and
    ``webhook_organization_id``."""
    from .signer import Signer

    return Signer(webhook_secret, organization_id=webhook_organization_id)


@pytest.fixture
def deliver_webhook(webhook_signer: Signer) -> Deliverer:
    """``deliver_webhook(client, url, event_name, data, **options) -> response``."""
    from .clients import Deliverer

    return Deliverer(webhook_signer)


@pytest.fixture
def adeliver_webhook(webhook_signer: Signer) -> AsyncDeliverer:
    """``await adeliver_webhook(client, url, event_name, data, **options) -> response``."""
    from .clients import AsyncDeliverer

    return AsyncDeliverer(webhook_signer)


@pytest.fixture
def webhook_receiver(webhook_secret: SecretsConfig) -> WebhookReceiver:
    """A receiver for ``webhook_secret`` with an in-memory store (register handlers on it)."""
    from .._receiver import WebhookReceiver

    return WebhookReceiver(secrets=webhook_secret, store="memory")
