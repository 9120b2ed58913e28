"""SQLiteStore's statements bind their parameters by position only (``?``).

Python 3.12.0-3.12.3 take a numbered ``?1`` for a named parameter and warn
(``DeprecationWarning``) when it is bound from a sequence: under ``-W error`` or
pytest's ``filterwarnings = error`` every claim then failed, and deliveries were
answered 503.
"""

from __future__ import annotations

import asyncio
import re
import warnings
from pathlib import Path

import pytest

from service_webhooks.stores import ClaimState, SQLiteStore
from service_webhooks.stores import _sqlite as module

STATEMENTS = {
    name: value
    for name, value in vars(module).items()
    if name.startswith("_") and name.isupper() and isinstance(value, str) and "?" in value
}


def test_the_statements_are_found() -> None:
    assert {"_CLAIM", "_STATE", "_COMPLETE", "_RELEASE", "_PRUNE"} <= set(STATEMENTS)


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_a_statement_has_no_numbered_or_named_placeholder(name: str) -> None:
    assert not re.search(r"\?\d|[:@$][A-Za-z_]", STATEMENTS[name])


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_claims_completions_and_prunes_raise_no_warning(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteStore(tmp_path / "keys.sqlite3", clock=clock)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert store.claim("k", "a", 60) is ClaimState.NEW
            assert store.claim("k", "b", 60) is ClaimState.IN_FLIGHT
            assert store.claim("k", "a", 60) is ClaimState.NEW  # its owner renews it
            assert not store.complete("k", "b", 3600)  # not the owner's
            clock.now += 61  # the lease ran out: another owner may take it over
            assert store.claim("k", "b", 60) is ClaimState.NEW
            assert not store.release("k", "a")
            assert store.complete("k", "b", 3600)
            assert store.claim("k", "c", 60) is ClaimState.DONE
            assert store.claim("gone", "a", 60) is ClaimState.NEW
            assert store.release("gone", "a")
            clock.now += 3601
            assert store.prune() == 1
            assert store.claim("k", "d", 60) is ClaimState.NEW
            assert store.prune_step() == 0
    finally:
        store.close()


async def test_the_async_twins_raise_no_warning(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            claims = await asyncio.gather(store.aclaim("k", "a", 60), store.aclaim("k", "b", 60))
            assert claims == [ClaimState.NEW, ClaimState.IN_FLIGHT]
            assert await store.acomplete("k", "a", 3600)
            assert await store.aclaim("k", "c", 60) is ClaimState.DONE
            assert await store.aclaim("j", "a", 60) is ClaimState.NEW
            assert await store.arelease("j", "a")
    finally:
        store.close()
