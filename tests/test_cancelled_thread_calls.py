"""A plain-function handler whose caller was cancelled (a timeout around the app, a
server shutting down) while the handler still waited for a pool thread never runs: its
claim was released when the caller was cancelled, so only the retry runs it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import service_webhooks._threads as threads
from service_webhooks import Event, MemoryStore, WebhookReceiver
from service_webhooks._threads import _Pool

Signed = Callable[..., tuple[bytes, str]]


def test_a_call_cancelled_while_it_waits_for_a_thread_never_runs() -> None:
    pool = _Pool(1)
    gate = threading.Event()
    ran: list[str] = []

    def blocking(name: str) -> None:
        ran.append(name)
        gate.wait(5)

    async def main() -> None:
        first = asyncio.ensure_future(pool.run(blocking, "first"))
        while not ran:
            await asyncio.sleep(0.005)
        queued = asyncio.ensure_future(pool.run(ran.append, "queued"))
        await asyncio.sleep(0.02)
        queued.cancel()
        await asyncio.gather(queued, return_exceptions=True)
        gate.set()
        await first
        assert await pool.run(lambda value: value * 2, 21) == 42  # the thread is back

    asyncio.run(main())
    assert ran == ["first"]


def test_a_delivery_cancelled_while_its_handler_waits_for_a_thread_runs_once(
    secret: str, signed: Signed, make_body: Callable[..., bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threads, "_pool", _Pool(1))  # one thread: the second call waits
    gate = threading.Event()
    runs: list[str] = []
    receiver = WebhookReceiver(secrets=secret, store=MemoryStore())

    @receiver.on("note.created")
    def blocking(event: Event[Any]) -> None:
        runs.append(event.data.id)
        gate.wait(5)

    busy = make_body(data={"id": "busy", "author": "a@example.com", "text": ""})
    late = make_body(data={"id": "late", "author": "a@example.com", "text": ""})

    async def main() -> list[str]:
        first = asyncio.ensure_future(receiver.aprocess(*signed(busy)))
        while not runs:
            await asyncio.sleep(0.005)
        cancelled = asyncio.ensure_future(receiver.aprocess(*signed(late)))
        await asyncio.sleep(0.05)
        cancelled.cancel()  # a timeout middleware, a server's shutdown: claim released
        await asyncio.gather(cancelled, return_exceptions=True)
        retry = asyncio.ensure_future(receiver.aprocess(*signed(late)))
        await asyncio.sleep(0.05)
        gate.set()
        outcomes = await asyncio.gather(first, retry)
        return [outcome.reason for outcome in outcomes]

    assert asyncio.run(main()) == ["processed", "processed"]
    assert runs == ["busy", "late"]
