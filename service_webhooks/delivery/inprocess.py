"""Deliver into an ASGI app in-process, for a user's own test suite.

No socket is opened: requests go through :class:`httpx.ASGITransport`. The address
check is off (there is no real destination) and an exception escaping the app is
answered with 500, as a server would, so the emulator retries it.

Example::

    from service_webhooks.delivery import OutboundEvent, VirtualClock, deliver_to_app

    events = [OutboundEvent("note.created", {...})]
    emulator = await deliver_to_app(app, events, secret="whsec-test")
    assert emulator.summary().delivered == 1
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from .addresses import StaticResolver
from .clock import Clock, VirtualClock
from .emulator import Emulator
from .endpoint import DEFAULT_ORGANIZATION, Endpoint, OutboundEvent
from .sender import DEFAULT_DEADLINE, Sender

__all__ = ["asgi_sender", "deliver_to_app"]


def asgi_sender(app: Any, *, deadline: float = DEFAULT_DEADLINE) -> Sender:
    """A :class:`~.sender.Sender` whose requests go straight into the ASGI ``app``.

    Args:
        app: Any ASGI 3 application.
        deadline: Seconds per attempt (default 10).
    """
    return Sender(
        deadline=deadline,
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
        resolver=StaticResolver(default=["127.0.0.1"]),
        allow_private_destinations=True,
    )


async def deliver_to_app(
    app: Any,
    events: Iterable[OutboundEvent],
    *,
    secret: str | bytes,
    url: str = "http://testserver/webhooks",
    organization_id: str = DEFAULT_ORGANIZATION,
    clock: Clock | None = None,
    deadline: float = DEFAULT_DEADLINE,
    **options: Any,
) -> Emulator:
    """Deliver ``events`` into ``app`` with the full retry life and return the emulator.

    The queue runs on a :class:`~.clock.VirtualClock` by default, so retries over 24 h
    take no time; the signed ``t`` is still the real time. Assert on
    ``emulator.summary()``, ``emulator.deliveries`` and ``emulator.audit``.

    Args:
        app: The ASGI app that receives the webhooks.
        events: The events (their organization must be ``organization_id``).
        secret: The endpoint's signing secret.
        url: The endpoint URL inside the app (the host is only sent as ``Host``).
        organization_id: The account of the endpoint.
        clock: The queue's clock (default: a new virtual clock).
        deadline: Seconds per attempt.
        **options: Passed to :class:`~.emulator.Emulator` (``duplicates``,
            ``shuffle``, ``seed``, ``policy``, ``on_failure_notification``...).
    """
    events = list(events)
    endpoint = Endpoint(
        url,
        secret,
        {event.name for event in events} or {"note.created"},
        organization_id=organization_id,
        subcategory=next((e.subcategory for e in events if e.subcategory), None),
    )
    async with asgi_sender(app, deadline=deadline) as sender:
        emulator = Emulator(sender, clock=clock or VirtualClock(), **options)
        emulator.add_endpoint(endpoint)
        emulator.publish(events)
        await emulator.run()
    return emulator
