"""Handler registration and lookup: ``on``, ``on_any``, ``on_error``, ``remove``.

What ``on`` subscribes to:

* an event name, ``on("note.created")``;
* a list of names, ``on(["note.created", "segment.trend.alert"])``: one registration
  per name (a name listed twice counts once), ``version=`` and ``model=`` apply to each;
* a glob pattern, ``on("note.*")``: any name holding ``*``, ``?`` or ``[`` is a pattern,
  matched against the whole ``eventName`` with :func:`fnmatch.fnmatchcase`
  (case-sensitive). ``*`` matches any run of characters *including dots*, so
  ``"note.*"`` matches ``note.created`` and a future ``note.comment.added``, and
  ``"segment.*"`` matches ``segment.trend.alert``. ``on("*")`` matches every event like
  :meth:`Router.on_any`, but it runs in the pattern group (before the catch-all
  handlers) and honours ``version=`` and ``model=``.

The rule: a delivery of ``(eventName, version)`` runs, in registration order within
each group, from the most specific subscription to the least,

1. the handlers registered for that event name *and that version*,
2. then those registered for that event name with any version (``version=None``),
3. then the pattern handlers whose pattern matches the name (and whose ``version``,
   if given, is the delivery's),
4. then the catch-all handlers (``on_any``), which see every event.

Each registration runs once: a handler subscribed both by name and by a pattern that
matches it runs twice. The same subscription made again (the same handler, name or
pattern, ``version`` and ``model``; or ``on_any``/``on_error`` of the same function)
adds nothing: an app factory that registers on a module-level receiver for every app it
makes still runs each handler once per event. The lookup is cached per
``(eventName, version)``. Registering and removing may happen while deliveries run on
other threads (after the app started serving): a delivery already running keeps the
handlers it looked up, and every delivery that starts after the change sees it.

Names the spec does not list (spec §6.2 catalogue: :data:`KNOWN_EVENT_NAMES`, which the
service says will grow) are accepted, since new events come without a new library
release, but such a name is most often a typo (``"note.craeted"``) or a prefix meant as a
pattern (``"note"``), and it would never match: the delivery would be answered
``unhandled``. So registering one logs a WARNING on the ``service_webhooks`` logger that
suggests the closest known name; ``Router(strict=True)`` raises
:class:`~service_webhooks.ConfigurationError` instead. :meth:`Router.declare` names new
events so they are accepted silently; patterns are never checked.

``model=``: a handler registered with ``on(name, model=MyStruct)`` receives the event
with ``data`` converted to ``MyStruct`` (any type msgspec can convert to: a Struct, a
dataclass, ``list[Item]``...). It is meant for events this library has no model for,
whose ``data`` arrives as plain JSON values: those are converted with
:func:`msgspec.convert`. For an event the library already types (:data:`EVENT_MODELS`),
``data`` is decoded again from the raw body, so fields the built-in model ignores reach
your model too. Every model a delivery needs is converted once per delivery (shared by
the handlers with the same model) and *before the first handler runs*, so data that does
not fit fails the delivery with no handler's side effect: it raises
:class:`~service_webhooks.Unprocessable` (answered 422; the service does not retry), with
a message naming the model and msgspec's error.

When no handler matches, the receiver applies its ``unhandled_status`` policy
(200 by default: spec §6.2 says the list of events grows over time). A handler is a
plain function or a coroutine function taking one
:class:`~service_webhooks._events.Event`; its return value is ignored. Error hooks are
plain functions ``hook(event, error)``, called after a handler raised.

Registration refuses, with :class:`~service_webhooks.ConfigurationError`, what could
never run as a handler: a generator or async generator function (also as the
``__call__`` of a callable object, or inside :func:`functools.partial`: calling one only
creates a generator, so its body would never run and every event would be lost while
answered ``processed``), and a callable whose signature cannot take the event as its one
positional argument (checked with :func:`inspect.signature` when Python can tell it;
an error hook must take ``(event, error)``).
"""

