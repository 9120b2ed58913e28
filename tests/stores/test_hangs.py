"""A store server that stops answering (SIGSTOP: connections stay open, the kernel keeps
acknowledging) makes every store call fail within the store's ``timeout``.

The servers frozen here are private throwaway servers on free ports; the shared ones
are never touched. The bound checked (8 s for a 1-5 s timeout) is a bound on a hang,
not a timing measurement.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from service_webhooks.stores import ClaimState
from service_webhooks.stores._url import store_from_url

pytestmark = pytest.mark.services

BOUND = 8.0


def raises_within(seconds: float, call: Callable[[], object]) -> BaseException:
    """Run ``call`` in a daemon thread; return what it raised, failing the test if it
    returned or was still blocked after ``seconds``."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:
            outcome.append(error)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        pytest.fail(f"the store call was still blocked after {seconds} s")
    error = outcome[0]
    if error is None:
        pytest.fail("the store call returned instead of failing")
    return error


class _MidRun:
    """One call that works, then the server freezes, then the call under test.

    The async twin runs in a loop of its own that is closed only by :meth:`close`,
    after the server was thawed: closing it while frozen would wait on the pool's
    reconnection tasks, which is loop teardown, not the store call under test.
    """

    def __init__(self, server: Any, url: str) -> None:
        self.server = server
        self.store: Any = store_from_url(url)
        if url.startswith("postgresql"):
            self.store.create_schema()
        self.loop = asyncio.new_event_loop()

    def sync(self) -> object:
        assert self.store.claim("before", "t", 30) is ClaimState.NEW
        self.server.freeze()
        return self.store.claim("during", "t", 30)

    async def _both(self) -> object:
        assert await self.store.aclaim("before", "t", 30) is ClaimState.NEW
        self.server.freeze()
        return await self.store.aclaim("during", "t", 30)

    def call(self, mode: str) -> Callable[[], object]:
        return self.sync if mode == "sync" else lambda: self.loop.run_until_complete(self._both())

    def close(self) -> None:
        self.server.thaw()
        self.loop.run_until_complete(self.store.aclose())
        self.loop.close()
        self.store.close()


@pytest.fixture
def mid_run() -> Iterator[Callable[[Any, str], _MidRun]]:
    made: list[_MidRun] = []

    def make(server: Any, url: str) -> _MidRun:
        made.append(_MidRun(server, url))
        return made[-1]

    yield make
    for run in made:
        run.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_redis_call_on_a_frozen_server_fails_within_the_url_timeout(
    frozen_redis: Any, mid_run: Any, mode: str
) -> None:
    import redis

    run = mid_run(frozen_redis, frozen_redis.url + "?timeout=1")
    error = raises_within(BOUND, run.call(mode))
    assert isinstance(error, redis.exceptions.TimeoutError), repr(error)


def test_redis_default_timeout_bounds_a_frozen_server(frozen_redis: Any, mid_run: Any) -> None:
    import redis

    error = raises_within(BOUND, mid_run(frozen_redis, frozen_redis.url).call("sync"))
    assert isinstance(error, redis.exceptions.TimeoutError), repr(error)


def test_redis_store_answers_again_after_the_server_resumes(
    frozen_redis: Any, mid_run: Any
) -> None:
    run = mid_run(frozen_redis, frozen_redis.url + "?timeout=1")
    raises_within(BOUND, run.call("sync"))
    frozen_redis.thaw()
    assert run.store.claim("after", "t", 30) is ClaimState.NEW


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_postgres_call_on_a_frozen_server_fails_within_the_url_timeout(
    frozen_postgres: Any, mid_run: Any, mode: str
) -> None:
    run = mid_run(frozen_postgres, frozen_postgres.url + "?timeout=1")
    error = raises_within(BOUND, run.call(mode))
    assert isinstance(error, TimeoutError), repr(error)
    assert "did not answer within 1 s" in str(error)


def test_postgres_default_timeout_bounds_a_frozen_server(
    frozen_postgres: Any, mid_run: Any
) -> None:
    error = raises_within(BOUND, mid_run(frozen_postgres, frozen_postgres.url).call("sync"))
    assert isinstance(error, TimeoutError), repr(error)


