"""Observability: the per-delivery log line, outcome observers, the tracer hook and the
OpenTelemetry instrumentation, through both drivers (process and aprocess)."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import pytest

from service_webhooks import (
    Event,
    MemoryStore,
    Outcome,
    RetryLater,
    StoreError,
    Unprocessable,
    WebhookReceiver,
    default_idempotency_key,
)
from service_webhooks import _receiver as receiver_module
from service_webhooks._outcome import DeliveryRecord
from service_webhooks._reporting import LOG_FIELDS

Signed = Callable[..., tuple[bytes, str]]
Drive = Callable[..., Outcome]
ORG = "o-TEST-na1"


@pytest.fixture
def records(receiver: WebhookReceiver) -> list[DeliveryRecord]:
    seen: list[DeliveryRecord] = []
    receiver.on_outcome(seen.append)
    return seen


def delivery_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if hasattr(r, "webhook_reason")]


class BrokenStore(MemoryStore):
    def claim(self, key: str, token: str, lease: float) -> Any:
        raise ConnectionError("redis went away")

    async def aclaim(self, key: str, token: str, lease: float) -> Any:
        raise ConnectionError("redis went away")


# -- the log line ------------------------------------------------------------------------


def test_one_structured_info_line_per_processed_delivery(
    receiver: WebhookReceiver, signed: Signed, drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.on("note.created", lambda event: None)
    body, header = signed(org="o-42")
    with caplog.at_level(logging.INFO, "service_webhooks"):
        assert drive(receiver, body, header).reason == "processed"
    [line] = delivery_lines(caplog)
    assert (line.name, line.levelno) == ("service_webhooks", logging.INFO)
    fields = {name: getattr(line, name) for name in LOG_FIELDS}
    key = default_idempotency_key("o-42", body)
    assert fields | {"webhook_duration_ms": 0, "webhook_handler_ms": 0} == {
        "webhook_status": 200,
        "webhook_reason": "processed",
        "webhook_event": "note.created",
        "webhook_event_version": 1,
        "webhook_organization": "o-42",
        "webhook_key_prefix": key[:12],
        "webhook_duration_ms": 0,
        "webhook_handler_ms": 0,
        "webhook_error_type": None,
    }
    assert 0 <= fields["webhook_handler_ms"] <= fields["webhook_duration_ms"] < 10_000
    message = line.getMessage()
    assert message.startswith(
        f"service_webhooks: 200 processed event=note.created version=1 org=o-42 key={key[:12]} in "
    )
    assert " ms (handlers " in message
    assert key not in message  # only the prefix


@pytest.mark.parametrize(
    ("header", "reason"),
    [(None, "format"), ("t:1,v:AAAA", "format"), ("o:o-1,t:1,v:AAAA", "signature")],
)
def test_a_refused_request_logs_its_reason_and_detail(
    receiver: WebhookReceiver,
    make_body: Callable[..., bytes],
    drive: Drive,
    caplog: pytest.LogCaptureFixture,
    header: str | None,
    reason: str,
) -> None:
    with caplog.at_level(logging.INFO, "service_webhooks"):
        drive(receiver, make_body(), header)
    [line] = delivery_lines(caplog)
    assert (line.webhook_status, line.webhook_reason) == (401, reason)  # type: ignore[attr-defined]
    assert line.webhook_event is None  # type: ignore[attr-defined]
    assert line.webhook_handler_ms is None  # type: ignore[attr-defined]
    assert line.getMessage().startswith(
        f"service_webhooks: 401 {reason} event=- version=- org=- key=- in "
    )
    assert ": " in line.getMessage().split(" ms", 1)[1]  # the detail follows


@pytest.mark.parametrize(
    ("error", "said"), [(RetryLater(), ""), (RetryLater("queue full"), ": queue full")]
)
def test_a_retry_later_is_logged_with_its_message_or_none(
    receiver: WebhookReceiver,
    signed: Signed,
    drive: Drive,
    caplog: pytest.LogCaptureFixture,
    error: RetryLater,
    said: str,
) -> None:
    def later(event: Event[Any]) -> None:
        raise error

    receiver.on("note.created", later)
    with caplog.at_level(logging.INFO, "service_webhooks"):
        assert drive(receiver, *signed()).reason == "retry_later"
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert line == "service_webhooks: retry_later for note.created" + said  # no dangling ": "


def test_no_line_when_info_is_disabled(
    receiver: WebhookReceiver, signed: Signed, drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.on("note.created", lambda event: None)
    with caplog.at_level(logging.WARNING, "service_webhooks"):
        drive(receiver, *signed())
    assert delivery_lines(caplog) == []


def test_no_record_is_built_when_nobody_listens(
    receiver: WebhookReceiver,
    signed: Signed,
    drive: Drive,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("a record was built")

    monkeypatch.setattr(receiver_module, "DeliveryRecord", refuse)
    receiver.on("note.created", lambda event: None)
    with caplog.at_level(logging.WARNING, "service_webhooks"):
        assert drive(receiver, *signed()).reason == "processed"
        assert drive(receiver, b"{}", None).reason == "format"


# -- observers ---------------------------------------------------------------------------


def test_observer_gets_an_immutable_record(
    receiver: WebhookReceiver, records: list[DeliveryRecord], signed: Signed, drive: Drive
) -> None:
    receiver.on("note.created", lambda event: None)
    body, header = signed()
    outcome = drive(receiver, body, header)
    [record] = records
    assert record.outcome == outcome
    assert (record.status, record.reason, record.event_name, record.organization_id) == (
        200,
        "processed",
        "note.created",
        ORG,
    )
    assert record.event_version == 1
    assert record.key_prefix == default_idempotency_key(ORG, body)[:12]
    assert record.handler_duration is not None
    assert 0 <= record.handler_duration <= record.duration < 10
    assert (record.detail, record.error_type) == ("", None)
    with pytest.raises(AttributeError):
        record.duration = 0.0  # type: ignore[misc]
    assert b"note.created" in msgspec.json.encode(record)  # plain data, easy to ship


def test_every_outcome_reaches_the_observer(
    secret: str,
    signed: Signed,
    make_body: Callable[..., bytes],
    drive: Drive,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.CRITICAL, "service_webhooks")
    seen: list[DeliveryRecord] = []
    receiver = WebhookReceiver(secrets=secret, store="memory", observers=[seen.append])

    @receiver.on("note.created")
    def note(event: Event[Any]) -> None:
        if event.data.text == "boom":
            raise RuntimeError("boom")
        if event.data.text == "refuse":
            raise Unprocessable("not for us")

    receiver.on("test.handoff", _handoff_refused)
    ok = make_body()
    drive(receiver, *signed(ok))
    drive(receiver, *signed(ok))  # duplicate
    drive(receiver, *signed(make_body("nobody.listens", version=3)))
    drive(receiver, *signed(make_body(data={"id": "b", "author": "a", "text": "boom"})))
    drive(receiver, *signed(make_body(data={"id": "r", "author": "a", "text": "refuse"})))
    drive(receiver, *signed(make_body("test.handoff", data={})))
    drive(receiver, *signed(b"[]"))
    drive(receiver, ok, None)
    drive(receiver, ok, None, "GET")
    assert receiver.precheck("PUT") is not None
    assert receiver.precheck("POST", content_length=10**9) is not None
    summary = [
        (r.status, r.reason, r.event_name, r.event_version, r.handler_duration is not None)
        for r in seen
    ]
    assert summary == [
        (200, "processed", "note.created", 1, True),
        (200, "duplicate", "note.created", 1, False),
        (200, "unhandled", "nobody.listens", 3, False),
        (500, "handler_failed", "note.created", 1, True),
        (422, "unprocessable", "note.created", 1, True),
        (503, "store_unavailable", "test.handoff", 1, True),
        (400, "malformed_envelope", None, None, False),
        (401, "format", None, None, False),
        (405, "method_not_allowed", None, None, False),
        (405, "method_not_allowed", None, None, False),
        (413, "payload_too_large", None, None, False),
    ]
    assert [r.error_type for r in seen[3:6]] == ["RuntimeError", "Unprocessable", "StoreError"]
    assert seen[4].detail == "not for us"
    assert seen[2].key_prefix is None  # no claim for nothing to do
    assert all(r.duration >= 0 for r in seen)


def _handoff_refused(event: Event[Any]) -> None:
    raise StoreError("the task queue refused the hand-off")


def test_store_failure_names_the_event_and_the_cause(
    secret: str, signed: Signed, drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, "service_webhooks")
    seen: list[DeliveryRecord] = []
    receiver = WebhookReceiver(secrets=secret, store=BrokenStore(), observers=[seen.append])
    receiver.on("note.created", lambda event: None)
    outcome = drive(receiver, *signed())
    assert (outcome.status, outcome.reason, outcome.event_name) == (
        503,
        "store_unavailable",
        "note.created",
    )
    [record] = seen
    assert (record.error_type, record.detail) == (
        "ConnectionError",
        "the idempotency store is unavailable",
    )
    assert record.key_prefix is not None
    assert "redis went away" not in repr(record)


def test_a_failing_observer_logs_its_own_traceback_not_the_handlers_again(
    receiver: WebhookReceiver, signed: Signed, drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    @receiver.on_outcome
    def broken(record: DeliveryRecord) -> None:
        raise ValueError("observer bug")

    def handler(event: Any) -> None:
        raise KeyError("handler bug")

    receiver.on("note.created", handler)
    with caplog.at_level(logging.ERROR, "service_webhooks"):
        assert drive(receiver, *signed()).status == 500
    [logged] = [r for r in caplog.records if "observer raised" in r.getMessage()]
    text = logging.Formatter().formatException(logged.exc_info)  # type: ignore[arg-type]
    assert "observer bug" in text
    assert "handler bug" not in text  # already logged once, with the handler failure
    assert "During handling" not in text


def test_a_failing_observer_is_logged_and_changes_nothing(
    receiver: WebhookReceiver,
    records: list[DeliveryRecord],
    signed: Signed,
    drive: Drive,
    caplog: pytest.LogCaptureFixture,
) -> None:
    @receiver.on_outcome
    def broken(record: DeliveryRecord) -> None:
        raise ValueError("observer bug")

    receiver.on("note.created", lambda event: None)
    with caplog.at_level(logging.ERROR, "service_webhooks"):
        assert drive(receiver, *signed()).reason == "processed"
    assert "an outcome observer raised" in caplog.text
    assert len(records) == 1
    receiver.remove_observer(broken)
    receiver.remove_observer(broken)  # not registered: no error
    assert receiver.observers == (records.append,)


def test_observers_must_be_callable(secret: str) -> None:
    from service_webhooks import ConfigurationError

    with pytest.raises(ConfigurationError, match="callable"):
        WebhookReceiver(secrets=secret, store="memory", observers=["not callable"])  # type: ignore[list-item]


# -- the tracer hook -------------------------------------------------------------------


class RecordingTracer:
    def __init__(self) -> None:
        self.calls: list[str] = []

    @contextmanager
    def delivery(self) -> Iterator[None]:
        self.calls.append("delivery:enter")
        try:
            yield
        finally:
            self.calls.append("delivery:exit")

    @contextmanager
    def handlers(self, event: Event[Any], /) -> Iterator[None]:
        self.calls.append(f"handlers:enter:{event.name}")
        try:
            yield
        except BaseException as error:
            self.calls.append(f"handlers:raised:{type(error).__name__}")
            raise
        self.calls.append("handlers:exit")


def test_tracer_wraps_the_delivery_and_the_handlers(
    secret: str,
    signed: Signed,
    make_body: Callable[..., bytes],
    drive: Drive,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.CRITICAL, "service_webhooks")
    tracer = RecordingTracer()
    receiver = WebhookReceiver(secrets=secret, store="memory", tracer=tracer)
    receiver.on_outcome(lambda record: tracer.calls.append(f"observer:{record.reason}"))

    @receiver.on("note.created")
    def handler(event: Event[Any]) -> None:
        tracer.calls.append("handler")
        if event.data.text == "boom":
            raise RuntimeError("boom")

    drive(receiver, *signed())
    drive(receiver, b"x", None)
    assert tracer.calls == [
        "delivery:enter",
        "handlers:enter:note.created",
        "handler",
        "handlers:exit",
        "observer:processed",
        "delivery:exit",
        "delivery:enter",
        "observer:format",
        "delivery:exit",
    ]
    tracer.calls.clear()
    boom = make_body(data={"id": "b", "author": "a", "text": "boom"})
    assert drive(receiver, *signed(boom)).status == 500
    assert tracer.calls == [
        "delivery:enter",
        "handlers:enter:note.created",
        "handler",
        "handlers:raised:RuntimeError",
        "observer:handler_failed",
        "delivery:exit",
    ]


# -- OpenTelemetry ---------------------------------------------------------------------

otel_sdk = pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode  # noqa: E402

from service_webhooks import observability  # noqa: E402


class Otel:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def otel() -> Iterator[Otel]:
    providers = Otel()
    yield providers
    providers.tracer_provider.shutdown()
    providers.meter_provider.shutdown()


@pytest.fixture
def instrumented(receiver: WebhookReceiver, otel: Otel) -> WebhookReceiver:
    observability.instrument(
        receiver, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    return receiver


def test_a_delivery_span_with_a_handler_span_that_handler_spans_nest_under(
    instrumented: WebhookReceiver, otel: Otel, signed: Signed, drive: Drive
) -> None:
    tracer = otel.tracer_provider.get_tracer("the-users-app")

    @instrumented.on("note.created")
    def handler(event: Event[Any]) -> None:
        with tracer.start_as_current_span("db.insert"):
            pass

    body, header = signed(org="o-42")
    drive(instrumented, body, header)
    spans = {span.name: span for span in otel.finished()}
    assert sorted(spans) == ["db.insert", "service_webhooks.delivery", "service_webhooks.handle"]
    delivery, handle, insert = (
        spans["service_webhooks.delivery"],
        spans["service_webhooks.handle"],
        spans["db.insert"],
    )
    assert handle.parent is not None
    assert insert.parent is not None
    assert handle.parent.span_id == delivery.context.span_id
    assert insert.parent.span_id == handle.context.span_id
    assert dict(delivery.attributes or {}) == {
        "webhook.outcome": "processed",
        "http.response.status_code": 200,
        "webhook.event.name": "note.created",
        "webhook.event.version": 1,
        "webhook.organization.id": "o-42",
        "webhook.idempotency_key.prefix": default_idempotency_key("o-42", body)[:12],
    }
    assert delivery.status.status_code is StatusCode.UNSET
    assert delivery.instrumentation_scope is not None
    assert delivery.instrumentation_scope.name == "service_webhooks"


@pytest.mark.parametrize(
    ("version", "shown"),
    [(2**63 - 1, 2**63 - 1), (2**63, str(2**63)), (-(2**63) - 1, str(-(2**63) - 1))],
)
def test_a_version_beyond_int64_is_a_string_attribute(
    instrumented: WebhookReceiver,
    otel: Otel,
    signed: Signed,
    make_body: Callable[..., bytes],
    drive: Drive,
    version: int,
    shown: int | str,
) -> None:
    """Any JSON integer is a valid ``version``; OTLP attributes are int64, so a larger
    one would make the exporter log an error per span and drop the attribute."""
    instrumented.on("note.created")(lambda event: None)
    outcome = drive(instrumented, *signed(make_body(version=version)))
    assert (outcome.status, outcome.reason) == (200, "processed")
    spans = {span.name: dict(span.attributes or {}) for span in otel.finished()}
    assert spans["service_webhooks.delivery"]["webhook.event.version"] == shown
    assert spans["service_webhooks.handle"]["webhook.event.version"] == shown


def test_handler_failure_marks_the_spans_and_counts_by_outcome(
    instrumented: WebhookReceiver,
    otel: Otel,
    signed: Signed,
    make_body: Callable[..., bytes],
    drive: Drive,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.CRITICAL, "service_webhooks")

    @instrumented.on("note.created")
    def handler(event: Event[Any]) -> None:
        if event.data.text == "boom":
            raise RuntimeError("boom")

    drive(instrumented, *signed())
    drive(instrumented, *signed())  # duplicate
    drive(instrumented, *signed(make_body(data={"id": "b", "author": "a", "text": "boom"})))
    drive(instrumented, make_body(), None)
    assert instrumented.precheck("GET") is not None  # a span of its own

    spans = otel.finished()
    deliveries = [s for s in spans if s.name == "service_webhooks.delivery"]
    assert [(s.attributes or {})["webhook.outcome"] for s in deliveries] == [
        "processed",
        "duplicate",
        "handler_failed",
        "format",
        "method_not_allowed",
    ]
    failed = deliveries[2]
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "RuntimeError"
    [handle] = [
        s for s in spans if s.name == "service_webhooks.handle" and s.status.status_code.value == 2
    ]
    assert [event.name for event in handle.events] == ["exception"]
    assert (deliveries[3].attributes or {})["webhook.detail"]
    assert "webhook.event.name" not in (deliveries[3].attributes or {})

    counts = {
        (p.attributes["webhook.outcome"], p.attributes["http.response.status_code"]): p.value
        for p in otel.points("service_webhooks.deliveries")
    }
    assert counts == {
        ("processed", 200): 1,
        ("duplicate", 200): 1,
        ("handler_failed", 500): 1,
        ("format", 401): 1,
        ("method_not_allowed", 405): 1,
    }
    handler_counts = {
        p.attributes["webhook.outcome"]: p.count
        for p in otel.points("service_webhooks.handler.duration")
    }
    assert handler_counts == {"processed": 1, "handler_failed": 1}
    assert sum(p.count for p in otel.points("service_webhooks.delivery.duration")) == 5
    assert all(
        "webhook.organization.id" not in p.attributes
        for p in otel.points("service_webhooks.deliveries")
    )


def test_telemetry_as_a_plain_observer_still_makes_spans(
    receiver: WebhookReceiver, otel: Otel, signed: Signed, drive: Drive
) -> None:
    receiver.on("note.created", lambda event: None)
    receiver.on_outcome(
        observability.Telemetry(
            tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
        )
    )
    drive(receiver, *signed())
    [span] = otel.finished()
    assert (span.name, (span.attributes or {})["webhook.outcome"]) == (
        "service_webhooks.delivery",
        "processed",
    )
    assert span.end_time is not None
    assert span.start_time is not None
    assert span.end_time >= span.start_time


def test_instrument_once_then_uninstrument(
    instrumented: WebhookReceiver, otel: Otel, signed: Signed
) -> None:
    from service_webhooks import ConfigurationError

    with pytest.raises(ConfigurationError, match="already has a tracer"):
        observability.instrument(instrumented)
    observability.uninstrument(instrumented)
    assert (instrumented.tracer, instrumented.observers) == (None, ())
    instrumented.process(*signed())
    assert otel.finished() == []


def test_without_opentelemetry_the_import_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "service_webhooks.observability")
    with pytest.raises(ImportError, match=r"service-webhooks\[otel\]"):
        importlib.import_module("service_webhooks.observability")


def test_the_core_does_not_import_opentelemetry() -> None:
    import subprocess

    code = (
        "import sys, service_webhooks, service_webhooks._receiver;"
        "print(any(m.startswith('opentelemetry') for m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
