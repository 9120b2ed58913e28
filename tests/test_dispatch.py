"""Subscriptions: names, lists, glob patterns, ``model=``, unknown-name checks, order."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from service_webhooks import (
    ConfigurationError,
    Event,
    NoteCreated,
    Outcome,
    Router,
    Unprocessable,
    WebhookReceiver,
)
from service_webhooks._dispatch import KNOWN_EVENT_NAMES, is_pattern, suggest_event_name

Signed = Callable[..., tuple[bytes, str]]
Drive = Callable[..., Outcome]
Body = Callable[..., bytes]


def event(name: str = "note.created", version: int = 1, data: Any = None) -> Event[Any]:
    return Event(name, version, {} if data is None else data, "o-1", 1_700_000_000, "k")


def names(router: Router, name: str, version: int = 1) -> list[str]:
    return [r.handler.__name__ for r in router.handlers_for(name, version)]


def h1(event: Event[Any]) -> None: ...
def h2(event: Event[Any]) -> None: ...
def h3(event: Event[Any]) -> None: ...
def h4(event: Event[Any]) -> None: ...


# -- lists ----------------------------------------------------------------------


def test_a_list_subscribes_one_handler_to_each_name_as_call_and_decorator() -> None:
    router = Router()
    assert router.on(["note.created", "segment.trend.alert"], h1) is h1

    @router.on(("segment.trend.alert", "note.created"))
    def h2(event: Event[Any]) -> None: ...

    assert names(router, "note.created") == ["h1", "h2"]
    assert names(router, "segment.trend.alert") == ["h1", "h2"]
    assert names(router, "other.event") == []


def test_version_applies_to_each_name_of_a_list() -> None:
    router = Router()
    router.on(["note.created", "segment.trend.alert"], h1, version=2)
    assert names(router, "note.created", 2) == names(router, "segment.trend.alert", 2) == ["h1"]
    assert names(router, "note.created", 1) == names(router, "segment.trend.alert", 1) == []


def test_a_name_listed_twice_registers_once() -> None:
    router = Router()
    router.on(["note.created", "note.created"], h1)
    assert names(router, "note.created") == ["h1"]
    assert router.remove(h1) == 1


def test_a_subscription_made_again_adds_nothing() -> None:
    # an app factory registering on a module-level receiver for every app it makes
    router = Router()

    def hook(event: Any, error: BaseException) -> None: ...

    for _ in range(3):
        router.on("note.created", h1)
        router.on("note.*", h1)
        router.on("note.created", h1, version=1)
        router.on_any(h2)
        router.on_error(hook)
    assert names(router, "note.created") == ["h1", "h1", "h1", "h2"]  # three subscriptions
    assert router.error_hooks == (hook,)
    assert router.remove(h1) == 3
    assert router.remove(h2) == 1
    assert router.remove(hook) == 1


def test_the_same_handler_with_another_model_or_version_is_another_subscription() -> None:
    router = Router()
    router.on("note.created", h1)
    router.on("note.created", h1, model=dict)
    router.on("note.created", h1, version=1)
    assert names(router, "note.created") == ["h1", "h1", "h1"]


@pytest.mark.parametrize(
    "bad", [[], "", ["note.created", ""], ["note.created", 3], b"note.created", 7, None]
)
def test_bad_names_are_a_configuration_error(bad: Any) -> None:
    router = Router()
    with pytest.raises(ConfigurationError):
        router.on(bad, h1)
    assert not router.has_handlers()


# -- patterns -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("note.*", ["note.created", "note.comment.added", "note."], ["note", "notes.x", "Note.x"]),
        ("segment.*", ["segment.trend.alert"], ["segment"]),
        ("*.created", ["note.created", "session.note.created"], ["note.created.v2"]),
        ("note.?reated", ["note.created", "note.xreated"], ["note.recreated"]),
        ("note.[cd]*", ["note.created", "note.deleted"], ["note.updated"]),
        ("note.[!c]*", ["note.deleted"], ["note.created"]),
        ("*", ["note.created", "anything", "a.b.c"], []),
    ],
)
def test_glob_patterns_match_the_whole_name_and_star_crosses_dots(
    pattern: str, matching: list[str], not_matching: list[str]
) -> None:
    router = Router()
    router.on(pattern, h1)
    for name in matching:
        assert names(router, name) == ["h1"], name
    for name in not_matching:
        assert names(router, name) == [], name


def test_a_pattern_with_a_version_matches_that_version_only() -> None:
    router = Router()
    router.on("note.*", h1, version=2)
    assert (names(router, "note.created", 2), names(router, "note.created", 1)) == (["h1"], [])


def test_order_is_exact_version_then_any_version_then_patterns_then_catch_all() -> None:
    router = Router()
    router.on_any(h4)
    router.on("note.*", h3)
    router.on("note.created", h2)
    router.on("note.created", h1, version=1)
    assert names(router, "note.created", 1) == ["h1", "h2", "h3", "h4"]
    assert names(router, "note.created", 2) == ["h2", "h3", "h4"]
    assert names(router, "note.deleted", 1) == ["h3", "h4"]


def test_patterns_run_in_registration_order_and_star_runs_before_on_any() -> None:
    router = Router()
    router.on_any(h1)
    router.on("*", h2)
    router.on("note.*", h3)
    assert names(router, "note.created") == ["h2", "h3", "h1"]


def test_lookup_is_cached_and_a_new_pattern_resets_the_cache() -> None:
    router = Router()
    router.on("note.created", h1)
    first = router.handlers_for("note.created", 1)
    assert router.handlers_for("note.created", 1) is first
    router.on("note.*", h2)
    assert names(router, "note.created") == ["h1", "h2"]


def racing_change(router: Router, change: Callable[[], object]) -> None:
    """Make ``change`` land between a lookup and its caching, as a registration made on
    another thread does while a delivery looks its handlers up."""
    lookup = router._lookup

    def lookup_then_change(event_name: str, version: int) -> Any:
        found = lookup(event_name, version)
        change()
        return found

    router._lookup = lookup_then_change  # type: ignore[method-assign]


def test_a_registration_on_another_thread_during_a_lookup_is_not_hidden_by_the_cache() -> None:
    router = Router()
    router.on("note.created", h1)
    racing_change(router, lambda: router.on("note.created", h2))
    assert names(router, "note.created") == ["h1"]  # the racing delivery: its own snapshot
    assert names(router, "note.created") == ["h1", "h2"]  # every later one sees h2


def test_a_removal_on_another_thread_during_a_lookup_is_not_hidden_by_the_cache() -> None:
    router = Router()
    router.on("note.created", h1)
    router.on_any(h2)
    racing_change(router, lambda: router.remove(h1))
    assert names(router, "note.created") == ["h1", "h2"]
    assert names(router, "note.created") == ["h2"]  # h1 no longer runs


def test_remove_unregisters_list_and_pattern_subscriptions() -> None:
    router = Router()
    router.on(["note.created", "segment.trend.alert"], h1)
    router.on("note.*", h1)
    router.on("*", h2)
    assert names(router, "note.created") == ["h1", "h1", "h2"]
    assert router.remove(h1) == 3
    assert names(router, "note.created") == ["h2"]
    assert router.remove(h2) == 1
    assert not router.has_handlers()


def test_a_pattern_alone_counts_as_a_handler() -> None:
    router = Router()
    router.on("note.*", h1)
    assert router.has_handlers()


def test_is_pattern() -> None:
    assert [is_pattern(n) for n in ("note.*", "note.?", "note.[ab]", "note.created")] == [
        True,
        True,
        True,
        False,
    ]


def test_a_pattern_subscription_processes_deliveries_that_were_unhandled(
    receiver: WebhookReceiver, signed: Signed, make_body: Body, drive: Drive
) -> None:
    seen: list[str] = []
    receiver.on("note.*", lambda event: seen.append(event.name))
    assert drive(receiver, *signed()).reason == "processed"
    body = make_body("note.deleted", data={"id": "n-1"})
    assert drive(receiver, *signed(body)).reason == "processed"
    other = make_body("session.exported", data={})
    assert drive(receiver, *signed(other)).reason == "unhandled"
    assert seen == ["note.created", "note.deleted"]


def test_a_list_subscription_through_the_receiver(
    receiver: WebhookReceiver, signed: Signed, make_body: Body, drive: Drive
) -> None:
    seen: list[str] = []
    receiver.on(["note.created", "segment.trend.alert"], lambda event: seen.append(event.name))
    drive(receiver, *signed())
    drive(receiver, *signed(make_body("segment.trend.alert", data={"duration": "DAILY"})))
    assert seen == ["note.created", "segment.trend.alert"]


# -- model= ---------------------------------------------------------------------


class Exported(msgspec.Struct, frozen=True):
    session: str
    rows: int


class Renamed(msgspec.Struct, frozen=True):
    id: str
    title: str


def test_model_decodes_an_unknown_events_data(
    receiver: WebhookReceiver, signed: Signed, make_body: Body, drive: Drive
) -> None:
    seen: list[Any] = []
    receiver.router.declare("session.exported")
    receiver.on("session.exported", seen.append, model=Exported)

    @receiver.on("session.exported", model=Exported)
    async def also(event: Event[Exported]) -> None:
        seen.append(event)

    body = make_body("session.exported", data={"session": "s-1", "rows": 3, "new": True})
    assert drive(receiver, *signed(body)).reason == "processed"
    first, second = seen
    assert first.data == Exported("s-1", 3)
    assert first.data is second.data  # converted once for both handlers
    assert (first.name, first.organization_id, first.body) == (
        "session.exported",
        "o-TEST-na1",
        body,
    )


def test_handlers_without_a_model_keep_the_raw_data() -> None:
    router = Router()
    seen: list[Any] = []
    router.on("*", lambda event: seen.append(event.data))
    router.on("*", lambda event: seen.append(event.data), model=Exported)
    router.dispatch(event("session.exported", data={"session": "s", "rows": 1}))
    assert seen == [{"session": "s", "rows": 1}, Exported("s", 1)]


@pytest.mark.parametrize(
    ("model", "data", "expected"),
    [
        (list[Renamed], [{"id": "a", "title": "t"}], [Renamed("a", "t")]),
        (dict[str, int], {"a": 1}, {"a": 1}),
        (int, 5, 5),
    ],
)
def test_model_accepts_any_type_msgspec_converts_to(model: Any, data: Any, expected: Any) -> None:
    router = Router()
    seen: list[Any] = []
    router.on("*", lambda event: seen.append(event.data), model=model)
    router.dispatch(event("x.y", data=data))
    assert seen == [expected]


def test_data_that_does_not_fit_the_model_is_unprocessable_and_no_handler_runs(
    receiver: WebhookReceiver, signed: Signed, make_body: Body, drive: Drive
) -> None:
    ran: list[str] = []
    errors: list[BaseException] = []
    receiver.router.declare("session.exported")
    receiver.on("session.exported", lambda event: ran.append("plain"))
    receiver.on("session.exported", lambda event: ran.append("typed"), model=Exported)
    receiver.on_error(lambda event, error: errors.append(error))
    body = make_body("session.exported", data={"session": "s-1", "rows": "three"})
    outcome = drive(receiver, *signed(body))
    assert (outcome.status, outcome.reason, ran) == (422, "unprocessable", [])
    [error] = errors
    assert isinstance(error, Unprocessable)
    assert "Exported" in str(error)
    assert "$.rows" in str(error)


def test_dispatch_raises_unprocessable_for_data_that_does_not_fit() -> None:
    router = Router()
    router.on("*", h1, model=Exported)
    with pytest.raises(Unprocessable, match=r"x\.y data does not fit Exported: .*`session`"):
        router.dispatch(event("x.y", data={"rows": 1}))
    with pytest.raises(Unprocessable):
        asyncio.run(router.adispatch(event("x.y", data=[1, 2])))


def test_model_on_a_known_event_is_decoded_from_the_body_with_every_field(
    receiver: WebhookReceiver, signed: Signed, make_body: Body, drive: Drive
) -> None:
    class NoteWithSession(msgspec.Struct):
        id: str
        text: str
        session: str

    seen: list[Event[Any]] = []
    receiver.on("note.created", seen.append)
    receiver.on("note.*", seen.append, model=NoteWithSession)
    data = {"id": "n-1", "author": "ana@example.com", "text": "hi", "session": "s-9"}
    assert drive(receiver, *signed(make_body(data=data))).reason == "processed"
    builtin, mine = seen
    assert builtin.data == NoteCreated(id="n-1", author="ana@example.com", text="hi")
    assert mine.data == NoteWithSession("n-1", "hi", "s-9")


def test_model_on_a_typed_event_without_a_body_converts_its_fields() -> None:
    router = Router()
    seen: list[Any] = []
    router.on("note.created", lambda event: seen.append(event.data), model=dict[str, str])
    router.dispatch(event(data=NoteCreated(id="n", author="a@example.com", text="t")))
    assert seen == [{"id": "n", "author": "a@example.com", "text": "t"}]


def test_a_type_msgspec_cannot_convert_to_is_refused_at_registration() -> None:
    router = Router()
    with pytest.raises(ConfigurationError, match="model"):
        router.on("note.created", h1, model=object())
    with pytest.raises(ConfigurationError, match="model"):
        router.on("note.created", h1, model=threading_lock_type())
    with pytest.raises(ConfigurationError, match="lock"):
        router.on("note.created", h1, model=dict[str, list[threading_lock_type()]])  # type: ignore[misc]
    assert not router.has_handlers()


def threading_lock_type() -> Any:
    import threading

    return type(threading.Lock())


# -- unknown names --------------------------------------------------------------


def test_the_catalogue_is_the_specs() -> None:
    assert frozenset({"note.created", "segment.trend.alert"}) == KNOWN_EVENT_NAMES


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("note.craeted", "note.created"),
        ("note_created", "note.created"),
        ("segment.trend.alerts", "segment.trend.alert"),
        ("note", "note.*"),
        ("segment", "segment.*"),
        ("invoice.paid", None),
    ],
)
def test_suggestions(name: str, suggestion: str | None) -> None:
    assert suggest_event_name(name) == suggestion


def test_an_unknown_name_logs_a_warning_with_a_suggestion(caplog: pytest.LogCaptureFixture) -> None:
    router = Router()
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        router.on("note.craeted", h1)
        router.on(["note", "segment.trend.alert"], h2)
    first, second = caplog.records
    assert first.levelno == logging.WARNING
    assert "'note.craeted'" in first.getMessage()
    assert "'note.created'" in first.getMessage()
    assert "h1" in first.getMessage()
    assert "'note'" in second.getMessage()
    assert "'note.*'" in second.getMessage()
    assert names(router, "note.craeted") == ["h1"]  # still registered: the list grows
    assert router.unknown_event_names() == {"note": "note.*", "note.craeted": "note.created"}


def test_known_names_patterns_and_declared_names_log_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    router = Router()
    router.declare("session.exported", "invoice.paid")
    with caplog.at_level(logging.DEBUG, logger="service_webhooks"):
        router.on(["note.created", "segment.trend.alert", "session.exported"], h1)
        router.on(["note.*", "*", "invoice.paid"], h2)
    assert caplog.records == []
    assert router.unknown_event_names() == {}


def test_declaring_a_name_later_clears_it_from_the_unknown_names() -> None:
    router = Router()
    router.on("invoice.paid", h1)
    assert list(router.unknown_event_names()) == ["invoice.paid"]
    router.declare("invoice.paid")
    assert router.unknown_event_names() == {}


def test_declared_names_are_suggested_too(caplog: pytest.LogCaptureFixture) -> None:
    router = Router()
    router.declare("session.exported")
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        router.on("session.exproted", h1)
    assert "did you mean 'session.exported'?" in caplog.records[0].getMessage()
    assert router.unknown_event_names() == {"session.exproted": "session.exported"}


@pytest.mark.parametrize("bad", ["", "note.*", 3])
def test_declare_takes_names_only(bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        Router().declare(bad)


def test_strict_refuses_an_unknown_name_and_registers_nothing_of_the_list() -> None:
    router = Router(strict=True)
    with pytest.raises(ConfigurationError, match=r"'note\.craeted'.*'note\.created'"):
        router.on(["note.created", "note.craeted"], h1)
    with pytest.raises(ConfigurationError):

        @router.on("note")
        def handler(event: Event[Any]) -> None: ...

    assert not router.has_handlers()
    router.on(["note.created", "note.*"], h1)
    router.declare("invoice.paid")
    router.on("invoice.paid", h2)
    assert names(router, "note.created") == ["h1", "h1"]


def test_the_receivers_strict_argument_builds_a_strict_router(secret: str) -> None:
    receiver = WebhookReceiver(secrets=secret, store="memory", strict=True)
    assert receiver.router.strict
    with pytest.raises(ConfigurationError):
        receiver.on("note.craeted", h1)
    assert not WebhookReceiver(secrets=secret, store="memory").router.strict
    shared = Router()
    assert (
        WebhookReceiver(secrets=secret, store="memory", router=shared, strict=True).router is shared
    )
    assert not shared.strict  # a given router keeps its own setting (documented)
