"""Test kit: sign deliveries like the service and post them into test clients.

* :class:`Signer`: ``(body, headers)`` for an event, signed as the service signs.
* :class:`Deliverer` / :class:`AsyncDeliverer`: sign and POST into a Starlette/FastAPI,
  httpx, Flask or Django test client in one call.
* The pytest plugin (:mod:`.pytest_plugin`, loaded automatically): fixtures
  ``webhook_secret``, ``webhook_organization_id``, ``webhook_signer``,
  ``deliver_webhook``, ``adeliver_webhook`` and ``webhook_receiver``.
* :mod:`.fake_api`: a fake of the service's API.

See ``docs/testing.md``.
"""

from .clients import AsyncDeliverer, Deliverer, UnsupportedClientError
from .signer import CONTENT_TYPE, Signer, envelope

__all__ = [
    "CONTENT_TYPE",
    "AsyncDeliverer",
    "Deliverer",
    "Signer",
    "UnsupportedClientError",
    "envelope",
]