from __future__ import annotations

import asyncio
import difflib
import fnmatch
import functools
import inspect
import logging
import re
import threading
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar, overload

import msgspec

from ._events import EVENT_MODELS, Event
from ._exceptions import ConfigurationError, Unprocessable
from ._reporting import printable
from ._threads import ToThread, run_in_thread

__all__ = [
    "KNOWN_EVENT_NAMES",
    "ErrorHook",
    "Handler",
    "Registration",
    "Router",
    "arun",
    "is_pattern",
    "run",
    "suggest_event_name",
]

logger = logging.getLogger("service_webhooks")

Handler: TypeAlias = Callable[[Event[Any]], Coroutine[Any, Any, None] | None]
"""``handler(event) -> None``, sync or ``async``."""

ErrorHook: TypeAlias = Callable[[Event[Any], BaseException], None]
"""``hook(event, error) -> None``: told of every handler failure; must not raise."""

H = TypeVar("H", bound=Handler)
E = TypeVar("E", bound=ErrorHook)
T = TypeVar("T")

KNOWN_EVENT_NAMES: frozenset[str] = frozenset(name for name, _ in EVENT_MODELS)
"""The event names of the spec's catalogue (spec §6.2): ``note.created``,
``segment.trend.alert``."""

_PATTERN_CHARACTERS = frozenset("*?[")
_CACHE_SIZE = 4096  # unknown names come from the sender; stay bounded


def is_pattern(name: str) -> bool:
    """Whether ``name`` is a glob pattern: it holds ``*``, ``?`` or ``[``."""
    return not _PATTERN_CHARACTERS.isdisjoint(name)


def suggest_event_name(name: str, known: Iterable[str] = KNOWN_EVENT_NAMES) -> str | None:
    """The subscription ``name`` was most likely meant to be, or ``None``.

    ``"note.craeted"`` -> ``"note.created"`` (closest by :mod:`difflib`);
    ``"note"`` -> ``"note.*"`` (a prefix of known names, meant as a pattern).
    """
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    if any(candidate.startswith(name + ".") for candidate in names):
        return name + ".*"
    return None


@dataclass(frozen=True, slots=True)
class Registration:
    """One registered handler, whether calling it returns a coroutine, and its model.

    Attributes:
        handler: The handler.
        is_async: Calling it returns a coroutine.
        model: The type ``event.data`` is converted to before the call (``model=``),
            or ``None`` to pass the event unchanged.
    """

    handler: Handler
    is_async: bool
    model: Any = None


@dataclass(frozen=True, slots=True)
class _PatternSubscription:
    pattern: str
    matches: Callable[[str], object]
    version: int | None
    registration: Registration


class _Data(msgspec.Struct, Generic[T]):
    """An envelope read for its ``data`` only (the other fields are ignored)."""

    data: T


def _is_async(handler: Callable[..., object]) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - async callable objects too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


