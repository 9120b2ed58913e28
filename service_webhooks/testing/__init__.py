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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clients import AsyncDeliverer, Deliverer, UnsupportedClientError
    from .signer import CONTENT_TYPE, Signer, envelope

_EXPORTS = {
    "CONTENT_TYPE": ".signer",
    "AsyncDeliverer": ".clients",
    "Deliverer": ".clients",
    "Signer": ".signer",
    "UnsupportedClientError": ".clients",
    "envelope": ".signer",
}

__all__ = [
    "CONTENT_TYPE",
    "AsyncDeliverer",
    "Deliverer",
    "Signer",
    "UnsupportedClientError",
    "envelope",
]


def __getattr__(name: str) -> Any:  # PEP 562: the pytest plugin imports this package early
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
