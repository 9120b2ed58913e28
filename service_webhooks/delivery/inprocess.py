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

from .._exceptions import ConfigurationError
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

    A coroutine function: ``emulator = await deliver_to_app(app, events, secret=...)``.
    The queue runs on a :class:`~.clock.VirtualClock` by default, so retries over 24 h
    take no time; the signed ``t`` is still the real time. Assert on
    ``emulator.summary()``, ``emulator.deliveries`` and ``emulator.audit``.

    Args:
        app: The ASGI app that receives the webhooks.
        events: The events, all of the organization ``organization_id``. Each is
            delivered: one endpoint is configured per subcategory and payload version
            among them (spec §2.6, §9), so an event of version 2 or of a second
            subcategory is delivered too, never silently dropped.
        secret: The endpoint's signing secret.
        url: The endpoint URL inside the app (the host is only sent as ``Host``).
        organization_id: The account of the endpoint.
        clock: The queue's clock (default: a new virtual clock).
        deadline: Seconds per attempt.
        **options: Passed to :class:`~.emulator.Emulator` (``duplicates``,
            ``shuffle``, ``seed``, ``policy``, ``on_failure_notification``...).

    Raises:
        ConfigurationError: An event of another organization than
            ``organization_id`` (it would reach no endpoint, and a test asserting
            ``delivered == deliveries`` would pass without any delivery).
    """
    events = list(events)
    strangers = sorted({e.organization_id for e in events} - {organization_id})
    if strangers:
        raise ConfigurationError(
            f"every event must be of organization_id={organization_id!r}, got events of "
            f"{', '.join(map(repr, strangers))}: pass organization_id=, or build the "
            "events with it"
        )
    # One endpoint per (subcategory, payload version): each event reaches exactly one.
    groups: dict[tuple[str | None, int], set[str]] = {}
    for event in events:
        groups.setdefault((event.subcategory, event.version), set()).add(event.name)
    endpoints = [
        Endpoint(
            url,
            secret,
            names,
            organization_id=organization_id,
            subcategory=subcategory,
            payload_version=version,
        )
        for (subcategory, version), names in groups.items()
    ]
    async with asgi_sender(app, deadline=deadline) as sender:
        emulator = Emulator(sender, clock=clock or VirtualClock(), **options)
        for endpoint in endpoints:
            emulator.add_endpoint(endpoint)
        emulator.publish(events)
        await emulator.run()
    return emulator
