"""Registration refuses handlers and error hooks that could never run as called.

A generator function registered as a handler used to be accepted: calling it only made a
generator, which was dropped, so the delivery was answered 200 ``processed`` and the
event was lost. A callable that cannot take the event as its one positional argument
used to be accepted too, and then failed every delivery with 500 ``handler_failed``.
Both are now refused with ``ConfigurationError`` when registered.

Also here: an async handler's error under sync ``process()`` no longer carries the
"no running event loop" ``RuntimeError`` as its ``__context__``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import typing
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar, cast
from unittest.mock import AsyncMock, Mock

import pytest

from service_webhooks import ConfigurationError, Event, MemoryStore, Router, WebhookReceiver, sign
from service_webhooks.inbox import MemoryInbox

SECRET = "whsec-registration-misuse"
ORG = "o-MISUSE"
BODY = json.dumps(
    {
        "eventName": "note.created",
        "version": 1,
        "data": {"id": "n-1", "author": "a@b.c", "text": "hi"},
    }
).encode()


def make_receiver(**options: Any) -> WebhookReceiver:
    options.setdefault("store", MemoryStore())
    options.setdefault("inbox", False)
    return WebhookReceiver(SECRET, **options)


def deliver(receiver: WebhookReceiver) -> Any:
    return receiver.process(BODY, sign(BODY, SECRET, ORG))


# -- what registers handlers ----------------------------------------------------------


def via_on(router: Router, handler: Any) -> Any:
    return router.on("note.created", handler)


def via_on_decorator(router: Router, handler: Any) -> Any:
    return router.on("note.created")(handler)


def via_on_pattern(router: Router, handler: Any) -> Any:
    return router.on(["note.*", "segment.trend.alert"], handler)


def via_on_any(router: Router, handler: Any) -> Any:
    return router.on_any(handler)


def via_on_any_decorator(router: Router, handler: Any) -> Any:
    return router.on_any()(handler)


def via_receiver_on(router: Router, handler: Any) -> Any:
    return make_receiver(router=router).on("note.created", handler)


def via_receiver_on_any(router: Router, handler: Any) -> Any:
    return make_receiver(router=router).on_any(handler)


REGISTER = [
    via_on,
    via_on_decorator,
    via_on_pattern,
    via_on_any,
    via_on_any_decorator,
    via_receiver_on,
    via_receiver_on_any,
]


def registered(router: Router) -> bool:
    return router.has_handlers()


# -- generator handlers ---------------------------------------------------------------


def gen_handler(event: Event[Any]) -> Iterator[None]:
    yield


async def agen_handler(event: Event[Any]) -> AsyncIterator[None]:
    yield


def gen_two(event: Event[Any], extra: int) -> Iterator[None]:
    yield


async def agen_two(event: Event[Any], extra: int) -> AsyncIterator[None]:
    yield


class GenCall:
    def __call__(self, event: Event[Any]) -> Iterator[None]:
        yield


class AsyncGenCall:
    async def __call__(self, event: Event[Any]) -> AsyncIterator[None]:
        yield


class GenMethods:
    def handle(self, event: Event[Any]) -> Iterator[None]:
        yield

    async def ahandle(self, event: Event[Any]) -> AsyncIterator[None]:
        yield


GENERATORS: dict[str, tuple[Callable[..., Any], str, str]] = {
    # id: (handler, the name the message holds, the kind it names)
    "def-yield": (gen_handler, "gen_handler", "is a generator function"),
    "async-def-yield": (agen_handler, "agen_handler", "is an async generator function"),
    "callable-object": (GenCall(), "GenCall instance's __call__", "is a generator function"),
    "async-callable-object": (
        AsyncGenCall(),
        "AsyncGenCall instance's __call__",
        "is an async generator function",
    ),
    "partial": (
        functools.partial(gen_two, extra=1),
        "functools.partial(gen_two) wraps gen_two, which",
        "is a generator function",
    ),
    "async-partial": (
        functools.partial(agen_two, extra=1),
        "functools.partial(agen_two) wraps agen_two, which",
        "is an async generator function",
    ),
    "partial-of-partial": (
        functools.partial(functools.partial(gen_two), extra=1),  # flattened by Python
        "functools.partial(gen_two) wraps gen_two, which",
        "is a generator function",
    ),
    "partial-of-callable-object": (
        functools.partial(GenCall()),
        "functools.partial(GenCall instance) wraps GenCall instance's __call__, which",
        "is a generator function",
    ),
    "bound-method": (GenMethods().handle, "GenMethods.handle", "is a generator function"),
    "async-bound-method": (
        GenMethods().ahandle,
        "GenMethods.ahandle",
        "is an async generator function",
    ),
}


@pytest.mark.parametrize("register", REGISTER)
@pytest.mark.parametrize("case", list(GENERATORS))
def test_a_generator_handler_is_refused_naming_it(register: Any, case: str) -> None:
    handler, label, kind = GENERATORS[case]
    router = Router()
    with pytest.raises(ConfigurationError) as refused:
        register(router, handler)
    message = str(refused.value)
    assert f"handler {label} {kind}" in message
    assert "must return None" in message
    assert "`async def` without `yield`" in message
    assert not registered(router)


@pytest.mark.parametrize("kind", ["def", "async def"])
def test_a_generator_handler_no_longer_loses_the_event_silently(kind: str) -> None:
    """The trial: registered fine, delivery answered 200 processed, body never ran."""
    ran: list[int] = []

    def h(event: Event[Any]) -> Iterator[None]:
        ran.append(1)
        yield

    async def ah(event: Event[Any]) -> AsyncIterator[None]:
        ran.append(1)
        yield

    handler: Any = h if kind == "def" else ah
    receiver = make_receiver()
    with pytest.raises(ConfigurationError, match=r"\.a?h is an? (async )?generator function"):
        receiver.on("note.created")(handler)
    outcome = deliver(receiver)
    assert (outcome.status, outcome.reason) == (200, "unhandled")
    assert ran == []


def test_the_handoff_router_refuses_a_generator_handler_too() -> None:
    celery = pytest.importorskip("celery")
    from service_webhooks.handoff import CeleryHandoff

    app = celery.Celery("misuse", broker="memory://")
    handoff = CeleryHandoff(app, task_name="misuse.handle")
    generator: Any = gen_handler
    async_generator: Any = agen_handler
    no_parameter: Any = takes_nothing
    with pytest.raises(ConfigurationError, match="gen_handler is a generator function"):
        handoff.on("note.created", generator)
    with pytest.raises(ConfigurationError, match="agen_handler is an async generator"):
        handoff.on_any(async_generator)
    with pytest.raises(ConfigurationError, match="cannot be called as handler"):
        handoff.on("note.created", no_parameter)
    assert not handoff.router.has_handlers()


# -- signatures -----------------------------------------------------------------------


def takes_nothing() -> None: ...


def takes_two(event: Event[Any], other: object) -> None: ...


def keyword_only(*, event: Event[Any]) -> None: ...


async def async_takes_nothing() -> None: ...


class NoArgumentInit:
    def __init__(self) -> None: ...


class NoArgumentCall:
    def __call__(self) -> None: ...


class Methods:
    def no_event(self) -> None: ...


WRONG_SIGNATURES: dict[str, tuple[Callable[..., Any], str, str]] = {
    # id: (handler, the name the message holds, the problem inspect reports)
    "no-parameter": (takes_nothing, "takes_nothing", "too many positional arguments"),
    "async-no-parameter": (
        async_takes_nothing,
        "async_takes_nothing",
        "too many positional arguments",
    ),
    "lambda-no-parameter": (lambda: None, "<lambda>", "too many positional arguments"),
    "two-required": (takes_two, "takes_two", "missing a required argument: 'other'"),
    "keyword-only": (keyword_only, "keyword_only", "too many positional arguments"),
    "class-init-takes-none": (NoArgumentInit, "NoArgumentInit", "too many positional"),
    "callable-object": (NoArgumentCall(), "NoArgumentCall instance", "too many positional"),
    "bound-method": (Methods().no_event, "Methods.no_event", "too many positional arguments"),
    "partial-binding-the-only-one": (
        functools.partial(cast(Any, takes_two), 1, 2),
        "functools.partial(takes_two)",
        "too many positional arguments",
    ),
}


@pytest.mark.parametrize("register", REGISTER)
@pytest.mark.parametrize("case", list(WRONG_SIGNATURES))
def test_a_handler_that_cannot_take_the_event_is_refused_naming_it(
    register: Any, case: str
) -> None:
    handler, label, problem = WRONG_SIGNATURES[case]
    router = Router()
    with pytest.raises(ConfigurationError) as refused:
        register(router, handler)
    message = str(refused.value)
    assert f"handler {label}" in message
    assert "cannot be called as handler(event)" in message
    assert problem in message
    assert not registered(router)


def test_a_handler_with_no_parameter_no_longer_fails_every_delivery() -> None:
    """The trial: registered fine, then every delivery was 500 handler_failed."""
    receiver = make_receiver()
    handler: Any = takes_nothing
    with pytest.raises(ConfigurationError, match=r"takes_nothing \(signature \(\)\)"):
        receiver.on("note.created", handler)
    assert deliver(receiver).reason == "unhandled"


# -- what stays accepted --------------------------------------------------------------


class SyncCall:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, event: Event[Any]) -> None:
        self.seen.append(event.name)


class AsyncCall:
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, event: Event[Any]) -> None:
        self.seen.append(event.name)


class Handlers:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def handle(self, event: Event[Any]) -> None:
        self.seen.append("handle")

    async def ahandle(self, event: Event[Any]) -> None:
        self.seen.append("ahandle")


class TakesTheEvent:
    made: list[str] = []

    def __init__(self, event: Event[Any]) -> None:
        TakesTheEvent.made.append(event.name)


def test_ordinary_callables_stay_accepted_and_run() -> None:
    seen: list[str] = []

    async def with_extra(event: Event[Any], extra: str) -> None:
        seen.append(extra)

    def with_default(event: Event[Any], extra: str = "default") -> None:
        seen.append(extra)

    def variadic(*args: Any, **kwargs: Any) -> None:
        seen.append(f"variadic {len(args)}")

    def positional_only(event: Event[Any], /) -> None:
        seen.append("positional_only")

    sync_object, async_object, methods = SyncCall(), AsyncCall(), Handlers()
    mock, async_mock = Mock(return_value=None), AsyncMock(return_value=None)
    TakesTheEvent.made.clear()
    receiver = make_receiver()
    handlers: tuple[Any, ...] = (
        sync_object,
        async_object,
        functools.partial(with_extra, extra="async partial"),
        functools.partial(with_extra, extra="partial"),
        methods.handle,
        methods.ahandle,
        with_default,
        variadic,
        positional_only,
        lambda event: seen.append("lambda"),
        mock,
        async_mock,
        TakesTheEvent,
    )
    for handler in handlers:
        receiver.on("note.created", handler)
    receiver.on_any(functools.partial(with_default, extra="on_any"))
    outcome = deliver(receiver)
    assert (outcome.status, outcome.reason) == (200, "processed")
    assert sync_object.seen == async_object.seen == ["note.created"]
    assert methods.seen == ["handle", "ahandle"]
    assert seen == [
        "async partial",
        "partial",
        "default",
        "variadic 1",
        "positional_only",
        "lambda",
        "on_any",
    ]
    mock.assert_called_once()
    async_mock.assert_awaited_once()
    assert TakesTheEvent.made == ["note.created"]


def test_a_callable_without_a_signature_python_can_tell_is_accepted() -> None:
    """``inspect.signature`` raises for it: the check is skipped, not failed."""

    class Opaque:
        @property
        def __signature__(self) -> Any:
            raise ValueError("no signature")

        def __call__(self, event: Event[Any]) -> None: ...

    handler = Opaque()
    with pytest.raises(ValueError, match="no signature"):
        inspect.signature(handler)
    router = Router()
    assert router.on("note.created", handler) is handler
    assert router.on_any(print) is print  # a builtin taking *args


# -- error hooks ----------------------------------------------------------------------


def hook_one(event: Event[Any]) -> None: ...


def hook_three(event: Event[Any], error: BaseException, more: object) -> None: ...


def hook_gen(event: Event[Any], error: BaseException) -> Iterator[None]:
    yield


class GenHook:
    def __call__(self, event: Event[Any], error: BaseException) -> Iterator[None]:
        yield


@pytest.mark.parametrize(
    ("hook", "label", "problem"),
    [
        (hook_one, "hook_one", "too many positional arguments"),
        (hook_three, "hook_three", "missing a required argument: 'more'"),
        (takes_nothing, "takes_nothing", "too many positional arguments"),
        (lambda event: None, "<lambda>", "too many positional arguments"),
        (keyword_only, "keyword_only", "too many positional arguments"),
    ],
)
def test_an_error_hook_that_cannot_take_event_and_error_is_refused(
    hook: Any, label: str, problem: str
) -> None:
    receiver = make_receiver()
    with pytest.raises(ConfigurationError) as refused:
        receiver.on_error(hook)
    message = str(refused.value)
    assert f"error hook {label}" in message
    assert "cannot be called as hook(event, error)" in message
    assert problem in message
    assert receiver.router.error_hooks == ()


@pytest.mark.parametrize(
    ("hook", "label"), [(hook_gen, "hook_gen"), (GenHook(), "GenHook instance's __call__")]
)
def test_a_generator_error_hook_is_refused(hook: Any, label: str) -> None:
    router = Router()
    with pytest.raises(ConfigurationError, match="generator function") as refused:
        router.on_error(hook)
    assert f"error hook {label}" in str(refused.value)
    assert router.error_hooks == ()


def test_ordinary_error_hooks_stay_accepted_and_are_called() -> None:
    seen: list[str] = []

    def with_default(event: Event[Any], error: BaseException, tag: str = "default") -> None:
        seen.append(tag)

    receiver = make_receiver()
    receiver.on_error(lambda event, error: seen.append("lambda"))
    receiver.on_error(functools.partial(hook_three, more=1))
    receiver.on_error(with_default)
    receiver.on_error(lambda *args: seen.append(f"variadic {len(args)}"))
    receiver.on_error(Mock(return_value=None))

    @receiver.on("note.created")
    def broken(event: Event[Any]) -> None:
        raise ValueError("boom")

    assert deliver(receiver).reason == "handler_failed"
    assert seen == ["lambda", "default", "variadic 2"]


def test_on_error_returns_the_hook_typed_as_given() -> None:
    """``on_error`` hands the hook back unchanged and is annotated so (a TypeVar, as
    ``on``, ``on_any`` and ``on_outcome`` are): a decorated hook keeps its own type
    under mypy instead of collapsing to the ``ErrorHook`` alias."""

    class Hook:
        def __call__(self, event: Event[Any], error: BaseException) -> None: ...

    hook = Hook()
    assert make_receiver().on_error(hook) is hook
    hints = typing.get_type_hints(Router.on_error)
    assert isinstance(hints["return"], TypeVar)
    assert hints["return"] is hints["hook"]


# -- an async handler's error under sync process() ------------------------------------


def test_an_async_handler_error_under_process_has_no_event_loop_context(
    caplog: pytest.LogCaptureFixture,
) -> None:
    errors: list[BaseException] = []
    inbox = MemoryInbox()
    receiver = make_receiver(inbox=inbox)
    receiver.on_error(lambda event, error: errors.append(error))

    @receiver.on("note.created")
    async def broken(event: Event[Any]) -> None:
        raise ValueError("the async handler broke")

    with caplog.at_level(logging.ERROR, logger="service_webhooks"):
        outcome = deliver(receiver)
    assert (outcome.status, outcome.reason) == (500, "handler_failed")
    [error] = errors
    assert isinstance(error, ValueError)
    assert error.__context__ is None
    assert error.__cause__ is None
    logged = caplog.text
    assert "ValueError: the async handler broke" in logged
    assert "no running event loop" not in logged
    assert "During handling of the above exception" not in logged
    [record] = inbox.search().items
    assert record.traceback is not None
    assert record.traceback.rstrip().endswith("ValueError: the async handler broke")
    assert "no running event loop" not in record.traceback
    assert "During handling" not in record.traceback


def test_router_dispatch_raises_an_async_handler_error_without_context() -> None:
    router = Router()

    @router.on("note.created")
    async def broken(event: Event[Any]) -> None:
        raise ValueError("broke")

    event: Event[Any] = Event("note.created", 1, {}, "o-1", 1_700_000_000, "k")
    with pytest.raises(ValueError, match="broke") as raised:
        router.dispatch(event)
    assert raised.value.__context__ is None


# -- a generator that registration cannot see --------------------------------------------


def hides_a_generator(function: Callable[..., Any]) -> Callable[[Event[Any]], Any]:
    """A decorator whose plain wrapper returns what it wraps returns: registration sees a
    plain function, so only the call can show that the body never ran."""

    def wrapper(event: Event[Any]) -> Any:
        return function(event)

    return wrapper


@pytest.mark.parametrize("kind", ["generator", "async generator"])
@pytest.mark.parametrize("driver", ["process", "aprocess", "aprocess-no-thread"])
def test_a_handler_returning_a_generator_fails_retryably(kind: str, driver: str) -> None:
    """Answered 500 with the claim released (the retry runs it), never 200 processed."""
    ran: list[str] = []

    def body(event: Event[Any]) -> Iterator[None]:
        ran.append("body")
        yield

    async def abody(event: Event[Any]) -> AsyncIterator[None]:
        ran.append("body")
        yield

    store = MemoryStore()
    receiver = make_receiver(store=store, sync_handlers_in_thread=driver != "aprocess-no-thread")
    receiver.on("note.created", hides_a_generator(body if kind == "generator" else abody))
    header = sign(BODY, SECRET, ORG)
    if driver == "process":
        outcome = receiver.process(BODY, header)
    else:
        outcome = asyncio.run(receiver.aprocess(BODY, header))
    assert (outcome.status, outcome.reason) == (500, "handler_failed")
    assert ran == []
    assert len(store) == 0  # released: the service's retry processes it
    fixed = make_receiver(store=store)
    fixed.on("note.created", lambda event: ran.append("fixed"))
    assert fixed.process(BODY, header).status == 200
    assert ran == ["fixed"]


def test_the_generator_error_names_the_fault(caplog: pytest.LogCaptureFixture) -> None:
    receiver = make_receiver()
    receiver.on("note.created", hides_a_generator(gen_handler))
    with caplog.at_level(logging.ERROR, logger="service_webhooks"):
        assert deliver(receiver).status == 500
    failure = next(r for r in caplog.records if r.exc_info)
    assert failure.exc_info is not None
    assert isinstance(failure.exc_info[1], TypeError)
    assert "returned a generator, so its body never ran" in str(failure.exc_info[1])


def test_other_results_of_a_sync_handler_are_still_ignored() -> None:
    receiver = make_receiver()
    receiver.on("note.created", lambda event: iter([1, 2]))  # an iterator, not a generator
    receiver.on("note.created", lambda event: "done")
    assert deliver(receiver).status == 200
