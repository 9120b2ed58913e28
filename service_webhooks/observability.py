"""OpenTelemetry for a receiver: a span per delivery, a handler span, and metrics.

Optional: install the extra (``pip install 'service-webhooks[otel]'``); importing this
module without ``opentelemetry-api`` raises :class:`ImportError` naming it. The core
never imports OpenTelemetry: nothing here runs until you call :func:`instrument`::

    from service_webhooks.observability import instrument

    receiver = WebhookReceiver(secrets=...)
    instrument(receiver)            # the global tracer and meter providers
    # or instrument(receiver, tracer_provider=..., meter_provider=...)

What it records (names are module constants):

* Span ``service_webhooks.delivery`` (:data:`DELIVERY_SPAN`, kind INTERNAL) around each
  ``process``/``aprocess`` call, a child of the current span (your HTTP server
  instrumentation's, if any). Attributes: ``webhook.outcome`` (the reason, e.g.
  ``processed``, ``signature``), ``http.response.status_code``, and when known
  ``webhook.event.name``, ``webhook.event.version`` (its text beyond int64, which OTLP
  cannot carry), ``webhook.organization.id``,
  ``webhook.idempotency_key.prefix`` (12 characters), ``webhook.detail`` (why a request
  was refused) and ``error.type``. Status ERROR for a 5xx answer. An answer given by
  ``precheck`` (405, 413 before the body is read), and a replay (``receiver.replay``),
  get a span of their own, ended at once (a replay's handlers get no handler span).
* Span ``service_webhooks.handle`` (:data:`HANDLER_SPAN`) around the event's handlers,
  current while they run (so a handler's database or HTTP spans nest under it), with
  ``webhook.event.name`` and ``webhook.event.version``; a handler's exception is
  recorded on it.
* Counter ``service_webhooks.deliveries`` (:data:`DELIVERIES`, unit ``{delivery}``) and
  histograms ``service_webhooks.delivery.duration`` (:data:`DELIVERY_DURATION`) and
  ``service_webhooks.handler.duration`` (:data:`HANDLER_DURATION`, only when handlers
  ran), both in seconds. Attributes: ``webhook.outcome``,
  ``http.response.status_code`` and, for verified deliveries, ``webhook.event.name``
  (never the organization: unbounded cardinality).

Nothing recorded holds the body, the signature or a secret.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

try:
    from opentelemetry import metrics, trace
    from opentelemetry.trace import Span, Status, StatusCode
except ImportError as error:  # pragma: no cover - exercised in a test with the module hidden
    from ._extras import missing_extra

    raise missing_extra("otel", "opentelemetry", what=__name__, cause=error) from error

from . import __version__
from ._events import Event
from ._exceptions import ConfigurationError
from ._outcome import DeliveryRecord
from ._receiver import WebhookReceiver

__all__ = [
    "DELIVERIES",
    "DELIVERY_DURATION",
    "DELIVERY_SPAN",
    "HANDLER_DURATION",
    "HANDLER_SPAN",
    "SCOPE",
    "Telemetry",
    "instrument",
    "uninstrument",
]

SCOPE = "service_webhooks"
"""The instrumentation scope name of the tracer and the meter."""
DELIVERY_SPAN = "service_webhooks.delivery"
"""Span around one delivery."""
HANDLER_SPAN = "service_webhooks.handle"
"""Span around an event's handlers."""
DELIVERIES = "service_webhooks.deliveries"
"""Counter of answered deliveries, by outcome and status."""
DELIVERY_DURATION = "service_webhooks.delivery.duration"
"""Histogram of the time to answer a delivery, in seconds."""
HANDLER_DURATION = "service_webhooks.handler.duration"
"""Histogram of the time spent in an event's handlers, in seconds."""

_delivery_span: ContextVar[Span | None] = ContextVar("service_webhooks_span", default=None)


