"""Where the tests find the shared servers.

``POSTGRES_URL`` is the PostgreSQL database of the tests: ``$SERVICE_WEBHOOKS_TEST_POSTGRES``,
else the local server's ``test`` database (trust auth). A test that needs it takes the
``postgres_url`` fixture of ``tests/conftest.py``, which asks the server once per session
and skips the test (fails it under ``SERVICE_WEBHOOKS_REQUIRE_SERVICES=1``) when it does
not answer.
"""

from __future__ import annotations

import os

__all__ = ["POSTGRES_URL"]

POSTGRES_URL = os.environ.get(
    "SERVICE_WEBHOOKS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
