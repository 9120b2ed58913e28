"""Handler registration and lookup: ``on``, ``on_any``, ``on_error``, ``remove``.

The rule: a delivery of ``(eventName, version)`` runs, in registration order within
each group,

1. the handlers registered for that event name *and that version*,
2. then those registered for that event name with any version (``version=None``),
3. then the catch-all handlers (``on_any``), which see every event.

When no handler matches, the receiver applies its ``unhandled_status`` policy
(200 by default: spec §6.2 says the list of events grows over time). A handler is a
plain function or a coroutine function taking one
:class:`~service_webhooks._events.Event`; its return value is ignored. Error hooks are
plain functions ``hook(event, error)``, called after a handler raised.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar, overload

from ._events import Event
from ._exceptions import ConfigurationError

__all__ = ["ErrorHook", "Handler", "Registration", "Router", "arun", "run"]

Handler: TypeAlias = Callable[[Event[Any]], Coroutine[Any, Any, None] | None]
"""``handler(event) -> None``, sync or ``async``."""

ErrorHook: TypeAlias = Callable[[Event[Any], BaseException], None]
"""``hook(event, error) -> None``: told of every handler failure; must not raise."""

H = TypeVar("H", bound=Handler)


@dataclass(frozen=True, slots=True)
class Registration:
    """One registered handler and whether calling it returns a coroutine."""

    handler: Handler
    is_async: bool


def _is_async(handler: Callable[..., object]) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - async callable objects too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


class Router:
    """Maps ``(eventName, version)`` to the handlers to run, in order."""

    def __init__(self) -> None:
        self._specific: dict[tuple[str, int | None], list[Registration]] = {}
        self._catch_all: list[Registration] = []
        self._error_hooks: list[ErrorHook] = []
        self._cache: dict[tuple[str, int], tuple[Registration, ...]] = {}

    @overload
    def on(self, event_name: str, handler: H, *, version: int | None = None) -> H: ...
    @overload
    def on(
        self, event_name: str, handler: None = None, *, version: int | None = None
    ) -> Callable[[H], H]: ...
    def on(
        self, event_name: str, handler: H | None = None, *, version: int | None = None
    ) -> H | Callable[[H], H]:
        """Register ``handler`` for ``event_name`` (as a call or as a decorator).

        Args:
            event_name: The envelope's ``eventName``, e.g. ``"note.created"``.
            handler: The handler; omit it to use ``on`` as a decorator.
            version: Only this payload version (spec §9); ``None`` for every version.

        Raises:
            ConfigurationError: ``event_name`` is empty, ``version`` is not a
                positive int, or ``handler`` is not callable.
        """
        if not isinstance(event_name, str) or not event_name:
            raise ConfigurationError("event_name must be a non-empty string")
        if version is not None and (type(version) is not int or version < 1):
            raise ConfigurationError("version must be a positive int or None")

        def register(function: H) -> H:
            self._specific.setdefault((event_name, version), []).append(_registration(function))
            self._cache.clear()
            return function

        return register if handler is None else register(handler)

    @overload
    def on_any(self, handler: H) -> H: ...
    @overload
    def on_any(self, handler: None = None) -> Callable[[H], H]: ...
    def on_any(self, handler: H | None = None) -> H | Callable[[H], H]:
        """Register a catch-all handler: it runs for every event, after the specific ones.

        Unknown event names reach it with their raw decoded ``data`` (spec §6.2).
        """

        def register(function: H) -> H:
            self._catch_all.append(_registration(function))
            self._cache.clear()
            return function

        return register if handler is None else register(handler)

    def on_error(self, hook: ErrorHook) -> ErrorHook:
        """Register a hook told of every handler failure (usable as a decorator).

        Raises:
            ConfigurationError: ``hook`` is a coroutine function (hooks are sync).
        """
        if not callable(hook) or _is_async(hook):
            raise ConfigurationError("an error hook must be a plain (non-async) callable")
        self._error_hooks.append(hook)
        return hook

    def remove(self, handler: Callable[..., object]) -> int:
        """Unregister ``handler`` (or error hook) everywhere; returns how many were removed."""
        removed = 0
        for key in list(self._specific):
            kept = [r for r in self._specific[key] if r.handler is not handler]
            removed += len(self._specific[key]) - len(kept)
            if kept:
                self._specific[key] = kept
            else:
                del self._specific[key]
        kept_any = [r for r in self._catch_all if r.handler is not handler]
        removed += len(self._catch_all) - len(kept_any)
        self._catch_all = kept_any
        kept_hooks = [h for h in self._error_hooks if h is not handler]
        removed += len(self._error_hooks) - len(kept_hooks)
        self._error_hooks = kept_hooks
        self._cache.clear()
        return removed

    def handlers_for(self, event_name: str, version: int) -> tuple[Registration, ...]:
        """The registrations to run for one delivery, in order (empty: unhandled)."""
        key = (event_name, version)
        found = self._cache.get(key)
        if found is None:
            found = (
                *self._specific.get(key, ()),
                *self._specific.get((event_name, None), ()),
                *self._catch_all,
            )
            if len(self._cache) < 4096:  # unknown names come from the sender; stay bounded
                self._cache[key] = found
        return found

    @property
    def error_hooks(self) -> tuple[ErrorHook, ...]:
        """The registered error hooks, in order."""
        return tuple(self._error_hooks)

    def dispatch(self, event: Event[Any]) -> int:
        """Run ``event``'s handlers in order from synchronous code; see the module rule.

        An ``async`` handler is run to completion with :func:`asyncio.run` (so this must
        not be called from inside a running event loop: use :meth:`adispatch` there).
        Unlike the receiver, this does no idempotency and calls no error hook: it is
        the building block for code that already owns the event, such as a task-queue
        worker running an event the receiver handed off.

        Args:
            event: The decoded event (``event.name`` and ``event.version`` select).

        Returns:
            How many handlers ran (0: no handler is registered for it).

        Raises:
            Exception: Whatever a handler raised; the handlers after it do not run.
        """
        handlers = self.handlers_for(event.name, event.version)
        run(handlers, event)
        return len(handlers)

    async def adispatch(self, event: Event[Any], *, sync_in_thread: bool = True) -> int:
        """Async twin of :meth:`dispatch`.

        Args:
            event: The decoded event.
            sync_in_thread: Run plain-function handlers in a worker thread, so a
                blocking handler never stalls the event loop.

        Returns:
            How many handlers ran.
        """
        handlers = self.handlers_for(event.name, event.version)
        await arun(handlers, event, sync_in_thread)
        return len(handlers)

    def has_handlers(self) -> bool:
        """Whether any handler at all is registered (used by configuration checks)."""
        return bool(self._specific or self._catch_all)


def _registration(handler: Handler) -> Registration:
    if not callable(handler):
        raise ConfigurationError(f"handler must be callable, got {type(handler).__name__}")
    return Registration(handler, _is_async(handler))


def run(handlers: tuple[Registration, ...], event: Event[Any]) -> None:
    """Call ``handlers`` in order from synchronous code; async ones run to the end."""
    for registration in handlers:
        result = registration.handler(event)
        if result is not None:  # a coroutine (an async handler), else ignored
            run_coroutine(result)


async def arun(handlers: tuple[Registration, ...], event: Event[Any], in_thread: bool) -> None:
    """Await ``handlers`` in order; plain functions in a worker thread when ``in_thread``.

    A plain function that returns an awaitable anyway (a ``functools.partial`` of a
    coroutine function, say) has it awaited.
    """
    for registration in handlers:
        if registration.is_async:
            await registration.handler(event)  # type: ignore[misc]
            continue
        if in_thread:
            result = await asyncio.to_thread(registration.handler, event)
        else:
            result = registration.handler(event)
        if result is not None and inspect.isawaitable(result):
            await result


def run_coroutine(awaitable: Coroutine[Any, Any, None] | Any) -> None:
    """Run an async handler's coroutine to completion from synchronous code."""
    if not inspect.isawaitable(awaitable):
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_await(awaitable))
        return
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()  # never awaited: no "coroutine was never awaited" warning later
    raise RuntimeError(
        "an async handler was called from process() inside a running event loop; "
        "call aprocess() there instead"
    )


async def _await(awaitable: Any) -> None:
    await awaitable
