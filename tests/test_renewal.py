"""The claim renewer: it re-claims while handlers run, survives store errors, stops on
a lost claim, and never renews after ``remove`` returned."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from service_webhooks import ClaimState, MemoryStore
from service_webhooks._renewal import Renewer


class Scripted(MemoryStore):
    """A store whose renewals (claims) answer from a script and are counted."""

    def __init__(self, answer: ClaimState | Exception, gate: threading.Event | None = None):
        super().__init__()
        self.answer = answer
        self.gate = gate
        self.calls: list[tuple[str, str]] = []
        self.entered = threading.Event()

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        self.calls.append((key, token))
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(5)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def wait_for(condition: object, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_a_live_claim_is_renewed_until_removed() -> None:
    store = Scripted(ClaimState.NEW)
    renewer = Renewer(store, lease=0.15)  # renews every 0.05 s
    renewer.add("k", "t")
    assert wait_for(lambda: len(store.calls) >= 3)
    renewer.remove("t")
    seen = len(store.calls)
    time.sleep(0.2)
    assert len(store.calls) <= seen + 1  # at most one renewal already under way
    assert set(store.calls) == {("k", "t")}


def test_a_store_error_is_logged_and_renewing_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    store = Scripted(ConnectionError("redis://:hunter2@h/0 refused"))
    renewer = Renewer(store, lease=0.15)
    with caplog.at_level(logging.ERROR, logger="service_webhooks"):
        renewer.add("k", "t")
        assert wait_for(lambda: len(store.calls) >= 2)  # still renewing after the error
        renewer.remove("t")
    text = caplog.text
    assert "could not renew a claim: ConnectionError" in text
    assert "hunter2" not in text


def test_a_lost_claim_stops_its_renewals(caplog: pytest.LogCaptureFixture) -> None:
    store = Scripted(ClaimState.IN_FLIGHT)  # another delivery took the key over
    renewer = Renewer(store, lease=0.15)
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        renewer.add("k", "t")
        assert wait_for(lambda: len(store.calls) >= 1)
        time.sleep(0.25)
    assert len(store.calls) == 1
    assert "lost its claim (in_flight)" in caplog.text


def test_remove_waits_for_a_renewal_under_way() -> None:
    gate = threading.Event()
    store = Scripted(ClaimState.NEW, gate)
    renewer = Renewer(store, lease=0.15)
    renewer.add("k", "t")
    assert store.entered.wait(5)  # a renewal is in the store now
    removed = threading.Event()
    remover = threading.Thread(target=lambda: (renewer.remove("t"), removed.set()))
    remover.start()
    assert not removed.wait(0.2)  # remove() is waiting for the renewal to finish
    gate.set()
    assert removed.wait(5)
    remover.join(5)


def test_a_receiver_no_longer_used_lets_its_thread_and_store_go() -> None:
    import gc
    import weakref

    from service_webhooks import WebhookReceiver, sign

    store = MemoryStore()
    receiver = WebhookReceiver("s" * 32, store=store, lease=600)  # a beat every 200 s
    receiver.on("note.created")(lambda event: None)
    body = b'{"eventName":"note.created","version":1,"data":{"id":"n1","author":"a","text":"t"}}'
    outcome = receiver.process(body, sign(body, "s" * 32, "org"))
    assert outcome.reason == "processed"
    thread = receiver._renewer._thread
    assert thread is not None
    assert thread.is_alive()
    store_ref = weakref.ref(store)
    del receiver, store, outcome
    gc.collect()
    thread.join(5)  # long before its next beat
    assert not thread.is_alive()
    assert store_ref() is None


def test_a_renewer_in_use_keeps_renewing_after_a_collection() -> None:
    import gc

    store = Scripted(ClaimState.NEW)
    renewer = Renewer(store, lease=0.15)
    renewer.add("k", "t")
    gc.collect()
    assert wait_for(lambda: len(store.calls) >= 3)
    renewer.remove("t")


class HangingRenewals(MemoryStore):
    """Renewals (the renewer thread's blocking claims) hang until ``gate`` opens, as on a
    store server that stopped answering; the delivery's own calls answer at once."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.renewing = threading.Event()
        self.waited_out = False

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        if threading.current_thread().name == "service-webhooks-renewer":
            self.renewing.set()
            self.waited_out = not self.gate.wait(5)
        return super().claim(key, token, lease)


async def test_a_hanging_renewal_does_not_block_the_event_loop_of_its_delivery() -> None:
    """The handler ends while its renewal hangs: the delivery waits for that renewal
    (no renewal may follow its release), but on the loop, whose other deliveries go on.
    Here only a coroutine of that loop opens the gate."""
    from service_webhooks import Event, WebhookReceiver, sign

    store = HangingRenewals()
    receiver = WebhookReceiver("s" * 32, store=store, lease=0.15)  # renewed every 0.05 s

    @receiver.on("note.created")
    async def handler(event: Event[Any]) -> None:
        await asyncio.to_thread(store.renewing.wait, 5)  # ends while its renewal hangs

    async def open_the_gate_once_the_delivery_waits() -> None:
        await asyncio.to_thread(store.renewing.wait, 5)
        while receiver._renewer._live:  # the delivery stops renewing, then waits
            await asyncio.sleep(0.001)
        store.gate.set()

    body = b'{"eventName":"note.created","version":1,"data":{"id":"n1","author":"a","text":"t"}}'
    opener = asyncio.ensure_future(open_the_gate_once_the_delivery_waits())
    outcome = await receiver.aprocess(body, sign(body, "s" * 32, "org"))
    await opener
    assert outcome.reason == "processed"
    assert not store.waited_out  # was: the loop stood still until the renewal gave up


async def test_aremove_cancelled_still_waits_for_the_renewal_under_way() -> None:
    gate = threading.Event()
    store = Scripted(ClaimState.NEW, gate)
    renewer = Renewer(store, lease=0.15)
    renewer.add("k", "t")
    assert await asyncio.to_thread(store.entered.wait, 5)  # a renewal is in the store now
    removing = asyncio.ensure_future(renewer.aremove("t"))
    await asyncio.sleep(0.05)
    removing.cancel()
    await asyncio.sleep(0.05)
    assert not removing.done()  # a release must not follow before the renewal ended
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await removing


class AsyncOnly(MemoryStore):
    """A MemoryStore subclass that, like an asyncio-only client, refuses blocking calls."""

    def __init__(self) -> None:
        super().__init__()
        self.renewals_on_loop = 0

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        from service_webhooks import ConfigurationError

        raise ConfigurationError("asyncio connections only")

    async def aclaim(self, key: str, token: str, lease: float) -> ClaimState:
        self.renewals_on_loop += 1
        return super().claim(key, token, lease)


async def test_a_blocking_store_subclass_refusing_blocking_calls_is_renewed_on_its_loop() -> None:
    """Only the built-in stores' exact types skip noting the loop at ``add``: a subclass
    may refuse blocking calls, and its claims are then renewed with ``aclaim`` there."""
    store = AsyncOnly()
    renewer = Renewer(store, lease=0.15)  # renews every 0.05 s
    renewer.add("k", "t")
    await asyncio.sleep(0.3)
    await renewer.aremove("t")
    assert store.renewals_on_loop >= 2  # the first wake-up tries a blocking call


def _renewer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "service-webhooks-renewer"]