class Router:
    """Maps ``(eventName, version)`` to the handlers to run, in order (see the module rule).

    Args:
        strict: Registering a handler for a name that is neither a known event name
            (:data:`KNOWN_EVENT_NAMES` or :meth:`declare`) nor a pattern raises
            :class:`~service_webhooks.ConfigurationError` instead of logging a warning.
    """

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict
        self._specific: dict[tuple[str, int | None], list[Registration]] = {}
        self._patterns: list[_PatternSubscription] = []
        self._catch_all: list[Registration] = []
        self._error_hooks: list[ErrorHook] = []
        self._declared: set[str] = set()
        self._cache: dict[tuple[str, int], tuple[Registration, ...]] = {}
        # bumped by every change of the subscriptions (under _cache_lock): a lookup that
        # started before a change made on another thread is not cached (see handlers_for)
        self._generation = 0
        self._cache_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Router(strict={self.strict})"

    @overload
    def on(
        self,
        event_name: str | Iterable[str],
        handler: H,
        *,
        version: int | None = None,
        model: Any = None,
    ) -> H: ...
    @overload
    def on(
        self,
        event_name: str | Iterable[str],
        handler: None = None,
        *,
        version: int | None = None,
        model: Any = None,
    ) -> Callable[[H], H]: ...
    def on(
        self,
        event_name: str | Iterable[str],
        handler: H | None = None,
        *,
        version: int | None = None,
        model: Any = None,
    ) -> H | Callable[[H], H]:
        """Register ``handler`` for ``event_name`` (as a call or as a decorator).

        Args:
            event_name: The envelope's ``eventName`` (``"note.created"``), a glob
                pattern (``"note.*"``) or a list of either; see the module docstring.
            handler: The handler; omit it to use ``on`` as a decorator.
            version: Only this payload version (spec §9); ``None`` for every version.
            model: Convert ``event.data`` to this type (a msgspec Struct or anything
                :func:`msgspec.convert` accepts) before calling ``handler``; data that
                does not fit raises :class:`~service_webhooks.Unprocessable` (422).

        Raises:
            ConfigurationError: ``event_name`` is empty (or an empty list, or holds a
                non-string), ``version`` is not a positive int, ``model`` is not a type
                msgspec can convert to, ``handler`` is not callable, is a generator or
                async generator function, or cannot be called with one positional
                argument (the event), or (``strict``) a name is neither known nor a
                pattern.
        """
        names = _names(event_name)
        if version is not None and (type(version) is not int or version < 1):
            raise ConfigurationError("version must be a positive int or None")
        if model is not None:
            _check_model(model)

        def register(function: H) -> H:
            registration = _registration(function, model)
            unknown = [name for name in names if not self._known(name)]
            if unknown and self.strict:
                raise ConfigurationError(_unknown_message(unknown[0], function, self._declared))
            for name in unknown:
                logger.warning(
                    "service_webhooks: %s",
                    printable(_unknown_message(name, function, self._declared)),
                )
            for name in names:  # a subscription made again is not added again
                if is_pattern(name):
                    matches = re.compile(fnmatch.translate(name)).match
                    subscription = _PatternSubscription(name, matches, version, registration)
                    if subscription not in self._patterns:
                        self._patterns.append(subscription)
                else:
                    registrations = self._specific.setdefault((name, version), [])
                    if registration not in registrations:
                        registrations.append(registration)
            self._changed()
            return function

        return register if handler is None else register(handler)

    @overload
    def on_any(self, handler: H) -> H: ...
    @overload
    def on_any(self, handler: None = None) -> Callable[[H], H]: ...
    def on_any(self, handler: H | None = None) -> H | Callable[[H], H]:
        """Register a catch-all handler: it runs for every event, after the others.

        Unknown event names reach it with their raw decoded ``data`` (spec §6.2).

        Raises:
            ConfigurationError: ``handler`` is not callable, is a generator or async
                generator function, or cannot be called with one positional argument.
        """

        def register(function: H) -> H:
            registration = _registration(function, None)
            if registration not in self._catch_all:
                self._catch_all.append(registration)
            self._changed()
            return function

        return register if handler is None else register(handler)

    def on_error(self, hook: E) -> E:
        """Register a hook told of every handler failure (usable as a decorator).

        Returns ``hook`` itself, so a decorated function keeps its own type.

        Raises:
            ConfigurationError: ``hook`` is not callable, is a coroutine, generator or
                async generator function (hooks are plain sync functions), or cannot be
                called as ``hook(event, error)``.
        """
        if not callable(hook) or _is_async(hook):
            raise ConfigurationError("an error hook must be a plain (non-async) callable")
        _check_callable(hook, "error hook", 2)
        if hook not in self._error_hooks:
            self._error_hooks.append(hook)
        return hook

    def declare(self, *event_names: str) -> None:
        """Name events the spec's catalogue does not list yet, so subscribing to them
        is neither warned about nor (``strict``) refused.

        Raises:
            ConfigurationError: A name is empty or is a pattern.
        """
        for name in event_names:
            if not isinstance(name, str) or not name or is_pattern(name):
                raise ConfigurationError(f"declare() takes event names, got {name!r}")
        self._declared.update(event_names)

    def unknown_event_names(self) -> dict[str, str | None]:
        """The names (not patterns) handlers are registered for that are neither in
        :data:`KNOWN_EVENT_NAMES` nor declared (likely typos), sorted, each mapped to
        the closest known or declared name or pattern (:func:`suggest_event_name`),
        or ``None``."""
        names = sorted({name for name, _ in self._specific if not self._known(name)})
        known = KNOWN_EVENT_NAMES | self._declared
        return {name: suggest_event_name(name, known) for name in names}

    def remove(self, handler: Callable[..., object]) -> int:
        """Unregister ``handler`` (or error hook) everywhere; returns how many were removed.

        Every subscription counts: by name, by pattern, catch-all, error hook. A
        delivery already running its handlers still calls ``handler`` if it has not
        reached it yet; deliveries that start afterwards do not.
        """
        removed = 0
        for key in list(self._specific):
            kept = [r for r in self._specific[key] if r.handler is not handler]
            removed += len(self._specific[key]) - len(kept)
            if kept:
                self._specific[key] = kept
            else:
                del self._specific[key]
        kept_patterns = [p for p in self._patterns if p.registration.handler is not handler]
        removed += len(self._patterns) - len(kept_patterns)
        self._patterns = kept_patterns
        kept_any = [r for r in self._catch_all if r.handler is not handler]
        removed += len(self._catch_all) - len(kept_any)
        self._catch_all = kept_any
        kept_hooks = [h for h in self._error_hooks if h is not handler]
        removed += len(self._error_hooks) - len(kept_hooks)
        self._error_hooks = kept_hooks
        self._changed()
        return removed

    def handlers_for(self, event_name: str, version: int) -> tuple[Registration, ...]:
        """The registrations to run for one delivery, in order (empty: unhandled)."""
        key = (event_name, version)
        found = self._cache.get(key)
        if found is None:
            generation = self._generation
            found = self._lookup(event_name, version)
            with self._cache_lock:  # a registration on another thread meanwhile: the
                # lookup may predate it, and caching it would hide the change for good
                if generation == self._generation and len(self._cache) < _CACHE_SIZE:
                    self._cache[key] = found
        return found

    def _changed(self) -> None:
        """After the subscriptions changed: forget every cached lookup, including one
        another thread is computing now (:meth:`handlers_for` stores it no more)."""
        with self._cache_lock:
            self._generation += 1
            self._cache.clear()

    def _lookup(self, event_name: str, version: int) -> tuple[Registration, ...]:
        """The uncached :meth:`handlers_for` (kept apart: its closure slows the hit path)."""
        return (
            *self._specific.get((event_name, version), ()),
            *self._specific.get((event_name, None), ()),
            *(
                p.registration
                for p in self._patterns
                if (p.version is None or p.version == version) and p.matches(event_name)
            ),
            *self._catch_all,
        )

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
            Unprocessable: ``event.data`` does not fit a handler's ``model=``.
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
        return bool(self._specific or self._patterns or self._catch_all)

    def _known(self, name: str) -> bool:
        return name in KNOWN_EVENT_NAMES or name in self._declared or is_pattern(name)