class Telemetry:
    """A :class:`~service_webhooks._reporting.DeliveryTracer` and
    :class:`~service_webhooks._reporting.OutcomeObserver` recording spans and metrics.

    Usually made by :func:`instrument`. Given only as an observer (no tracer), it still
    records the metrics and one span per delivery, started and ended when the answer
    is known (no handler span then).

    Args:
        tracer_provider: Default: the global one (``opentelemetry.trace``).
        meter_provider: Default: the global one (``opentelemetry.metrics``).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(SCOPE, __version__, tracer_provider)
        meter = metrics.get_meter(SCOPE, __version__, meter_provider)
        self._deliveries = meter.create_counter(
            DELIVERIES, unit="{delivery}", description="Webhook deliveries answered."
        )
        self._delivery_duration = meter.create_histogram(
            DELIVERY_DURATION, unit="s", description="Time to answer a webhook delivery."
        )
        self._handler_duration = meter.create_histogram(
            HANDLER_DURATION, unit="s", description="Time spent in a webhook event's handlers."
        )

    def __repr__(self) -> str:
        return "Telemetry()"

    @contextmanager
    def delivery(self) -> Iterator[Span]:
        """The :data:`DELIVERY_SPAN`, current for the whole delivery."""
        with self._tracer.start_as_current_span(DELIVERY_SPAN) as span:
            token = _delivery_span.set(span)
            try:
                yield span
            finally:
                _delivery_span.reset(token)

    @contextmanager
    def handlers(self, event: Event[Any], /) -> Iterator[Span]:
        """The :data:`HANDLER_SPAN`, current while ``event``'s handlers run."""
        attributes: dict[str, str | int] = {
            "webhook.event.name": event.name,
            "webhook.event.version": _version(event.version),
        }
        with self._tracer.start_as_current_span(HANDLER_SPAN, attributes=attributes) as span:
            yield span

    def __call__(self, record: DeliveryRecord, /) -> None:
        """Count the delivery, observe its durations and describe it on its span."""
        labels: dict[str, str | int] = {
            "webhook.outcome": record.reason,
            "http.response.status_code": record.status,
        }
        if record.event_name is not None:
            labels["webhook.event.name"] = record.event_name
        self._deliveries.add(1, labels)
        self._delivery_duration.record(record.duration, labels)
        if record.handler_duration is not None:
            self._handler_duration.record(record.handler_duration, labels)

        span = _delivery_span.get()
        if span is not None:
            _describe(span, record)
            return
        end = time.time_ns()
        start = end - int(record.duration * 1e9)
        span = self._tracer.start_span(DELIVERY_SPAN, start_time=start)
        _describe(span, record)
        span.end(end_time=end)


_INT64 = range(-(2**63), 2**63)


def _version(version: int) -> int | str:
    """``version`` as an attribute value: an int OTLP can carry (int64), else its text.

    The envelope's ``version`` is any JSON integer; an exporter cannot encode a larger
    one (OTLP logs an error for each span and drops the attribute)."""
    return version if version in _INT64 else str(version)


def _describe(span: Span, record: DeliveryRecord) -> None:
    if not span.is_recording():
        return
    attributes: dict[str, str | int] = {
        "webhook.outcome": record.reason,
        "http.response.status_code": record.status,
    }
    optional = {
        "webhook.event.name": record.event_name,
        "webhook.event.version": (
            None if record.event_version is None else _version(record.event_version)
        ),
        "webhook.organization.id": record.organization_id,
        "webhook.idempotency_key.prefix": record.key_prefix,
        "webhook.detail": record.detail or None,
        "error.type": record.error_type,
    }
    attributes.update({name: value for name, value in optional.items() if value is not None})
    span.set_attributes(attributes)
    if record.status >= 500:
        span.set_status(Status(StatusCode.ERROR, record.reason))


def instrument(
    receiver: WebhookReceiver,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> Telemetry:
    """Record spans and metrics for every delivery ``receiver`` handles.

    Sets ``receiver.tracer`` and adds an outcome observer (the same :class:`Telemetry`).

    Args:
        receiver: The receiver to instrument.
        tracer_provider: Default: the global tracer provider.
        meter_provider: Default: the global meter provider.

    Returns:
        The :class:`Telemetry` now attached.

    Raises:
        ConfigurationError: ``receiver`` already has a tracer (call :func:`uninstrument`).
    """
    if receiver.tracer is not None:
        raise ConfigurationError("this receiver already has a tracer; uninstrument it first")
    telemetry = Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    receiver.tracer = telemetry
    receiver.on_outcome(telemetry)
    return telemetry


def uninstrument(receiver: WebhookReceiver) -> None:
    """Detach every :class:`Telemetry` from ``receiver`` (tracer and observers)."""
    if isinstance(receiver.tracer, Telemetry):
        receiver.tracer = None
    for observer in receiver.observers:
        if isinstance(observer, Telemetry):
            receiver.remove_observer(observer)
