"""A delivery cancelled by an anyio cancel scope (which cancels every await inside it)
still releases its claim: the retry runs the handler instead of waiting out the lease."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from service_webhooks import Event, SQLiteStore, WebhookReceiver

Signed = Callable[..., tuple[bytes, str]]


def test_a_cancel_scope_around_a_slow_handler_releases_its_claim(
    secret: str, signed: Signed, tmp_path: Path
) -> None:
    receiver = WebhookReceiver(secrets=secret, store=SQLiteStore(tmp_path / "s.db"), inbox=False)
    runs: list[str] = []

    @receiver.on("note.created")
    async def slow(event: Event[Any]) -> None:
        runs.append(event.data.id)
        if len(runs) == 1:
            await asyncio.sleep(5)

    body, header = signed()

    async def main() -> tuple[int, str]:
        with anyio.move_on_after(0.1):
            await receiver.aprocess(body, header)
        retry = await receiver.aprocess(*signed(body))
        return retry.status, retry.reason

    assert anyio.run(main) == (200, "processed")
    assert len(runs) == 2