def test_postgres_first_call_on_a_frozen_server_fails_within_the_timeout(
    frozen_postgres: Any,
) -> None:
    from psycopg_pool import PoolTimeout

    from service_webhooks.stores._postgres import PostgresStore

    store = PostgresStore(frozen_postgres.url, timeout=1)
    frozen_postgres.freeze()  # no connection was opened yet: the connect itself hangs
    error = raises_within(BOUND, lambda: store.claim("first", "t", 30))
    assert isinstance(error, PoolTimeout), repr(error)
    frozen_postgres.thaw()
    store.close()


def test_postgres_store_answers_again_after_the_server_resumes(frozen_postgres: Any) -> None:
    from service_webhooks.stores._postgres import PostgresStore

    store = PostgresStore(frozen_postgres.url, timeout=1, min_size=1, max_size=1)
    store.create_schema()
    assert store.claim("before", "t", 30) is ClaimState.NEW
    frozen_postgres.freeze()
    raises_within(BOUND, lambda: store.claim("during", "t", 30))
    frozen_postgres.thaw()
    assert store.claim("after", "t", 30) is ClaimState.NEW  # the broken connection was dropped
    store.close()


def _note(i: int) -> bytes:
    import json

    envelope = {
        "eventName": "note.created",
        "version": 1,
        "data": {"id": f"n-{i}", "author": "a@example.com", "text": "t"},
    }
    return json.dumps(envelope).encode()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_frozen_database_under_a_postgres_inbox_is_answered_503_within_the_timeout(
    frozen_postgres: Any, mode: str
) -> None:
    """The store fails first (503); the recorder then tries to record that answer in the
    inbox on the same frozen server, and that write must give up too."""
    from service_webhooks import WebhookReceiver, sign
    from service_webhooks.inbox import PostgresInbox
    from service_webhooks.stores import PostgresStore

    url = frozen_postgres.url
    store = PostgresStore(url, timeout=1)
    store.create_schema()
    inbox = PostgresInbox(url, timeout=1)
    inbox.create_schema()
    receiver = WebhookReceiver("s" * 32, store=store, inbox=inbox)
    receiver.on("note.created")(lambda event: None)
    loop = asyncio.new_event_loop()

    def deliver(i: int) -> Any:
        body = _note(i)
        signature = sign(body, "s" * 32, "o-1")
        if mode == "sync":
            return receiver.process(body, signature)
        return loop.run_until_complete(receiver.aprocess(body, signature))

    assert deliver(1).reason == "processed"
    frozen_postgres.freeze()
    answers: list[Any] = []
    worker = threading.Thread(target=lambda: answers.append(deliver(2)), daemon=True)
    worker.start()
    worker.join(BOUND)
    frozen_postgres.thaw()
    assert answers, f"the delivery was still unanswered after {BOUND} s"
    assert (answers[0].status, answers[0].reason) == (503, "store_unavailable")
    worker.join()
    loop.run_until_complete(store.aclose())
    loop.run_until_complete(inbox.aclose())
    loop.close()
    store.close()
    inbox.close()


# -- the answer after a freeze: one store timeout, not two (spec §8: the service waits 10 s)

TIMEOUT = 1.5
"""The stores' and the inbox's timeout below. A frozen server costs a delivery one
timeout; the calls that follow the store's failure (the claim's release, the record of
the 503 in an inbox on that database) no longer add theirs: answered within two."""


def _answered_within(seconds: float, deliver: Callable[[], Any]) -> tuple[Any, float]:
    """``deliver()``'s outcome and how long it took, failing the test after ``seconds``."""
    answers: list[tuple[Any, float]] = []

    def run() -> None:
        started = time.monotonic()
        outcome = deliver()
        answers.append((outcome, time.monotonic() - started))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert answers, f"the delivery was still unanswered after {seconds} s"
    return answers[0]


