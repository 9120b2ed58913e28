"""The idempotency store backends every contract test runs against.

To plug in a backend, add a factory to ``BACKENDS``: it receives the pytest
``request`` and returns a fresh, empty store (skipping or failing through the
``unavailable`` fixture when its server is absent) and registers its own cleanup.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from service_webhooks.stores import IdempotencyStore, MemoryStore, SQLiteStore


def _memory(request: pytest.FixtureRequest) -> IdempotencyStore:
    return MemoryStore()


def _sqlite(request: pytest.FixtureRequest) -> IdempotencyStore:
    path: Path = request.getfixturevalue("tmp_path") / "idempotency.sqlite3"
    store = SQLiteStore(path)
    request.addfinalizer(store.close)
    return store


BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Any]] = {
    "memory": _memory,
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest) -> IdempotencyStore:
    factory = BACKENDS[request.param]
    result: IdempotencyStore = factory(request)
    return result
