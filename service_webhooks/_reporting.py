"""How a delivery is reported: one log line, outcome observers, an optional tracer.

Every answer the receiver gives becomes one :class:`~service_webhooks._outcome.DeliveryRecord`
(built only when someone listens). :func:`log_record` writes it as one INFO line on the
``service_webhooks`` logger: a readable message plus the ``extra`` fields of
:data:`LOG_FIELDS`. :class:`OutcomeObserver` callables receive the same record, and a
:class:`DeliveryTracer` wraps each delivery and its handlers in context managers
(:mod:`service_webhooks.observability` makes OpenTelemetry spans with it).
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._events import Event
    from ._outcome import DeliveryRecord

__all__ = [
    "KEY_PREFIX_LENGTH",
    "LOG_FIELDS",
    "LOG_TEXT_CHARS",
    "DeliveryTracer",
    "OutcomeObserver",
    "log_record",
    "loggable",
    "printable",
]

logger = logging.getLogger("service_webhooks")

KEY_PREFIX_LENGTH = 12
"""Characters of the idempotency key shown in logs and records."""

LOG_FIELDS = (
    "webhook_status",
    "webhook_reason",
    "webhook_event",
    "webhook_event_version",
    "webhook_organization",
    "webhook_key_prefix",
    "webhook_duration_ms",
    "webhook_handler_ms",
    "webhook_error_type",
)
"""The ``extra`` attributes of the per-delivery log record (``None`` when unknown):
status (int), reason (str), event name, version (int), organization ID, idempotency
key prefix (12 chars), duration and handler time in milliseconds (float), and the
class name of a handler's or the store's exception."""


class OutcomeObserver(Protocol):
    """Told about every answered delivery, e.g. to count outcomes in your own metrics.

    Called once per delivery (including requests refused by ``precheck``) with its
    :class:`~service_webhooks._outcome.DeliveryRecord`, synchronously, on the thread or
    event loop that handles the request, before the response is written: keep it
    cheap (increment a counter, observe a histogram) and thread-safe. An exception it
    raises is logged and ignored; it never changes the answer.
    """

    def __call__(self, record: DeliveryRecord, /) -> None: ...


class DeliveryTracer(Protocol):
    """Wraps deliveries and their handlers in context managers, e.g. tracing spans.

    See :mod:`service_webhooks.observability` for the OpenTelemetry one. Both context
    managers are entered on the thread or task that handles the request (a context
    variable set in them is seen by the handlers and the observers).
    """

    def delivery(self) -> AbstractContextManager[object]:
        """Entered first thing in ``process``/``aprocess``, exited after the answer is
        decided and every observer was called. Not used by ``precheck`` nor by a
        replay."""
        ...

    def handlers(self, event: Event[Any], /) -> AbstractContextManager[object]:
        """Entered around the handlers of an event that was claimed; an exception a
        handler raises passes through it (then the claim is released)."""
        ...


def printable(text: str) -> str:
    """``text`` safe for one log line: control and other non-printable characters
    (newlines, ANSI escapes) are written as Python escapes, so a value from a request
    can never forge a log line or recolour a terminal."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


LOG_TEXT_CHARS = 1_000
"""Characters of one value (an event name, an organization ID, an error message) that a
log line shows; the rest is counted, not written (:func:`loggable`)."""


def loggable(text: str) -> str:
    """``text`` for a log line: cut to :data:`LOG_TEXT_CHARS` characters, saying how many
    more there were, then made :func:`printable`. A signed delivery's ``eventName`` may
    fill its whole 1 MiB body, and a handler's message any size: neither makes a log
    line longer than a few kilobytes. The inbox and the outcome observers keep the
    whole value."""
    if len(text) > LOG_TEXT_CHARS:
        text = f"{text[:LOG_TEXT_CHARS]}… ({len(text) - LOG_TEXT_CHARS} more characters)"
    return printable(text)


def _field(text: str | None) -> str | None:
    return None if text is None else loggable(text)


def log_record(record: DeliveryRecord) -> None:
    """One INFO line per delivery: readable, with every field in ``extra`` (LOG_FIELDS)."""
    if not logger.isEnabledFor(logging.INFO):
        return
    outcome = record.outcome
    event_name = _field(outcome.event_name)
    organization_id = _field(outcome.organization_id)
    key_prefix = _field(record.key_prefix)  # a custom idempotency key holds request data
    handler_ms = None if record.handler_duration is None else record.handler_duration * 1000
    duration_ms = record.duration * 1000
    logger.info(
        "service_webhooks: %d %s event=%s version=%s org=%s key=%s in %.2f ms%s%s",
        outcome.status,
        outcome.reason,
        event_name or "-",
        "-" if record.event_version is None else record.event_version,
        organization_id or "-",
        key_prefix or "-",
        duration_ms,
        "" if handler_ms is None else f" (handlers {handler_ms:.2f} ms)",
        f": {loggable(record.detail)}" if record.detail else "",
        extra={
            "webhook_status": outcome.status,
            "webhook_reason": outcome.reason,
            "webhook_event": event_name,
            "webhook_event_version": record.event_version,
            "webhook_organization": organization_id,
            "webhook_key_prefix": key_prefix,
            "webhook_duration_ms": duration_ms,
            "webhook_handler_ms": handler_ms,
            "webhook_error_type": record.error_type,
        },
    )
