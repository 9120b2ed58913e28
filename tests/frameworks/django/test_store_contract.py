"""The shared store contract (``tests/stores/test_contract.py``) over :class:`DjangoStore`
on SQLite and on PostgreSQL.

The contract's tests are loaded from that file, not copied: the registry in
``tests/stores/conftest.py`` cannot hold a Django backend, because Django is configured
once per process and only this folder configures it (with its own databases).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections

from service_webhooks.adapters.django.store import DjangoStore
from service_webhooks.stores import ClaimState

_CONTRACT = Path(__file__).parents[2] / "stores" / "test_contract.py"
_spec = importlib.util.spec_from_file_location("sw_tests_store_contract_for_django", _CONTRACT)
if _spec is None or _spec.loader is None:
    raise ImportError(_CONTRACT)
_contract = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_contract)
globals().update(
    {name: value for name, value in vars(_contract).items() if name.startswith("test_")}
)
key = _contract.key  # the contract's fixture


class _RequestScopedStore(DjangoStore):
    """Closes a worker thread's connection after each call, as Django does when a
    request finishes (the contract's threads are not requests)."""

    def _finish(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            connections[self.using].close()

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        try:
            return super().claim(key, token, lease)
        finally:
            self._finish()

    def complete(self, key: str, token: str, retention: float) -> bool:
        try:
            return super().complete(key, token, retention)
        finally:
            self._finish()

    def release(self, key: str, token: str) -> bool:
        try:
            return super().release(key, token)
        finally:
            self._finish()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[DjangoStore]:
    alias = "default" if request.param == "sqlite" else request.getfixturevalue("pg")
    yield _RequestScopedStore(using=alias)
    connections.close_all()


def test_the_contract_was_loaded() -> None:
    loaded = [
        name
        for name in globals()
        if name.startswith("test_") and name != "test_the_contract_was_loaded"
    ]
    assert len(loaded) >= 10
