"""Django signals for those who prefer them to ``@receiver.on`` (sender: the receiver).

* ``webhook_received(event)``: every verified delivery that no earlier handler failed;
  a signal receiver is a handler (raising fails the delivery: 500, retried).
* ``webhook_processed(event)``: every handler, signal receivers included, returned.
* ``webhook_failed(event, error)``: a handler raised (sent before the 500 or 4xx).

``webhook_received`` and ``webhook_processed`` are sent by a catch-all handler installed
at startup only when one of them has a listener then: connect in ``webhooks.py``.
"""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

from service_webhooks import Event

from .conf import receiver

__all__ = ["install", "webhook_failed", "webhook_processed", "webhook_received"]

webhook_received = Signal()
webhook_processed = Signal()
webhook_failed = Signal()


def _send(event: Event[Any]) -> None:
    webhook_received.send(sender=receiver.__class__, event=event)
    webhook_processed.send(sender=receiver.__class__, event=event)


def _failed(event: Event[Any], error: BaseException) -> None:
    webhook_failed.send_robust(sender=receiver.__class__, event=event, error=error)


def install() -> None:
    """Hook the signals into :data:`~service_webhooks.adapters.django.receiver` (once)."""
    if _failed not in receiver.router.error_hooks:
        receiver.on_error(_failed)
    if webhook_received.has_listeners() or webhook_processed.has_listeners():
        receiver.remove(_send)
        receiver.on_any(_send)
