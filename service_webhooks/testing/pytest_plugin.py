"""pytest plugin (entry point ``service_webhooks``): fixtures for testing receivers.

* ``webhook_signer``: a :class:`~service_webhooks.testing.signer.Signer` with a random
  secret; configure your receiver with ``webhook_signer.secret``.
"""

from __future__ import annotations

import pytest

from ..credentials import generate_secret
from .signer import Signer


@pytest.fixture
def webhook_signer() -> Signer:
    """A signer with a fresh random secret and organization ``o-TEST-na1``."""
    return Signer(generate_secret())