def test_stop_ends_the_thread_and_the_next_add_renews_again() -> None:
    store = Scripted(ClaimState.NEW)
    renewer = Renewer(store, lease=30.0)  # the thread waits 10 s between beats
    renewer.add("k", "t")
    (thread,) = [t for t in _renewer_threads() if t is renewer._thread]
    renewer.stop()
    thread.join(2)
    assert not thread.is_alive()  # it left its 10 s wait at once
    renewer.stop()  # again: harmless

    renewer._interval = 0.05  # a new thread takes the interval it is started with
    renewer.add("k", "t2")
    assert wait_for(lambda: ("k", "t2") in store.calls)
    renewer.remove("t")
    renewer.remove("t2")
    renewer.stop()


def test_receiver_close_ends_its_renewer_thread() -> None:
    """The thread had lived until the receiver was collected: a renewal after close()
    would have opened the store's connections again."""
    from service_webhooks import WebhookReceiver, encode_envelope, sign

    receiver = WebhookReceiver("whsec-k", store=MemoryStore(), lease=30.0)
    receiver.on("order.created")(lambda event: None)
    body = encode_envelope("order.created", {"id": "o-1"})
    outcome = receiver.process(body, sign(body, "whsec-k", "org-1"))
    assert outcome.status == 200
    thread = receiver._renewer._thread
    assert thread is not None
    assert thread.is_alive()
    receiver.close()
    thread.join(2)
    assert not thread.is_alive()
    # still usable: the next delivery starts the renewing again
    body = encode_envelope("order.created", {"id": "o-2"})
    assert receiver.process(body, sign(body, "whsec-k", "org-1")).status == 200
    again = receiver._renewer._thread
    assert again is not None
    assert again.is_alive()
    receiver.close()


def test_the_longest_allowed_lease_keeps_its_thread_waiting() -> None:
    """``lease`` may be up to 1000 years (MAX_DURATION); a third of that is past
    ``threading.TIMEOUT_MAX``, and ``Event.wait`` raised ``OverflowError``: the thread
    died with a traceback at the first delivery."""
    from service_webhooks.stores._base import MAX_DURATION

    assert MAX_DURATION / 3 > threading.TIMEOUT_MAX
    renewer = Renewer(Scripted(ClaimState.NEW), lease=MAX_DURATION)
    renewer.add("k", "t")
    thread = renewer._thread
    assert thread is not None
    thread.join(0.2)
    assert thread.is_alive()  # waiting, not dead
    renewer.stop()
    thread.join(2)
    assert not thread.is_alive()
