"""Constructor arguments of WebhookReceiver refused with a ConfigurationError that names
them, and a failing ``idempotency_key`` function reported like a handler's refusal."""

from __future__ import annotations

import functools
import logging
from contextlib import nullcontext
from typing import Any

import pytest

from service_webhooks import ConfigurationError, MemoryStore, Unprocessable, WebhookReceiver, sign
from service_webhooks.inbox import MemoryInbox

SECRET = "whsec-test-0123456789abcdef0123456789abcdef"
ORG = "o-TEST-na1"
BODY = b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a@b.c","text":"hi"}}'


def receiver(**kwargs: Any) -> WebhookReceiver:
    kwargs.setdefault("inbox", False)
    return WebhookReceiver(SECRET, store="memory", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tolerance": "300"}, "tolerance must be a finite number of seconds >= 0"),
        ({"tolerance": True}, "tolerance must be a finite number of seconds >= 0"),
        ({"tolerance": float("nan")}, "tolerance must be a finite number of seconds >= 0"),
        ({"tolerance": float("inf")}, "tolerance must be a finite number of seconds >= 0"),
        ({"tolerance": -1}, "tolerance must be a finite number of seconds >= 0"),
        ({"tolerance": 10**400}, "tolerance must be a finite number of seconds >= 0"),
        ({"max_body_size": "10"}, "max_body_size must be an int"),
        ({"max_body_size": True}, "max_body_size must be an int"),
        ({"max_body_size": 10.0}, "max_body_size must be an int"),
        ({"lease": "5"}, "lease must be a finite number"),
        ({"lease": True}, "lease must be a finite number"),
        ({"lease": float("inf")}, "lease must be a finite number of seconds > 0"),
        ({"lease": float("nan")}, "lease must be a finite number of seconds > 0"),
        ({"lease": 10**400}, "lease must be a finite number of seconds > 0"),
        ({"retention": float("inf")}, "retention must be a finite number of seconds"),
        ({"retention": 10**400}, "retention must be a finite number of seconds"),
        # finite but past any expiry a store can hold (Redis PX raised OverflowError)
        ({"retention": 1e308}, r"retention must be .* <= 31536000000 \(1000 years\)"),
        ({"lease": 1e12}, r"lease must be at most 31536000000 seconds \(1000 years\)"),
        ({"retention": "259200"}, "retention must be a number"),
        ({"retention": True}, "retention must be a number"),
        ({"unhandled_status": "200"}, "unhandled_status must be an int"),
        ({"unhandled_status": True}, "unhandled_status must be an int"),
        ({"unhandled_status": 200.0}, "unhandled_status must be an int"),
        ({"idempotency_key": "x"}, "idempotency_key must be a callable"),
        ({"clock": 1}, "clock must be a callable"),
        ({"tracer": 1}, "tracer must be a DeliveryTracer"),
        ({"tracer": object()}, "tracer must be a DeliveryTracer"),
    ],
)
def test_wrong_arguments_are_refused_by_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        receiver(**kwargs)


async def _async_key(event: Any) -> str:
    return "k"


def _generator_clock() -> Any:
    yield 0.0


class _AsyncObserver:
    async def __call__(self, record: Any) -> None: ...


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"idempotency_key": _async_key}, r"idempotency_key _async_key is async"),
        ({"idempotency_key": lambda: "k"}, r"cannot be called as idempotency_key\(event\)"),
        ({"clock": lambda now: now}, r"clock <lambda> \(signature \(now\)\) cannot be called"),
        ({"clock": _generator_clock}, r"clock _generator_clock is a generator function"),
        ({"unit_of_work": lambda: nullcontext()}, r"cannot be called as unit_of_work\(event\)"),
        ({"unit_of_work": 1}, r"unit_of_work must be a callable"),
        ({"observers": [_AsyncObserver()]}, r"outcome observer _AsyncObserver instance is async"),
        ({"observers": [lambda: None]}, r"cannot be called as observer\(record\)"),
        ({"observers": print}, r"observers must be a list of outcome observers"),
        ({"observers": 3}, r"observers must be a list of outcome observers"),
        ({"success_body": "no"}, r"success_body must be True or False, not 'no'"),
        ({"strict": 1}, r"strict must be True or False, not 1"),
    ],
)
def test_callables_and_flags_that_could_never_work_are_refused_when_made(
    kwargs: dict[str, Any], message: str
) -> None:
    """Each of these was accepted and then failed on every delivery: an async key
    function answered 422 (never retried: the events were lost), a wrong clock raised
    out of ``process``, an async observer never ran, ``success_body="no"`` still sent
    a body."""
    with pytest.raises(ConfigurationError, match=message):
        receiver(**kwargs)


def test_ordinary_callables_stay_accepted() -> None:
    class Key:
        def __call__(self, event: Any, /) -> str:
            return "key-" + event.data.id

    seen: list[Any] = []
    r = receiver(
        idempotency_key=Key(),
        clock=lambda: 1_700_000_000.0,
        unit_of_work=lambda event, *rest: nullcontext(),
        observers=(seen.append,),
        success_body=False,
    )
    r.on("note.created")(lambda event: None)
    outcome = r.process(BODY, sign(BODY, SECRET, ORG, timestamp=1_700_000_000))
    assert (outcome.status, outcome.reason, outcome.body) == (200, "processed", b"")
    assert [record.outcome.reason for record in seen] == ["processed"]


def test_a_tracer_with_only_one_of_its_methods_is_refused() -> None:
    class Half:
        def delivery(self) -> Any:
            return nullcontext()

        handlers = None

    with pytest.raises(ConfigurationError, match="tracer must be a DeliveryTracer"):
        receiver(tracer=Half())