def _names(event_name: object) -> tuple[str, ...]:
    """``event_name`` as a tuple of distinct non-empty names, in the given order."""
    names: tuple[object, ...]
    if isinstance(event_name, str):
        names = (event_name,)
    elif isinstance(event_name, Iterable) and not isinstance(event_name, (bytes, bytearray)):
        names = tuple(dict.fromkeys(event_name))
        if not names:
            raise ConfigurationError("event_name must not be an empty list")
    else:
        raise ConfigurationError("event_name must be a non-empty string or a list of them")
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigurationError("event_name must be a non-empty string or a list of them")
    return names  # type: ignore[return-value]  # checked above


def _unknown_message(name: str, handler: Callable[..., object], declared: set[str]) -> str:
    label = getattr(handler, "__qualname__", None) or type(handler).__name__
    suggestion = suggest_event_name(name, KNOWN_EVENT_NAMES | declared)
    hint = f"did you mean {suggestion!r}? " if suggestion else ""
    return (
        f"{label} is registered for {name!r}, which is not a known event name "
        f"({hint}known: {', '.join(sorted(KNOWN_EVENT_NAMES))}); it runs only if the service "
        f"sends exactly that name. Use a pattern such as 'note.*', or "
        f"router.declare({name!r}) for an event the catalogue does not list yet"
    )


