"""PostgresStore.claim answers the key's state as committed when it returns, not as
its statement's snapshot saw it: a claim that waits on the row lock of a completion
in progress answers DONE once that completion commits (found by a multi-process trial:
a duplicate arriving as the first delivery completed was answered 503 in_flight, and a
renewal racing its own completion logged a lost claim)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import NoReturn

import pytest

from service_webhooks.stores import ClaimState

pytest.importorskip("psycopg")
import psycopg

from service_webhooks.stores._postgres import PostgresStore

URL = "postgresql://postgres@127.0.0.1:5432/test"
pytestmark = pytest.mark.services


@pytest.fixture
def store(unavailable: Callable[[str, str], NoReturn]) -> Iterator[PostgresStore]:
    try:
        admin = psycopg.connect(URL, autocommit=True, connect_timeout=2)
    except psycopg.Error as error:
        unavailable(f"PostgreSQL at {URL}", type(error).__name__)
    table = f"sw_race_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(URL, table=table)
    store.create_schema()
    try:
        yield store
    finally:
        store.close()
        admin.execute(f"DROP TABLE IF EXISTS {table}")
        admin.close()


@pytest.mark.parametrize("token", ["owner", "other"], ids=["renewal", "duplicate"])
def test_a_claim_waiting_on_a_completion_answers_done(store: PostgresStore, token: str) -> None:
    key = uuid.uuid4().hex
    assert store.claim(key, "owner", 60) is ClaimState.NEW
    with psycopg.connect(URL) as completion:  # the owner's completion, not yet committed
        completion.execute(
            f"UPDATE {store.table} SET state = 'done', "  # noqa: S608 - our own table name
            "expires_at = now() + interval '1 hour' WHERE key = %s",
            (key,),
        )
        answers: list[ClaimState] = []
        claimer = threading.Thread(target=lambda: answers.append(store.claim(key, token, 60)))
        claimer.start()
        time.sleep(0.3)  # the claim now waits on the completion's row lock
        assert claimer.is_alive()
        completion.commit()
        claimer.join(10)
    assert answers == [ClaimState.DONE]


async def test_an_async_claim_waiting_on_a_completion_answers_done(store: PostgresStore) -> None:
    key = uuid.uuid4().hex
    assert await store.aclaim(key, "owner", 60) is ClaimState.NEW
    with psycopg.connect(URL) as completion:
        completion.execute(
            f"UPDATE {store.table} SET state = 'done', "  # noqa: S608
            "expires_at = now() + interval '1 hour' WHERE key = %s",
            (key,),
        )
        threading.Timer(0.3, completion.commit).start()
        answer = await store.aclaim(key, "other", 60)
    assert answer is ClaimState.DONE
    await store.aclose()


def test_a_claim_waiting_on_a_release_still_answers(store: PostgresStore) -> None:
    """The holder released meanwhile: the row is gone, so the caller claims it."""
    key = uuid.uuid4().hex
    assert store.claim(key, "owner", 60) is ClaimState.NEW
    with psycopg.connect(URL) as release:
        release.execute(f"DELETE FROM {store.table} WHERE key = %s", (key,))  # noqa: S608
        answers: list[ClaimState] = []
        claimer = threading.Thread(target=lambda: answers.append(store.claim(key, "other", 60)))
        claimer.start()
        time.sleep(0.3)
        release.commit()
        claimer.join(10)
    assert answers in ([ClaimState.NEW], [ClaimState.IN_FLIGHT])  # never DONE