def test_good_numbers_still_pass() -> None:
    class Tracer:
        def delivery(self) -> Any:
            return nullcontext()

        def handlers(self, event: Any) -> Any:
            return nullcontext()

    r = receiver(
        tolerance=30.5, lease=2.5, retention=200_000.0, max_body_size=1000, tracer=Tracer()
    )
    r.on("note.created", lambda event: None)
    assert r.process(BODY, sign(BODY, SECRET, ORG)).reason == "processed"


def test_a_key_function_that_raises_is_a_500_logged_at_error_with_its_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bug in the function: retried (500), so the event is kept until it is fixed;
    a 422 would have told the service to drop it."""
    inbox = MemoryInbox()
    r = WebhookReceiver(
        SECRET,
        store=MemoryStore(),
        inbox=inbox,
        idempotency_key=lambda event: event.data.session_id,
    )
    r.on("note.created", lambda event: None)
    with caplog.at_level(logging.INFO, logger="service_webhooks"):
        outcome = r.process(BODY, sign(BODY, SECRET, ORG))
    assert (outcome.status, outcome.reason) == (500, "configuration")
    [error] = [rec for rec in caplog.records if rec.levelno == logging.ERROR]
    assert "AttributeError" in error.getMessage()
    assert "session_id" in error.getMessage()
    record = inbox.search().items[0]
    assert record.error_type == "AttributeError"
    assert "session_id" in (record.error_message or "")
    assert "AttributeError" in (record.traceback or "")
    assert "AttributeError" in (record.detail or "")


def test_a_key_function_failure_reaches_observers_with_its_type() -> None:
    seen: list[Any] = []

    def boom(event: Any) -> str:
        raise LookupError("no such field")

    r = receiver(idempotency_key=boom, observers=[seen.append])
    r.on("note.created", lambda event: None)
    assert r.process(BODY, sign(BODY, SECRET, ORG)).status == 500
    [record] = seen
    assert record.error_type == "LookupError"
    assert "LookupError: no such field" in record.detail


def test_a_key_function_may_refuse_an_event_with_unprocessable() -> None:
    """Raised on purpose, ``Unprocessable`` is the function's answer, as a handler's."""

    def key(event: Any) -> str:
        raise Unprocessable("no session on this note", status=409)

    r = receiver(idempotency_key=key)
    r.on("note.created", lambda event: None)
    outcome = r.process(BODY, sign(BODY, SECRET, ORG))
    assert (outcome.status, outcome.reason) == (409, "unprocessable")


@pytest.mark.parametrize(
    ("returned", "shown"), [(123, "returned 123 (int)"), ("", "returned '' (str)")]
)
def test_a_key_function_returning_no_str_says_what_it_returned(
    returned: object, shown: str, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[Any] = []
    r = receiver(idempotency_key=lambda event: returned, observers=[seen.append])
    r.on("note.created", lambda event: None)
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        assert r.process(BODY, sign(BODY, SECRET, ORG)).status == 500
    assert f"{shown}, not a non-empty str" in seen[0].detail
    assert any(shown in rec.getMessage() for rec in caplog.records)


@pytest.mark.parametrize("run_async", [False, True], ids=["process", "aprocess"])
@pytest.mark.parametrize(
    ("body", "signature", "message"),
    [
        (BODY.decode(), "sig", r"body must be the exact request body as bytes, not str: pass"),
        (None, "sig", r"body must be .* as bytes, not NoneType"),
        (memoryview(BODY), "sig", r"body must be .* as bytes, not memoryview: pass bytes\(body\)"),
        (BODY, {"Service-Signature": "x"}, r"signature must be the Service-Signature header's"),
        (BODY, ["x"], r"signature must be .* not list"),
    ],
)
async def test_arguments_of_the_wrong_type_are_named(
    body: Any, signature: Any, message: str, run_async: bool
) -> None:
    """A decoded ``str`` body or the whole headers mapping: a TypeError naming the
    argument, not "Strings must be encoded before hashing" from deep inside."""
    r = receiver()
    if signature == "sig":
        signature = sign(BODY, SECRET, ORG)
    with pytest.raises(TypeError, match=message):
        await (r.aprocess(body, signature) if run_async else _now(r.process, body, signature))


async def _now(function: Any, *args: Any) -> Any:
    return function(*args)


MAPPING = r"headers must be \(name, value\) pairs, one per header line, not a mapping \(dict\)"


@pytest.mark.parametrize("run_async", [False, True], ids=["handle", "ahandle"])
async def test_headers_given_as_a_mapping_are_named(run_async: bool) -> None:
    """``handle`` takes one ``(name, value)`` pair per header line; a dict used to fail
    with "too many values to unpack" from inside."""
    r = receiver()
    r.on("note.created")(lambda event: None)
    headers = {"Service-Signature": sign(BODY, SECRET, ORG)}
    handle = r.ahandle if run_async else functools.partial(_now, r.handle)
    with pytest.raises(TypeError, match=MAPPING):
        await handle("POST", headers, _reader(run_async))
    outcome = await handle("POST", list(headers.items()), _reader(run_async))
    assert (outcome.status, outcome.reason) == (200, "processed")


def _reader(run_async: bool) -> Any:
    """``read(size)`` over the body: a coroutine function for ``ahandle``."""
    chunks = iter([BODY, b""])

    async def aread(size: int) -> bytes:
        return next(chunks)

    return aread if run_async else lambda size: next(chunks)


def test_the_largest_tolerance_a_float_holds_is_accepted_and_shown() -> None:
    """An ``int`` beyond a float's range (``10**400``) was accepted, then the receiver's
    ``repr`` raised ``OverflowError``; the largest that fits still works."""
    assert "tolerance=1e+308" in repr(receiver(tolerance=10**308))