def _check_model(model: Any) -> None:
    """Refuse a ``model`` msgspec cannot convert JSON values to (at registration)."""
    try:
        info = msgspec.inspect.type_info(model)
        msgspec.json.Decoder(_Data[model])
    except (TypeError, ValueError) as error:
        raise ConfigurationError(f"model {model!r} is not a type msgspec can convert to") from error
    custom = _custom_type(info, set())
    if custom is not None:
        raise ConfigurationError(
            f"model {model!r} holds {custom!r}, a type msgspec cannot convert JSON values to"
        )


def _custom_type(node: object, seen: set[int]) -> object:
    """The first class msgspec treats as custom (needs a ``dec_hook``) in ``node``."""
    if id(node) in seen:
        return None
    seen.add(id(node))
    if isinstance(node, msgspec.inspect.CustomType):
        return node.cls
    if isinstance(node, msgspec.inspect.Field):
        return _custom_type(node.type, seen)
    if isinstance(node, tuple):
        children: tuple[object, ...] = node
    elif isinstance(node, msgspec.inspect.Type):
        children = tuple(getattr(node, name) for name in node.__struct_fields__)
    else:
        return None
    for child in children:
        found = _custom_type(child, seen)
        if found is not None:
            return found
    return None


def _registration(handler: Handler, model: Any) -> Registration:
    if not callable(handler):
        raise ConfigurationError(f"handler must be callable, got {type(handler).__name__}")
    _check_callable(handler, "handler", 1)
    return Registration(handler, _is_async(handler), model)


def _label(function: object) -> str:
    """How a message names a handler or hook: its qualified name, else its type."""
    if isinstance(function, functools.partial):
        return f"functools.partial({_label(function.func)})"
    name = getattr(function, "__qualname__", None)
    if isinstance(name, str) and name:
        return name
    return f"{type(function).__qualname__} instance"


def _generator_kind(function: object) -> str | None:
    """Why calling ``function`` returns a generator, to follow its label (``None``: it
    does not).

    Looks through :func:`functools.partial` and bound methods (as :mod:`inspect` does)
    and, for a callable object (not a class: calling one makes an instance), at its
    ``__call__``.
    """
    target = function
    while isinstance(target, functools.partial):
        target = target.func
    wraps = f" wraps {_label(target)}" if target is not function else ""
    candidates: list[tuple[object, str]] = [(target, "")]
    if not inspect.isroutine(target) and not inspect.isclass(target):
        call = getattr(target, "__call__", None)  # noqa: B004 - callable objects
        if call is not None:
            candidates.append((call, "'s __call__"))
    for candidate, where in candidates:
        which = f"{wraps}{where}, which" if wraps else where
        if inspect.isasyncgenfunction(candidate):
            return f"{which} is an async generator function (`async def` with `yield`)"
        if inspect.isgeneratorfunction(candidate):
            return f"{which} is a generator function (it holds `yield`)"
    return None


