"""Handlers discovered by the app's autodiscovery (like admin.py)."""

import os
import time
from typing import Any

from service_webhooks import Event, Unprocessable
from service_webhooks.adapters.django import receiver

from .models import Delivery

receiver.router.declare("test.raise", "test.refuse")  # test-only events, not in the catalogue


@receiver.on("note.created")
def note_created(event: Event[Any]) -> None:
    Delivery.objects.create(note_id=event.data.id)
    if event.data.text == "slow":
        time.sleep(0.5)
    if event.data.text.startswith("wait:"):  # blocks until the test creates this file
        deadline = time.monotonic() + 30
        while not os.path.exists(event.data.text[5:]) and time.monotonic() < deadline:
            time.sleep(0.01)


@receiver.on("test.raise")
def raises(event: Event[Any]) -> None:
    raise RuntimeError("the database is down")


@receiver.on("test.refuse")
def refuses(event: Event[Any]) -> None:
    raise Unprocessable("this event can never be processed")