class _Frozen:
    """A receiver on ``url`` whose note ``n-freeze`` freezes ``server`` in its handler
    (between the claim and the completion); sync or async (a loop of its own)."""

    def __init__(self, server: Any, url: str, mode: str, *, inbox: bool) -> None:
        from service_webhooks import WebhookReceiver

        self.server = server
        self.mode = mode
        self.receiver = WebhookReceiver("s" * 32, store=url, inbox=inbox)
        self.loop = asyncio.new_event_loop()

        @self.receiver.on("note.created")
        def handler(event: Any) -> None:
            if event.data.id == "n-freeze":
                server.freeze()

    def deliver(self, note_id: str) -> Any:
        import json

        from service_webhooks import sign

        data = {"id": note_id, "author": "a@example.com", "text": "t"}
        body = json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()
        signature = sign(body, "s" * 32, "o-1")
        if self.mode == "sync":
            return self.receiver.process(body, signature)
        return self.loop.run_until_complete(self.receiver.aprocess(body, signature))

    def reasons(self) -> list[str]:
        inbox = self.receiver.inbox
        assert inbox is not None
        return [record.reason for record in inbox.search().items]

    def settle(self) -> None:
        """Thaw the server; wait for what runs after the answers to end."""
        from service_webhooks import _background

        self.server.thaw()
        assert _background.wait_idle(BOUND), "the work after the answer was still running"
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:  # the loop's tasks of that work
            self.loop.run_until_complete(asyncio.sleep(0.02))
            tasks = [task.get_name() for task in asyncio.all_tasks(self.loop)]
            if _background.NAME not in tasks:
                return
        pytest.fail(f"the work after the answer was still running after {BOUND} s")

    def close(self) -> None:
        store: Any = self.receiver.store
        inbox: Any = self.receiver.inbox
        self.loop.run_until_complete(store.aclose())
        if inbox is not None:
            self.loop.run_until_complete(inbox.aclose())
            inbox.close()
        self.loop.close()
        store.close()


@pytest.fixture
def frozen_receiver() -> Iterator[Callable[..., _Frozen]]:
    made: list[_Frozen] = []

    def make(server: Any, url: str, mode: str, *, inbox: bool = False) -> _Frozen:
        made.append(_Frozen(server, url, mode, inbox=inbox))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("server_name", ["frozen_redis", "frozen_postgres"])
def test_a_server_frozen_before_the_completion_is_answered_after_one_timeout(
    request: pytest.FixtureRequest, frozen_receiver: Any, server_name: str, mode: str
) -> None:
    """The completion fails after the timeout (503); the release that follows would wait
    as long again on the frozen server: it runs after the answer."""
    server = request.getfixturevalue(server_name)
    frozen = frozen_receiver(server, f"{server.url}?timeout={TIMEOUT:g}", mode)
    assert frozen.deliver("n-warm").reason == "processed"
    outcome, waited = _answered_within(BOUND * 2, lambda: frozen.deliver("n-freeze"))
    frozen.settle()
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert waited < 2 * TIMEOUT, f"answered after {waited:.2f} s; the timeout is {TIMEOUT:g} s"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("freeze", ["before the claim", "before the completion"])
def test_a_frozen_database_holding_the_inbox_is_answered_after_one_timeout(
    frozen_postgres: Any, frozen_receiver: Any, freeze: str, mode: str
) -> None:
    """The record of that 503 goes to the same frozen database: it is written after
    the answer (503 either way), once the database answers again."""
    url = f"{frozen_postgres.url}?timeout={TIMEOUT:g}"
    frozen = frozen_receiver(frozen_postgres, url, mode, inbox=True)  # the same database
    assert frozen.deliver("n-warm").reason == "processed"
    note = "n-freeze"
    if freeze == "before the claim":
        frozen_postgres.freeze()
        note = "n-2"
    outcome, waited = _answered_within(BOUND * 2, lambda: frozen.deliver(note))
    frozen.settle()
    assert (outcome.status, outcome.reason) == (503, "store_unavailable")
    assert waited < 2 * TIMEOUT, f"answered after {waited:.2f} s; the timeout is {TIMEOUT:g} s"
    assert "store_unavailable" in frozen.reasons()  # recorded after the answer