def _check_callable(function: Callable[..., object], what: str, arguments: int) -> None:
    """Refuse what could never run as ``function(*arguments)`` (see the module docstring).

    Raises:
        ConfigurationError: ``function`` is a generator or async generator function, or
            :func:`inspect.signature` shows it cannot take ``arguments`` positional
            arguments (skipped when Python cannot tell its signature).
    """
    label = _label(function)
    kind = _generator_kind(function)
    if kind is not None:
        returns = (
            "a handler must return None (a plain `def` without `yield`) or be "
            "`async def` without `yield`"
            if arguments == 1
            else "an error hook must be a plain `def` without `yield` that returns None"
        )
        raise ConfigurationError(
            f"{what} {label}{kind}: calling it only creates a generator, so its body "
            f"would never run; {returns}"
        )
    called = "handler(event)" if arguments == 1 else "hook(event, error)"
    refusal = _unbindable(function, arguments, called)
    if refusal is not None:
        taking = "the event as its one" if arguments == 1 else "two"
        raise ConfigurationError(
            f"{what} {label} {refusal}; "
            f"it must accept {taking} positional argument{'s' if arguments > 1 else ''}"
        )


def _unbindable(function: Callable[..., object], arguments: int, called_as: str) -> str | None:
    """``"(signature …) cannot be called as <called_as>: why"`` when
    :func:`inspect.signature` shows ``function`` cannot take ``arguments`` positional
    arguments, else ``None`` (also when Python cannot tell its signature)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # builtins and some C callables: cannot tell
        return None
    signature = signature.replace(return_annotation=inspect.Signature.empty)
    try:
        signature.bind(*(object() for _ in range(arguments)))
    except TypeError as error:
        return f"(signature {signature}) cannot be called as {called_as}: {error}"
    return None


def check_plain_callable(function: object, what: str, called_as: str, arguments: int) -> None:
    """Refuse a configuration callable that could never work when the library calls it.

    For the callables a receiver calls and uses the result of, synchronously: the
    secrets lookup, the idempotency key function, the clock, the unit of work and the
    outcome observers. Without this check each of them failed on every delivery
    instead (an async key function made every event a 422, lost for good).

    Args:
        function: What the user passed.
        what: Its name in the message, e.g. ``"idempotency_key"``.
        called_as: How the library calls it, e.g. ``"idempotency_key(event)"``.
        arguments: How many positional arguments that call passes.

    Raises:
        ConfigurationError: ``function`` is not callable, is ``async def`` (or an object
            whose ``__call__`` is), a generator or async generator function, or
            :func:`inspect.signature` shows it cannot be called with ``arguments``
            positional arguments (skipped when Python cannot tell).
    """
    if not callable(function):
        raise ConfigurationError(
            f"{what} must be a callable used as {called_as}, not {type(function).__name__}"
        )
    label = _label(function)
    kind = _generator_kind(function)
    if _is_async(function) or kind is not None:
        why = kind or " is async (`async def`)"
        raise ConfigurationError(
            f"{what} {label}{why}: the receiver calls it as {called_as} without "
            "awaiting or iterating, so it must be a plain `def`"
        )
    refusal = _unbindable(function, arguments, called_as)
    if refusal is not None:
        raise ConfigurationError(f"{what} {label} {refusal}")


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _model_name(model: Any) -> str:
    return getattr(model, "__qualname__", None) or repr(model)


def _convert(event: Event[Any], model: Any) -> Event[Any]:
    """``event`` with ``data`` converted to ``model``; raises ``Unprocessable``."""
    data = event.data
    try:
        if isinstance(data, msgspec.Struct) and event.body:  # a built-in model: all fields
            decoder = _decoders.get(model)
            if decoder is None:
                decoder = msgspec.json.Decoder(_Data[model])
                if len(_decoders) < 256:
                    _decoders[model] = decoder
            converted = decoder.decode(event.body).data
        else:
            if isinstance(data, msgspec.Struct):
                data = msgspec.to_builtins(data)
            converted = msgspec.convert(data, model)
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        message = f"{event.name} data does not fit {_model_name(model)}: {error}"
        raise Unprocessable(message) from error
    return msgspec.structs.replace(event, data=converted)


def _events_for(handlers: tuple[Registration, ...], event: Event[Any]) -> tuple[Event[Any], ...]:
    """The event each handler receives: converted once per model, all before any runs."""
    converted: list[tuple[Any, Event[Any]]] = []
    events: list[Event[Any]] = []
    for registration in handlers:
        model = registration.model
        if model is None:
            events.append(event)
            continue
        for seen, done in converted:
            if seen is model or seen == model:
                events.append(done)
                break
        else:
            done = _convert(event, model)
            converted.append((model, done))
            events.append(done)
    return tuple(events)


def run(handlers: tuple[Registration, ...], event: Event[Any]) -> None:
    """Call ``handlers`` in order from synchronous code; async ones run to the end.

    Raises:
        Unprocessable: ``event.data`` does not fit a handler's ``model`` (no handler ran).
    """
    for registration in handlers:
        if registration.model is not None:
            events = _events_for(handlers, event)
            for index, each in enumerate(handlers):
                result = each.handler(events[index])
                if result is not None:
                    run_coroutine(result)
            return
    for registration in handlers:
        result = registration.handler(event)
        if result is not None:  # a coroutine (an async handler), else ignored
            run_coroutine(result)


async def arun(
    handlers: tuple[Registration, ...],
    event: Event[Any],
    in_thread: bool,
    to_thread: ToThread = run_in_thread,
) -> None:
    """Await ``handlers`` in order; plain functions through ``to_thread`` when ``in_thread``.

    A plain function that returns an awaitable anyway (a ``functools.partial`` of a
    coroutine function, say) has it awaited.

    Raises:
        Unprocessable: ``event.data`` does not fit a handler's ``model`` (no handler ran).
    """
    events: tuple[Event[Any], ...] | None = None
    for registration in handlers:
        if registration.model is not None:
            events = _events_for(handlers, event)
            break
    for index, registration in enumerate(handlers):
        given = event if events is None else events[index]
        if registration.is_async:
            await registration.handler(given)  # type: ignore[misc]
            continue
        result: object  # typed None or awaitable; a decorator may return anything
        if in_thread:
            result = await to_thread(registration.handler, given)
        else:
            result = registration.handler(given)
        if result is not None:
            if inspect.isawaitable(result):
                await result
            else:
                refuse_generator(result)


def run_coroutine(awaitable: Coroutine[Any, Any, None] | Any) -> None:
    """Run an async handler's coroutine to completion from synchronous code; any other
    result is ignored, except a generator (see :func:`refuse_generator`)."""
    if not inspect.isawaitable(awaitable):
        refuse_generator(awaitable)
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # No loop here: run it after this block, so that a handler's error does not
        # get this lookup's RuntimeError as its __context__.
        pass
    else:
        close = getattr(awaitable, "close", None)
        if close is not None:
            close()  # never awaited: no "coroutine was never awaited" warning later
        raise RuntimeError(
            "an async handler was called from handle() or process() inside a running "
            "event loop; call ahandle() or aprocess() there instead"
        )
    asyncio.run(_await(awaitable))


def refuse_generator(result: object) -> None:
    """Raise when a handler returned a generator: its body never ran.

    Registration refuses generator functions, but a decorator's plain wrapper can
    still return one; answering 200 then would lose the event, so this is a handler
    failure (500, retried) instead.

    Raises:
        TypeError: ``result`` is a generator or an async generator.
    """
    if inspect.isgenerator(result):
        result.close()  # never started: closing it runs nothing
    elif not inspect.isasyncgen(result):
        return
    raise TypeError(
        "the handler returned a generator, so its body never ran (a decorator's "
        "wrapper around a function with `yield`?); a handler must do its work when called"
    )


async def _await(awaitable: Any) -> None:
    await awaitable
