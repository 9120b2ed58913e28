"""The receive pipeline for one delivery: :meth:`WebhookReceiver.handle` and its twins.

::

    method, headers, body reader              (handle / ahandle: what adapters call)
      -> method is exactly POST               else 405
      -> announced or read size within limit  else 413 (reads at most limit + 1 bytes)
      -> one Service-Signature header         else 401 "format"
      -> secrets for o (secrets= callable)    raised: 503 "secrets_unavailable"
      -> signature and timestamp (spec §5.2)  else 401
      -> envelope (spec §2.7)                 else 400
      -> handlers for (eventName, version)    none: unhandled_status (200)
      -> claim the idempotency key            DONE: 200, IN_FLIGHT: 503, store down: 503
      -> [unit of work: run the handlers      raised: release, 500 (Unprocessable: 4xx,
           (the claim renewed meanwhile)               RetryLater: 503)
          + complete the key]                 store down: 503 (the retry re-runs)
      -> 200

``process``/``aprocess`` start at the signature with a body already read.

Everything but reading, the secrets lookup, the store and the handlers is pure and
shared (:meth:`_prepare`, :meth:`_failed`); the sync and async drivers differ only in
how they do that I/O, and read line for line alike. A handler failure always leaves
the event retryable: the claim is released before answering, and no 2xx is sent
unless every handler finished and the key was recorded as done. When the store itself
failed the completion, the release runs after the answer (``release_later``): a store
that stopped answering would hold it for a second timeout.

Observability: every answer goes through :meth:`_finish`, which, only when someone
listens, builds one :class:`~service_webhooks._outcome.DeliveryRecord`, logs it as one
INFO line on the ``service_webhooks`` logger (readable message plus ``extra`` fields,
see :mod:`service_webhooks._reporting`) and hands it to each observer. An optional
tracer wraps the whole delivery and the handlers in context managers
(:mod:`service_webhooks.observability` makes OpenTelemetry spans with it). With no
observer, no tracer and INFO disabled, the cost is one ``isEnabledFor`` check and at
most four ``perf_counter`` calls: one at the start of ``_process``/``_aprocess``, two
around the handlers, one in ``handle``/``ahandle`` (for the answers given before it).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from time import perf_counter
from typing import Any, Self, TypeAlias, TypeVar, cast

import msgspec

from . import _recording
from ._credentials import SecretsConfig, _Static, as_resolver, retired_secrets
from ._dispatch import Registration, Router, arun, check_plain_callable, run
from ._envelope import MAX_BODY_SIZE, Envelope, decode_checked
from ._events import Event
from ._exceptions import (
    ConfigurationError,
    EnvelopeError,
    MethodNotAllowedError,
    PayloadTooLargeError,
    RetryLater,
    SecretsUnavailableError,
    SignatureFormatError,
    StoreError,
    UnknownOrganizationError,
    Unprocessable,
    WebhookError,
)
from ._idempotency import (
    DEFAULT_LEASE,
    DEFAULT_RETENTION,
    OVERLAP_FROM,
    OverlappedKey,
    aguard,
    aguard_release,
    arelease_later,
    default_idempotency_key,
    guard,
    guard_release,
    new_token,
    open_store,
    release_later,
    store_failed,
)
from ._outcome import (
    HANDLER_FAILED,
    IN_FLIGHT,
    DeliveryRecord,
    Outcome,
    outcome_for_error,
)
from ._recording import (
    InboxConfig,
    Recorder,
    defer_report,
    note_error,
    note_finish,
    open_inbox,
)
from ._renewal import Renewer
from ._reporting import KEY_PREFIX_LENGTH, DeliveryTracer, OutcomeObserver, log_record, loggable
from ._signing import (
    DEFAULT_TOLERANCE,
    SIGNATURE_HEADER,
    SignatureHeader,
    _utc,
    check,
    check_tolerance,
    parse_signature_header,
    require_body_bytes,
)
from ._threads import ToThread, run_in_thread
from .inbox._base import Inbox
from .stores._base import MAX_DURATION, MIN_RETENTION, ClaimState, IdempotencyStore

_NEW, _DONE = ClaimState.NEW, ClaimState.DONE

__all__ = ["SETTINGS", "WebhookReceiver"]

logger = logging.getLogger("service_webhooks")

_NO_SPAN: AbstractContextManager[object] = nullcontext()  # reusable: no tracer configured

KeyFunction = Callable[[Event[Any]], str]

UnitOfWork: TypeAlias = Callable[
    [Event[Any]], AbstractContextManager[object] | AbstractAsyncContextManager[object]
]
"""``unit_of_work(event)`` -> a context manager entered around "run the handlers +
complete the key" (see :class:`WebhookReceiver`)."""

Headers: TypeAlias = Iterable[tuple[str, str]] | Iterable[tuple[bytes, bytes]]
"""Request headers as ``(name, value)`` pairs, one per header line, ``str`` or raw
``bytes`` (ASGI's ``scope["headers"]`` as is); names compare case-insensitively."""

BodyReader: TypeAlias = Callable[[int], bytes]
"""``read(size) -> bytes``: the next at most ``size`` bytes of the body, ``b""`` at its
end (a file-like object's ``read``). :meth:`WebhookReceiver.handle` never asks for more
than a declared ``Content-Length``; without one (a chunked body), the reader itself must
return ``b""`` where the body ends (a server's decoded, terminated input stream, not the
raw socket)."""

AsyncBodyReader: TypeAlias = Callable[[int], Awaitable[bytes | None]]
"""``await read(size) -> bytes | None``: the next chunk of the body (it may be larger
than ``size``), ``b""`` at its end, ``None`` when the client disconnected."""

_REPEATED = "\x00repeated"  # stands for "more than one Service-Signature line"
_LONGEST_KEY = 200  # characters a store accepts as a key


_Observer = TypeVar("_Observer", bound=OutcomeObserver)


class _Plan(msgspec.Struct, frozen=True):
    """A delivery that passed every pure check and now needs the store and handlers.

    The drivers tell it from an answer with ``isinstance(prepared, _Plan)``: an exact
    type is one pointer comparison, where ``isinstance(prepared, Outcome)`` on a plan
    goes through the Struct metaclass's ``__instancecheck__`` (about 50 ns).
    """

    event: Event[Any]
    handlers: tuple[Registration, ...]
    token: str


SETTINGS: dict[str, str] = {
    "SECRETS": "secrets",
    "TOLERANCE": "tolerance",
    "STORE": "store",
    "MAX_BODY_SIZE": "max_body_size",
    "IDEMPOTENCY_KEY": "idempotency_key",
    "LEASE": "lease",
    "RETENTION": "retention",
    "UNHANDLED_STATUS": "unhandled_status",
    "SUCCESS_BODY": "success_body",
    "STRICT": "strict",
    "INBOX": "inbox",
}
"""Framework setting name -> :class:`WebhookReceiver` argument, the one table every
adapter reads: Django's ``SERVICE_WEBHOOKS = {"SECRETS": ...}`` keys, Flask's
``app.config["SERVICE_WEBHOOKS_SECRETS"]`` (prefixed)."""


class WebhookReceiver:
    """Authenticates, decodes, deduplicates and dispatches deliveries.

    Handlers are registered with the router's methods, bound on each receiver:
    ``on(event_name, handler=None, *, version=None, model=None)`` (a name, a list of
    names or a glob pattern; a decorator when ``handler`` is omitted), ``on_any``,
    ``on_error`` (``hook(event, error)``), each returning the function it was given,
    and ``remove(handler)``; see :meth:`service_webhooks.Router.on`.
    Deliveries go in through :meth:`process` / :meth:`aprocess` (a body already
    read) or :meth:`handle` / :meth:`ahandle` (what the adapters call).

    Args:
        secrets: The signing secret(s) (spec §5.2), each a ``str`` (UTF-8 encoded),
            ``bytes`` or :class:`~service_webhooks.Secret`: one secret; a sequence of
            them (newest first, for rotation); a mapping ``organization ID -> secret
            or sequence`` (umbrella accounts); or a callable ``f(organization_id)``
            returning either, or ``None`` for an unknown organization (see
            :func:`~service_webhooks.as_resolver`).
        tolerance: Largest accepted ``abs(now - t)`` in seconds (spec §5.2; 300).
        store: The idempotency store: an :class:`~service_webhooks.stores.IdempotencyStore`
            or a URL for :func:`~service_webhooks.stores.store_from_url` (``"memory"``,
            ``"sqlite:PATH"``, ``"redis://…"``, ``"postgresql://…"``). Default: SQLite at
            ``./service_webhooks.sqlite3`` (the file is created on first use).
        max_body_size: Largest accepted body in bytes (spec §2.7: 1 MiB).
        idempotency_key: ``key(event) -> str`` to deduplicate on your own identity
            (e.g. ``lambda e: e.data.id``); it is namespaced by organization, not by
            event name (two events of different types with the same key are
            duplicates: put ``event.name`` in the key when that can happen). Default:
            SHA-256 of ``o + "\\n" + raw body``. Called for every event that has a
            handler: one that raises, or returns no non-empty ``str``, is answered 500
            ``configuration`` (retried); one that raises ``Unprocessable``, 422; one
            that raises ``RetryLater`` (a lookup it needs is down), 503 with
            ``Retry-After``.
        lease: Seconds a claim holds before a retry may take it over (a process
            that died mid-handler).
        retention: Seconds a processed key is remembered; at least 48 h.
        unhandled_status: Answer for an event no handler is registered for (200,
            any 4xx but 429, or 500 to have the service retry it). An ``on_any``
            handler or a matching pattern counts: with one, this never applies.
        success_body: Answer successes (200: processed, duplicate, unhandled) with the
            small JSON body every answer carries (``True``), or with an empty one
            (``False``, ``Content-Length: 0``). The service uses only the status (spec
            §6.1) and shows the body in its audit log (spec §6.3). Without one, each
            success costs the server one socket write less. Refusals and failures
            always carry their reason.
        sync_handlers_in_thread: Under ``aprocess``, run plain-function handlers in a
            worker thread so they do not block the event loop.
        to_thread: ``await to_thread(function, argument)`` runs those handlers and a
            ``secrets=`` callable off the event loop under ``aprocess``. Default: the
            library's pool of long-lived threads; :func:`asyncio.to_thread` fits too. A
            framework whose per-thread resources belong to a request passes its own: the
            Django app runs them in the delivery's thread, as Django runs a synchronous
            view, so their database connections are closed when the delivery ends.
        clock: Current time in Unix seconds for the timestamp check; defaults to
            :func:`time.time` looked up at call time (so ``freezegun`` works).
        router: Share this :class:`~service_webhooks.Router` (its handlers)
            with other receivers, e.g. one per app built from each app's settings.
        observers: :class:`OutcomeObserver` callables told about every delivery
            (more can be added with :meth:`on_outcome`).
        tracer: A :class:`DeliveryTracer` wrapping each delivery and its handlers
            (for example :func:`service_webhooks.observability.instrument`'s).
        unit_of_work: ``unit_of_work(event)`` returning a context manager that is
            entered around running the handlers *and* recording the key as done, so
            both commit or neither does (for example ``lambda event:
            transaction.atomic()``). An exception from a handler passes through it
            before the claim is released. Under ``aprocess`` it may return an async
            context manager; under ``process`` it must be a plain one. Default: none.
        strict: Build the router as ``Router(strict=True)``: registering a handler for an
            unknown event name (neither catalogued, declared nor a pattern) raises
            ``ConfigurationError`` instead of logging a warning. A given ``router``
            keeps its own setting.
        inbox: Where every authenticated delivery is recorded, with its answer, before
            the answer is sent (see :mod:`service_webhooks.inbox`). Default: a SQLite
            inbox in the idempotency store's file when the store is the default or a
            SQLite one, else none. ``False``: none. A URL (``sqlite:PATH``,
            ``postgresql://…``, ``memory``) or an :class:`~service_webhooks.inbox.Inbox`:
            that one. ``True``: beside the store (SQLite or PostgreSQL) or an error.
            A delivery that cannot be recorded is answered 503 ``store_unavailable``
            (the service retries it), never 2xx.

    Raises:
        ConfigurationError: Any argument out of range (messages never show secrets).
    """

    signature_header = SIGNATURE_HEADER

    def __init__(
        self,
        secrets: SecretsConfig,
        *,
        tolerance: float = DEFAULT_TOLERANCE,
        store: IdempotencyStore | str | None = None,
        max_body_size: int = MAX_BODY_SIZE,
        idempotency_key: KeyFunction | None = None,
        lease: float = DEFAULT_LEASE,
        retention: float = DEFAULT_RETENTION,
        unhandled_status: int = 200,
        success_body: bool = True,
        sync_handlers_in_thread: bool = True,
        to_thread: ToThread | None = None,
        clock: Callable[[], float] | None = None,
        router: Router | None = None,
        observers: Iterable[OutcomeObserver] = (),
        tracer: DeliveryTracer | None = None,
        unit_of_work: UnitOfWork | None = None,
        strict: bool = False,
        inbox: InboxConfig = None,
    ) -> None:
        check_tolerance(tolerance)
        _require_number("max_body_size", max_body_size, "an int of bytes", integer=True)
        if not 0 < max_body_size <= MAX_BODY_SIZE:
            raise ConfigurationError(f"max_body_size must be 1..{MAX_BODY_SIZE} bytes")
        require_positive_seconds("lease", lease)
        _require_number("retention", retention, f"a number of seconds >= {MIN_RETENTION}")
        if not retention >= MIN_RETENTION:
            raise ConfigurationError(f"retention must be >= {MIN_RETENTION} seconds (48 h)")
        if not (_finite(retention) and retention <= MAX_DURATION):  # the stores' expiries
            raise ConfigurationError(
                f"retention must be a finite number of seconds <= {MAX_DURATION} (1000 years)"
            )
        _require_number("unhandled_status", unhandled_status, "an int HTTP status", integer=True)
        if not (unhandled_status in (200, 500) or 400 <= unhandled_status <= 499):
            raise ConfigurationError("unhandled_status must be 200, a 4xx or 500")
        if unhandled_status == 429:
            raise ConfigurationError("unhandled_status 429 would be retried; use 500 for that")
        if unit_of_work is not None:
            check_plain_callable(
                unit_of_work, "unit_of_work", "unit_of_work(event) -> a context manager", 1
            )
        if idempotency_key is not None:
            check_plain_callable(
                idempotency_key, "idempotency_key", "idempotency_key(event) -> str", 1
            )
        if to_thread is not None and not callable(to_thread):
            raise ConfigurationError(
                "to_thread must be a callable used as await to_thread(function, argument), "
                f"not {type(to_thread).__name__}"
            )
        if clock is not None:
            check_plain_callable(clock, "clock", "clock() -> Unix seconds (like time.time)", 0)
        for flag, value in (("success_body", success_body), ("strict", strict)):
            if not isinstance(value, bool):
                raise ConfigurationError(f"{flag} must be True or False, not {value!r:.40}")
        if tracer is not None and not all(
            callable(getattr(tracer, method, None)) for method in ("delivery", "handlers")
        ):
            raise ConfigurationError(
                "tracer must be a DeliveryTracer: an object with delivery() and "
                f"handlers(event) methods, not {type(tracer).__name__}"
            )
        self._resolver = as_resolver(secrets)
        self._resolver_blocks: bool = getattr(self._resolver, "blocking", True)
        # one fixed set of secrets for every organization: no lookup per delivery
        self._static_secrets = (
            self._resolver.secrets if isinstance(self._resolver, _Static) else None
        )
        self.tolerance = tolerance
        self.max_body_size = max_body_size
        self.lease = lease
        self.retention = retention
        self.success_body = success_body
        quiet = not success_body
        self.unhandled = Outcome(
            unhandled_status, "unhandled", empty_body=quiet and unhandled_status == 200
        )
        self._processed = Outcome(200, "processed", empty_body=quiet)
        self._duplicate = Outcome(200, "duplicate", empty_body=quiet)
        self.sync_handlers_in_thread = sync_handlers_in_thread
        self.to_thread: ToThread = run_in_thread if to_thread is None else to_thread
        self._key_function = idempotency_key
        self._clock = clock
        for organization_id, not_after in retired_secrets(
            self._resolver, clock() if clock is not None else time.time()
        ):  # kept after a rotation ended: harmless, but the operator should know
            logger.warning(
                "service_webhooks: a secret%s stopped verifying at its stop date (%s): "
                "it accepts no delivery; remove it from secrets=",
                "" if organization_id is None else f" of organization {organization_id!r}",
                _utc(not_after),
            )
        self.store: IdempotencyStore = open_store(store)
        self.router = router if router is not None else Router(strict=strict)
        self.on = self.router.on
        self.on_any = self.router.on_any
        self.on_error = self.router.on_error
        self.remove = self.router.remove
        self._observers: tuple[OutcomeObserver, ...] = ()
        if not isinstance(observers, Iterable) or callable(observers):
            raise ConfigurationError(
                "observers must be a list of outcome observers; pass one as observers=[f]"
            )
        for observer in observers:
            self.on_outcome(observer)
        self.tracer = tracer
        self.unit_of_work = unit_of_work
        self._renewer = Renewer(self.store, self.lease)
        # inbox: None when off; the Recorder runs the pipeline and records its answer
        self.inbox: Inbox | None = open_inbox(inbox, store, self.store)
        self._recorder = None if self.inbox is None else Recorder(self, self.inbox)

    def __repr__(self) -> str:
        return f"WebhookReceiver(tolerance={self.tolerance:g}, store={self.store!r})"

    # -- closing --------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections the store and the inbox opened, in every thread, and
        end the thread that renews the claims of running handlers.

        Each closes only what it opened itself (a pool or client you passed in stays
        open) and connects again on its next use, so the receiver stays usable (the
        next delivery starts the renewing thread again). Close once the deliveries
        have finished (a lifespan's or ``atexit``'s shutdown): the claim of a handler
        still running is no longer renewed, so a redelivery after its lease may run it
        again. A store or inbox without a ``close()`` method is left alone. Calling it
        again is harmless. ``with receiver:`` (``async with``) closes on leaving the
        block.

        Raises:
            Exception: Whatever a store's or inbox's ``close()`` raises (the inbox is
                still closed when the store's fails).
        """
        self._renewer.stop()  # its next renewal would open the store's connections again
        try:
            _close(self.store)
        finally:
            _close(self.inbox)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Async twin of :meth:`close`, for a lifespan's shutdown.

        Closes the running event loop's connections first (``aclose()`` of the Redis
        and PostgreSQL stores and inbox), then the rest as :meth:`close` does, in a
        worker thread (closing a pool waits for its threads).
        """
        for opened in (self.store, self.inbox):
            closer = getattr(opened, "aclose", None)
            if closer is not None:
                await closer()
        await asyncio.to_thread(self.close)

    def precheck(
        self, method: str, content_length: int | None = None, *, max_body_size: int | None = None
    ) -> Outcome | None:
        """Answer before reading the body when the request line already decides it.

        For an integration that reads the body itself and then calls :meth:`process`
        (an adapter calls :meth:`handle` or :meth:`ahandle`, which do this and the
        reading): a method other than POST (405) or a declared ``Content-Length`` over
        the limit (413) need no body. ``None`` means: read at most ``limit + 1`` bytes
        (413 when there are more: call this again with the size read) and call
        :meth:`process`.

        Args:
            method: The HTTP method.
            content_length: The declared body size in bytes, if any.
            max_body_size: A smaller limit in bytes imposed by the framework (e.g.
                Flask's ``MAX_CONTENT_LENGTH``); the receiver's own limit otherwise. An
                adapter that read more than such a limit calls this again with the
                size it read, to get the 413.
        """
        started = perf_counter()
        limit = self.max_body_size
        if max_body_size is not None:
            limit = min(limit, max_body_size)
        error = _request_line_error(method, content_length, limit)
        return None if error is None else self._rejected(error, started)

    # -- observing ------------------------------------------------------------------

    @property
    def observers(self) -> tuple[OutcomeObserver, ...]:
        """The registered :class:`OutcomeObserver` callables, in call order."""
        return self._observers

    def on_outcome(self, observer: _Observer) -> _Observer:
        """Call ``observer(record)`` after every delivery; usable as a decorator.

        Args:
            observer: An :class:`OutcomeObserver`, called with a
                :class:`~service_webhooks._outcome.DeliveryRecord`.

        Returns:
            ``observer`` itself.

        Raises:
            ConfigurationError: ``observer`` is not callable, is ``async def`` or a
                generator function (it is called synchronously, its result ignored),
                or cannot be called with one argument.
        """
        check_plain_callable(observer, "outcome observer", "observer(record)", 1)
        self._observers = (*self._observers, observer)  # swapped whole: thread-safe reads
        return observer

    def remove_observer(self, observer: OutcomeObserver) -> None:
        """Stop calling ``observer`` (no error when it was not registered)."""
        self._observers = tuple(o for o in self._observers if o is not observer)

    # -- inbox: replay a recorded delivery ---------------------------------------------

    def replay(self, delivery_id: str, *, force: bool = False) -> Outcome:
        """Run the handlers again on a delivery kept in :attr:`inbox`.

        The stored body goes through the same steps as a delivery after its signature
        was verified (the timestamp is not checked again): decode, find handlers,
        claim the idempotency key, run, complete. So a delivery whose key was processed
        is a ``duplicate`` and runs nothing, unless ``force=True`` (its handlers then
        run without a claim, the key staying done); so is one the inbox shows
        processed after the store forgot its key (``retention``, 72 hours by
        default, against the inbox's 30 days). A delivery answered ``unhandled``
        runs once its handler is registered. The replay (time, status, reason, whether
        forced) is appended to the record's ``replays``.

        Args:
            delivery_id: The record's full ID
                (:attr:`~service_webhooks.inbox.ReceivedDelivery.id`); the commands
                take a prefix, found with ``inbox.search(InboxQuery(id_prefix=...))``.
            force: Run the handlers even when the key is recorded as processed.

        Returns:
            The :class:`~service_webhooks.Outcome` the replay would have answered.

        Raises:
            KeyError: No record with this ID in the inbox.
            ConfigurationError: This receiver keeps no inbox.
            Exception: Whatever the inbox raises when it cannot be read or written.
        """
        return _recording.replay(self, delivery_id, force=force)

    async def areplay(self, delivery_id: str, *, force: bool = False) -> Outcome:
        """Async twin of :meth:`replay` (handlers run as under :meth:`aprocess`)."""
        return await _recording.areplay(self, delivery_id, force=force)

    # -- what adapters call: the request as the server gives it ----------------------

    def handle(
        self,
        method: str,
        headers: Headers,
        read: BodyReader,
        *,
        max_body_size: int | None = None,
    ) -> Outcome:
        """Handle one HTTP request synchronously: the one entry point for adapters.

        Answers 405 for a method other than ``POST`` (compared case-sensitively, RFC
        9110 §9.1) and 413 for a declared ``Content-Length`` over the limit before
        reading anything; otherwise reads the body and runs the pipeline. With a
        ``Content-Length``, ``read`` is never asked for more than that many bytes in
        all (PEP 3333), so a raw WSGI ``wsgi.input`` or socket file is a valid reader;
        without one (``Transfer-Encoding: chunked``), at most ``limit + 1`` bytes (413
        when there are more), until ``read`` returns ``b""``. Two or more
        ``Service-Signature`` header lines are refused (401, reason ``format``).

        Args:
            method: The request method, exactly as received (``"POST"``).
            headers: The request headers, one ``(name, value)`` pair per line, ``str``
                or ``bytes`` (see :data:`~service_webhooks.Headers`); pass every line,
                not a mapping, so a repeated ``Service-Signature`` is seen.
            read: ``read(size) -> bytes`` over the body stream (``b""`` at its end;
                see :data:`~service_webhooks.BodyReader`).
            max_body_size: A smaller limit in bytes imposed by the framework (e.g.
                Flask's ``MAX_CONTENT_LENGTH``); the receiver's own otherwise.

        Returns:
            The :class:`~service_webhooks.Outcome` to send. Never raises for anything
            a request can contain.

        Raises:
            TypeError: ``headers`` is a mapping (a dict keeps one value per name, and
                iterating it gives names only), not ``(name, value)`` pairs.
        """
        started = perf_counter()
        limit = (
            self.max_body_size if max_body_size is None else min(max_body_size, self.max_body_size)
        )
        signature, length, content_type, user_agent = _scan_headers(headers)
        error = _request_line_error(method, length, limit)
        if error is not None:
            return self._rejected(error, started)
        # never past a declared length: a raw WSGI input or socket file holds the next
        # request there, or blocks (PEP 3333: read at most CONTENT_LENGTH bytes)
        wanted = limit + 1 if length is None else length
        body = read(wanted)
        size = len(body)
        if body and size < wanted:  # more may follow: read to the end
            chunks = [body]
            while size < wanted:
                chunk = read(wanted - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if size > limit:
            return self._rejected(_too_large(limit), started)
        if self._recorder is not None:  # inbox: keep Content-Type and User-Agent
            # through process(), not the recorder directly: a subclass overriding it
            # (the Django TransactionalReceiver) keeps its behaviour with an inbox
            return self.process(
                body,
                signature,
                method=method,
                content_type=_text(content_type),
                user_agent=_text(user_agent),
            )
        return self.process(body, signature, method=method)

    async def ahandle(
        self,
        method: str,
        headers: Headers,
        read: AsyncBodyReader,
        *,
        max_body_size: int | None = None,
    ) -> Outcome | None:
        """Async twin of :meth:`handle`, for an event loop (ASGI).

        Args:
            read: ``await read(size)``: the next body chunk, ``b""`` at the end,
                ``None`` when the client disconnected.

        Returns:
            The :class:`~service_webhooks.Outcome`, or ``None`` when the client went
            away before the body arrived (nothing was processed; send nothing).
        """
        started = perf_counter()
        limit = (
            self.max_body_size if max_body_size is None else min(max_body_size, self.max_body_size)
        )
        signature, length, content_type, user_agent = _scan_headers(headers)
        error = _request_line_error(method, length, limit)
        if error is not None:
            return self._rejected(error, started)
        wanted = limit + 1 if length is None else length  # as in handle
        body = await read(wanted)
        if body is None:
            return None
        size = len(body)
        if body and size < wanted:  # more may follow, as in handle
            chunks = [body]
            while size < wanted:
                chunk = await read(wanted - size)
                if chunk is None:
                    return None
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if size > limit:
            return self._rejected(_too_large(limit), started)
        if self._recorder is not None:  # inbox: keep Content-Type and User-Agent
            return await self.aprocess(  # through aprocess, as in handle
                body,
                signature,
                method=method,
                content_type=_text(content_type),
                user_agent=_text(user_agent),
            )
        return await self.aprocess(body, signature, method=method)

    # -- the two drivers: identical but for how they call the store and handlers ----

    def process(
        self,
        body: bytes,
        signature: str | bytes | None,
        *,
        method: str = "POST",
        content_type: str | None = None,
        user_agent: str | None = None,
    ) -> Outcome:
        """Handle one delivery whose body was already read, synchronously.

        Args:
            body: The raw request body (``bytes``); at most ``max_body_size + 1``
                bytes of a larger one are enough.
            signature: The ``Service-Signature`` header value, ``None`` if absent.
            method: The HTTP method.
            content_type: The request's ``Content-Type``, kept in the inbox.
            user_agent: The request's ``User-Agent``, kept in the inbox.

        Returns:
            The :class:`~service_webhooks.Outcome` to send. Never raises for anything
            a request can contain.

        Raises:
            TypeError: ``body`` is not ``bytes`` (a ``str`` is an already decoded
                body, whose exact bytes the signature covers; a ``bytearray`` or
                ``memoryview``: pass ``bytes(body)``), whatever the signature header,
                or ``signature`` is not the header's value.
        """
        try:
            if self._recorder is not None:  # inbox: record the answer before returning it
                return self._recorder.process(body, signature, method, content_type, user_agent)
            tracer = self.tracer
            if tracer is None:
                return self._process(body, signature, method, None)
            with tracer.delivery():
                return self._process(body, signature, method, tracer)
        except (TypeError, AttributeError):  # free unless raised: name the wrong argument
            _check_argument_types(body, signature)
            raise

    async def aprocess(
        self,
        body: bytes,
        signature: str | bytes | None,
        *,
        method: str = "POST",
        content_type: str | None = None,
        user_agent: str | None = None,
    ) -> Outcome:
        """Handle one delivery in an event loop; see :meth:`process`.

        A ``secrets=`` callable is called through ``to_thread`` (a worker thread), and
        plain-function handlers too unless ``sync_handlers_in_thread=False``: nothing
        here blocks the event loop but the store's own async twins.
        """
        try:
            if self._recorder is not None:  # inbox: record the answer before returning it
                return await self._recorder.aprocess(
                    body, signature, method, content_type, user_agent
                )
            tracer = self.tracer
            if tracer is None:
                return await self._aprocess(body, signature, method, None)
            with tracer.delivery():
                return await self._aprocess(body, signature, method, tracer)
        except (TypeError, AttributeError):  # free unless raised: name the wrong argument
            _check_argument_types(body, signature)
            raise

    def _process(
        self, body: bytes, signature: str | bytes | None, method: str, tracer: DeliveryTracer | None
    ) -> Outcome:
        started = perf_counter()
        try:
            header = self._authenticate(method, body, signature)
            secrets = self._static_secrets
            if secrets is None:
                secrets = self._secrets_for(header.organization_id)
            prepared = self._prepare(body, header, secrets, started)
        except WebhookError as error:
            return self._rejected(error, started)
        if not isinstance(prepared, _Plan):  # an Outcome: see _Plan
            return prepared
        return self._execute(prepared, started, tracer)

    def _execute(self, plan: _Plan, started: float, tracer: DeliveryTracer | None) -> Outcome:
        """Claim, run the handlers, complete: a verified delivery (or a replay)."""
        store = self.store
        event = plan.event
        key, token = event.idempotency_key, plan.token
        handler_time = None  # set once the handlers finished: a later 503 reports it
        try:
            try:  # inline, not guard(store.claim, ...): its frame and *args cost 0.3 µs here
                state = store.claim(key, token, self.lease)
            except Exception as error:
                raise store_failed(error) from error
            if state is not _NEW:
                return self._answer(plan, self._duplicate if state is _DONE else IN_FLIGHT, started)
            handlers_started = perf_counter()
            renewer = self._renewer
            renewer.add(key, token)
            unit = self.unit_of_work
            try:
                try:
                    if tracer is None and unit is None:
                        run(plan.handlers, event)
                    else:
                        with _NO_SPAN if tracer is None else tracer.handlers(event):
                            if unit is None:
                                run(plan.handlers, event)
                            else:
                                with _sync_unit(unit, event):
                                    run(plan.handlers, event)
                                    _completion(store.complete, key, token, self.retention)
                finally:
                    renewer.remove(token)  # before any release: no renewal after it
            except _ClaimLost:  # another delivery owns the key now: it records the work
                return self._answer(plan, IN_FLIGHT, started)
            except BaseException as error:
                handler_time = perf_counter() - handlers_started
                if isinstance(error, _CompletionFailed):  # the store failed: do not wait
                    release_later(store.release, key, token)
                else:
                    guard_release(store.release, key, token)
                return self._failed(plan, error, started, handler_time)
            handler_time = perf_counter() - handlers_started
            if unit is None:
                recorder = self._recorder
                try:
                    if recorder is not None and recorder.joined:  # inbox: in the same commit
                        recorder.complete(plan, handler_time, self.retention)
                    else:
                        store.complete(key, token, self.retention)
                except Exception as error:  # 503; a retry runs now, not after the lease
                    # never undoes a completion; the answer does not wait for it
                    release_later(store.release, key, token)
                    if isinstance(error, StoreError):  # the recorder's, already logged
                        raise
                    raise store_failed(error) from error
            return self._answer(plan, self._processed, started, handler_time)
        except WebhookError as error:  # the store: claim, or completion after the handlers
            return self._rejected(error, started, plan, handler_time)

    async def _aprocess(
        self, body: bytes, signature: str | bytes | None, method: str, tracer: DeliveryTracer | None
    ) -> Outcome:
        started = perf_counter()
        try:
            header = self._authenticate(method, body, signature)
            secrets = self._static_secrets
            if secrets is None:  # a lookup; a callable's may block: in a worker thread
                if self._resolver_blocks:
                    secrets = await self.to_thread(self._secrets_for, header.organization_id)
                else:
                    secrets = self._secrets_for(header.organization_id)
            prepared = self._prepare(body, header, secrets, started)
        except WebhookError as error:
            return self._rejected(error, started)
        if not isinstance(prepared, _Plan):  # an Outcome: see _Plan
            return prepared
        return await self._aexecute(prepared, started, tracer)

    async def _aexecute(
        self, plan: _Plan, started: float, tracer: DeliveryTracer | None
    ) -> Outcome:
        """Async twin of :meth:`_execute`."""
        store = self.store
        event = plan.event
        key, token = event.idempotency_key, plan.token
        handler_time = None  # as in _execute
        try:
            try:
                state = await store.aclaim(key, token, self.lease)
            except Exception as error:
                raise store_failed(error) from error
            if state is not _NEW:
                return self._answer(plan, self._duplicate if state is _DONE else IN_FLIGHT, started)
            handlers_started = perf_counter()
            renewer = self._renewer
            renewer.add(key, token)
            unit = self.unit_of_work
            in_thread = self.sync_handlers_in_thread
            try:
                try:
                    if tracer is None and unit is None:
                        await arun(plan.handlers, event, in_thread, self.to_thread)
                    else:
                        with _NO_SPAN if tracer is None else tracer.handlers(event):
                            if unit is None:
                                await arun(plan.handlers, event, in_thread, self.to_thread)
                            else:
                                async with _async_unit(unit, event):
                                    await arun(plan.handlers, event, in_thread, self.to_thread)
                                    await _acompletion(store.acomplete(key, token, self.retention))
                finally:
                    await renewer.aremove(token)  # never blocks the loop
            except _ClaimLost:
                return self._answer(plan, IN_FLIGHT, started)
            except BaseException as error:
                handler_time = perf_counter() - handlers_started
                if isinstance(error, _CompletionFailed):  # the store failed: do not wait
                    arelease_later(store.arelease(key, token))
                else:
                    await aguard_release(store.arelease(key, token))
                return self._failed(plan, error, started, handler_time)
            handler_time = perf_counter() - handlers_started
            if unit is None:
                recorder = self._recorder
                try:
                    if recorder is not None and recorder.joined:  # inbox: in the same commit
                        await recorder.acomplete(plan, handler_time, self.retention)
                    else:
                        await store.acomplete(key, token, self.retention)
                except Exception as error:  # as in _execute
                    arelease_later(store.arelease(key, token))
                    if isinstance(error, StoreError):  # the recorder's, already logged
                        raise
                    raise store_failed(error) from error
            return self._answer(plan, self._processed, started, handler_time)
        except WebhookError as error:  # the store: claim, or completion after the handlers
            return self._rejected(error, started, plan, handler_time)

    # -- secrets ------------------------------------------------------------------

    def _secrets_for(self, organization_id: str) -> Any:
        """The resolver's answer for ``o``; a resolver that raises is an outage (503)."""
        try:
            return self._resolver(organization_id)
        except ConfigurationError as error:  # a bug in the callable: 500, and said loudly
            logger.error(
                "service_webhooks: the secrets lookup for %s returned no valid secret: %s",
                loggable(organization_id),
                loggable(str(error)),
            )
            raise
        except WebhookError:
            raise
        except Exception as error:
            # the type only at ERROR: a secret manager's message may quote a credential
            logger.error(
                "service_webhooks: the secrets lookup failed: %s (its message is logged at DEBUG)",
                type(error).__name__,
            )
            logger.debug("service_webhooks: the secrets lookup failed: %s", loggable(str(error)))
            raise SecretsUnavailableError("the secrets lookup failed") from error

    # -- pure steps ---------------------------------------------------------------

    def _authenticate(
        self, method: str, body: bytes, signature: str | bytes | None
    ) -> SignatureHeader:
        """The request-line rule (405, 413) and a well-formed signature header (401)."""
        if type(body) is not bytes:  # a str, bytearray…: TypeError before any answer
            require_body_bytes(body)
        error = _request_line_error(method, len(body), self.max_body_size)
        if error is not None:
            raise error
        if signature is _REPEATED:
            raise SignatureFormatError(f"more than one {SIGNATURE_HEADER} header")
        return parse_signature_header(signature)

    def _prepare(
        self, body: bytes, header: SignatureHeader, secrets: Any, started: float
    ) -> _Plan | Outcome:
        """Every check that needs no I/O; an :class:`Outcome` means answer now."""
        now = self._clock() if self._clock is not None else time.time()
        if secrets is None:
            raise UnknownOrganizationError(
                f"no secret is configured for organization {header.organization_id!r}"
            )
        overlapped = None  # a large body's key is hashed beside the HMAC, on another core
        if self._key_function is None and len(body) >= OVERLAP_FROM:
            overlapped = OverlappedKey.start(header.organization_id, body)
        check(body, header, secrets, self.tolerance, now)
        organization_id = header.organization_id
        is_ascii = body.isascii if overlapped is None else overlapped.is_ascii
        try:
            envelope = decode_checked(body, self.max_body_size, is_ascii)
        except EnvelopeError as error:
            return self._undecodable(error, started, organization_id)
        return self._planned(envelope, organization_id, header.timestamp, body, overlapped, started)

    def _undecodable(self, error: EnvelopeError, started: float, organization_id: str) -> Outcome:
        """400 for a body that is no envelope; but an envelope whose ``data`` is JSON
        that only fails the event's typed model (a schema drift) is answered as
        unhandled when no handler takes that event: nothing would read it, and a 400
        is permanent. Deliveries and replays alike."""
        name, version = error.event_name, error.version
        if (
            error.model_mismatch
            and name is not None
            and version is not None
            and not self.router.handlers_for(name, version)
        ):
            return self._unhandled(name, version, organization_id, started)
        return self._refused(error, started, organization_id, name, version)

    def _unhandled(
        self, event_name: str, version: int, organization_id: str, started: float
    ) -> Outcome:
        """The answer for an event no handler takes (``unhandled_status``)."""
        unhandled = self.unhandled
        outcome = Outcome(
            unhandled.status,
            unhandled.reason,
            (),
            event_name,
            organization_id,
            unhandled.empty_body,
        )
        return self._finish(outcome, started, version)

    def _planned(
        self,
        envelope: Envelope,
        organization_id: str,
        timestamp: int,
        body: bytes,
        overlapped: OverlappedKey | None,
        started: float,
    ) -> _Plan | Outcome:
        """A decoded envelope as the pipeline's plan (its handlers, its event with its
        idempotency key), else the answer now: ``unhandled``, or 422 when the
        ``idempotency_key`` function fails. Deliveries and replays alike."""
        handlers = self.router.handlers_for(envelope.event_name, envelope.version)
        if not handlers:
            return self._unhandled(envelope.event_name, envelope.version, organization_id, started)
        if overlapped is not None:
            key = overlapped.key()
        else:
            key = "" if self._key_function else default_idempotency_key(organization_id, body)
        event: Event[Any] = Event(
            envelope.event_name,
            envelope.version,
            envelope.data,
            organization_id,
            timestamp,
            key,
            body,
        )
        if self._key_function is not None:
            try:
                custom = self._custom_key(self._key_function, event)
            except (Unprocessable, RetryLater, ConfigurationError) as error:
                # Unprocessable: the function refused the event (422, like a handler's,
                # at WARNING); RetryLater: not now (503 with Retry-After, at WARNING,
                # where a handler's is at ERROR); anything else is a bug in it: 500,
                # retried, at ERROR
                cause = error.__cause__
                if isinstance(error, ConfigurationError):
                    level, said = logging.ERROR, "cannot key"
                else:
                    level = logging.WARNING
                    said = "retry later" if isinstance(error, RetryLater) else "refused"
                logger.log(
                    level,
                    "service_webhooks: %s %s: %s",
                    said,
                    loggable(event.name),
                    loggable(str(error)),
                )
                if cause is not None and self._recorder is not None:  # inbox: its traceback
                    note_error(cause)
                error_type = type(error if cause is None else cause).__name__
                return self._refused(
                    error, started, organization_id, event.name, event.version, error_type
                )
            event = msgspec.structs.replace(event, idempotency_key=custom)
        return _Plan(event, handlers, new_token())

    @staticmethod
    def _custom_key(function: KeyFunction, event: Event[Any]) -> str:
        """``o + "," + key``, or ``"sha256:"`` + its SHA-256 when that is too long or
        not storable everywhere (a NUL, which PostgreSQL text refuses, or a lone
        surrogate, which UTF-8 cannot encode): such a key from the event's data failed
        every delivery of the event as a store outage (503) until it died.

        Injective: ``o`` never holds a comma (it ends at one in the header), so no two
        (organization, key) pairs share a key, and a long key is hashed whole, never
        cut. Neither form can equal the other or a default key (64 hex digits).
        """
        try:
            custom = function(event)
        except (Unprocessable, RetryLater):  # on purpose: 422 refused, 503 retried later
            raise
        except Exception as error:  # a bug: 500, so the event is retried once it is fixed
            raise ConfigurationError(
                "idempotency_key function failed on this event: "
                f"{type(error).__name__}: {str(error)[:200]}"
            ) from error
        if not isinstance(custom, str) or not custom:
            raise ConfigurationError(
                f"idempotency_key function returned {_shown(custom)} "
                f"({type(custom).__name__}), not a non-empty str"
            )
        namespaced = f"{event.organization_id},{custom}"
        if len(namespaced) <= _LONGEST_KEY and _storable(namespaced):
            return namespaced
        digest = hashlib.sha256(namespaced.encode("utf-8", "surrogatepass")).hexdigest()
        return "sha256:" + digest

    def _answer(
        self,
        plan: _Plan,
        outcome: Outcome,
        started: float,
        handler_time: float | None = None,
        detail: str = "",
        error_type: str | None = None,
    ) -> Outcome:
        """``outcome`` for a decoded, verified event: named after it, then finished."""
        event = plan.event
        answer = Outcome(
            outcome.status,
            outcome.reason,
            outcome.headers,
            event.name,
            event.organization_id,
            outcome.empty_body,
        )
        return self._finish(
            answer, started, event.version, event.idempotency_key, handler_time, detail, error_type
        )

    def _failed(
        self, plan: _Plan, error: BaseException, started: float, handler_time: float
    ) -> Outcome:
        """After a handler raised (its claim already released): hooks, log, answer."""
        if not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, CancelledError...: released, now propagate
        if self._recorder is not None:  # inbox: keep the exception's message and traceback
            note_error(error)
        for hook in () if isinstance(error, _CompletionFailed) else self.router.error_hooks:
            try:
                hook(plan.event, error)
            except Exception:
                logger.exception("service_webhooks: an error hook raised")
        error_type = type(error).__name__
        name = loggable(plan.event.name)
        if isinstance(error, _CompletionFailed):  # the store failed inside the unit of work
            return self._rejected(error.error, started, plan)
        if isinstance(error, Unprocessable):
            logger.warning("service_webhooks: handler refused %s: %s", name, loggable(str(error)))
            outcome = outcome_for_error(error)
            return self._answer(plan, outcome, started, handler_time, str(error), error_type)
        if isinstance(error, (RetryLater, StoreError)):  # e.g. a task queue refused it: 503
            said = loggable(str(error))  # RetryLater() says nothing: no dangling ": "
            logger.error(
                "service_webhooks: %s for %s%s", error.reason, name, f": {said}" if said else ""
            )
            outcome = outcome_for_error(error)
            return self._answer(plan, outcome, started, handler_time, str(error), error_type)
        logger.error(
            "service_webhooks: handler for %s failed; answered 500 so the service retries",
            name,
            exc_info=error,
        )
        return self._answer(plan, HANDLER_FAILED, started, handler_time, "", error_type)

    def _rejected(
        self,
        error: WebhookError,
        started: float,
        plan: _Plan | None = None,
        handler_time: float | None = None,
    ) -> Outcome:
        """The answer for one of the library's errors (``plan``: raised after decoding;
        ``handler_time``: after the handlers ran, so that the log line and the inbox
        show that a store failure at completion came once they had run: the retry runs
        them again)."""
        outcome = outcome_for_error(error)
        cause = error.__cause__
        error_type = type(cause).__name__ if isinstance(error, StoreError) and cause else None
        if plan is not None:
            return self._answer(plan, outcome, started, handler_time, str(error), error_type)
        return self._finish(outcome, started, None, None, None, str(error), error_type)

    def _refused(
        self,
        error: WebhookError,
        started: float,
        organization_id: str,
        event_name: str | None,
        version: int | None,
        error_type: str | None = None,
    ) -> Outcome:
        """The answer for an authenticated delivery refused before it became a plan (a
        body that is no envelope, a failed ``idempotency_key``: ``error_type`` names what
        it raised): it names the organization, and the event when known (a schema
        drift's, from the envelope)."""
        outcome = outcome_for_error(error)
        answer = Outcome(
            outcome.status, outcome.reason, outcome.headers, event_name, organization_id
        )
        return self._finish(answer, started, version, None, None, str(error), error_type)

    def _finish(
        self,
        outcome: Outcome,
        started: float,
        version: int | None = None,
        key: str | None = None,
        handler_time: float | None = None,
        detail: str = "",
        error_type: str | None = None,
    ) -> Outcome:
        """The one exit of every delivery: record it when someone listens, return it."""
        if self._recorder is not None:  # inbox: the details of this answer
            note_finish(self._recorder, outcome, version, key, handler_time, detail, error_type)
        observers = self._observers
        if observers or logger.isEnabledFor(logging.INFO):
            record = DeliveryRecord(
                outcome,
                perf_counter() - started,
                version,
                None if key is None else key[:KEY_PREFIX_LENGTH],
                handler_time,
                detail,
                error_type,
            )
            if self._recorder is None or not defer_report(record):
                self._report(record)
        return outcome

    def _report(self, record: DeliveryRecord) -> None:
        """The one report of a delivery: its log line, then every outcome observer."""
        log_record(record)
        for observer in self._observers:
            try:
                observer(record)
            except Exception as error:  # its own traceback only, not the handler's
                error.__suppress_context__ = True  # (a failed delivery ends in an except)
                logger.exception("service_webhooks: an outcome observer raised")


def _storable(key: str) -> bool:
    """Whether every store keeps ``key`` as it is: no NUL, and UTF-8 encodable."""
    if "\x00" in key:
        return False
    if key.isascii():
        return True
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(value: object) -> str:
    """``repr(value)`` short enough for one log line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _finite(seconds: float) -> bool:
    """Whether ``seconds`` is finite as a float (an int too large for one is not)."""
    try:
        return math.isfinite(seconds)
    except OverflowError:
        return False


def require_positive_seconds(name: str, value: object) -> None:
    """Refuse a duration that is not a finite ``int`` or ``float`` above 0 and at most
    :data:`~service_webhooks.stores._base.MAX_DURATION` (a lease: the renewer wakes every
    third of it, and the stores compute expiry times from it).

    Raises:
        ConfigurationError: Naming ``name``: a wrong type, 0 or less, NaN, infinity, an
            int too large for a float, or more than 1000 years.
    """
    _require_number(name, value, "a finite number of seconds > 0")
    seconds = cast("float", value)  # an int or a float now
    if not (seconds > 0 and _finite(seconds)):
        raise ConfigurationError(f"{name} must be a finite number of seconds > 0")
    if seconds > MAX_DURATION:  # an expiry time no backend can hold
        raise ConfigurationError(f"{name} must be at most {MAX_DURATION} seconds (1000 years)")


def _require_number(name: str, value: object, expected: str, *, integer: bool = False) -> None:
    """Refuse a constructor argument of the wrong type (a ``str`` from the environment,
    a ``bool``, a ``float`` where bytes or a status are counted), naming it."""
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ConfigurationError(f"{name} must be {expected}, not {type(value).__name__}")


def _request_line_error(method: str, size: int | None, limit: int) -> WebhookError | None:
    """405 for a method other than POST (spec §6.1), 413 for a body over ``limit`` bytes
    (spec §2.7); ``None`` when neither applies. ``size`` is ``None`` when not known."""
    if method != "POST":  # methods are case-sensitive (RFC 9110 §9.1): "post" is not POST
        return MethodNotAllowedError(f"deliveries are POST requests, not {method[:16]!r}")
    if size is not None and size > limit:
        return _too_large(limit)
    return None


def _scan_headers(
    headers: Headers,
) -> tuple[str | bytes | None, int | None, str | bytes | None, str | bytes | None]:
    """In one pass over the header lines: the ``Service-Signature`` value
    (:data:`_REPEATED` for two lines or more), the declared ``Content-Length`` (``None``
    when absent, not a number, or overridden by a ``Transfer-Encoding``, RFC 9112 §6.3),
    and the raw ``Content-Type`` and ``User-Agent`` the inbox keeps (the last of each;
    :func:`_text` makes them text). Every other line costs one ``lower`` and one lookup."""
    signature: str | bytes | None = None
    length: int | None = None
    chunked = False
    content_type: str | bytes | None = None
    user_agent: str | bytes | None = None
    slots = _SLOTS
    try:
        for name, value in headers:
            slot = slots.get(name.lower())
            if slot is None:
                continue
            if slot == _SIGNATURE:
                signature = value if signature is None else _REPEATED
            elif slot == _LENGTH:  # ASCII digits only (RFC 9110 §8.6): int() refuses "²"
                if value.isdigit() and value.isascii() and len(value) <= _LENGTH_DIGITS:
                    length = int(value)
                else:
                    length = _long_length(value)
            elif slot == _TRANSFER_ENCODING:
                chunked = True
            elif slot == _CONTENT_TYPE:
                content_type = value
            else:
                user_agent = value
    except (TypeError, ValueError, AttributeError):  # free unless raised
        if isinstance(headers, Mapping) or hasattr(headers, "raw"):
            raise TypeError(
                "headers must be (name, value) pairs, one per header line, not a mapping "
                f"({type(headers).__name__}); pass the server's list (ASGI scope['headers'], "
                "Starlette request.headers.raw) or headers.items()"
            ) from None
        raise
    return signature, None if chunked else length, content_type, user_agent


_LENGTH_DIGITS = 18  # a Content-Length this long is read as is: below 2**63
_HUGE_LENGTH = 10**_LENGTH_DIGITS  # what a longer one stands for: over every body limit


def _long_length(value: str | bytes) -> int | None:
    """A ``Content-Length`` that is not 1-18 ASCII digits: ``None`` when it is no
    number, else its value, or :data:`_HUGE_LENGTH` past 18 significant digits (so
    ``int()`` never meets the 4,300 digits it refuses: a 413, not a 500)."""
    if not (value.isdigit() and value.isascii()):
        return None
    digits = value.lstrip(b"0") if isinstance(value, bytes) else value.lstrip("0")
    return int(digits or 0) if len(digits) <= _LENGTH_DIGITS else _HUGE_LENGTH


def _text(value: str | bytes | None) -> str | None:
    """A header value kept in the inbox: text (bytes read as Latin-1), at most 512 characters."""
    if value is None:
        return None
    return (value.decode("latin-1") if isinstance(value, bytes) else value)[:512]


def _too_large(limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"body is larger than {limit} bytes")


_SIGNATURE, _LENGTH, _TRANSFER_ENCODING, _CONTENT_TYPE, _USER_AGENT = range(5)
_SLOTS: dict[str | bytes, int] = {}  # lower-cased header name, str or bytes -> its slot
for _name, _slot in (
    (SIGNATURE_HEADER.lower(), _SIGNATURE),
    ("content-length", _LENGTH),
    ("transfer-encoding", _TRANSFER_ENCODING),
    ("content-type", _CONTENT_TYPE),
    ("user-agent", _USER_AGENT),
):
    _SLOTS[_name] = _SLOTS[_name.encode()] = _slot
del _name, _slot


class _ClaimLost(Exception):
    """Completing found another delivery's claim: roll the unit of work back."""


class _CompletionFailed(Exception):
    """The store failed while completing inside a unit of work: roll it back."""

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.error = error


def _completion(complete: Callable[[str, str, float], bool], *args: Any) -> None:
    try:
        done = guard(complete, *args)
    except StoreError as error:
        raise _CompletionFailed(error) from error.__cause__
    if not done:
        raise _ClaimLost


async def _acompletion(completing: Coroutine[Any, Any, bool]) -> None:
    try:
        done = await aguard(completing)
    except StoreError as error:
        raise _CompletionFailed(error) from error.__cause__
    if not done:
        raise _ClaimLost


def _check_argument_types(body: object, signature: object) -> None:
    """Raise a :class:`TypeError` naming the argument of ``process``/``aprocess`` that
    has the wrong type, if one has (called once a ``TypeError`` escaped them)."""
    require_body_bytes(body)
    if signature is not None and not isinstance(signature, (str, bytes)):
        raise TypeError(
            "signature must be the Service-Signature header's value (str or bytes) or "
            f"None, not {type(signature).__name__}; pass headers['Service-Signature']"
        )


def _sync_unit(unit: UnitOfWork, event: Event[Any]) -> AbstractContextManager[object]:
    context = unit(event)
    if not isinstance(context, AbstractContextManager):
        raise ConfigurationError(
            "unit_of_work returned no context manager usable from process(); "
            "an async one works only under aprocess()"
        )
    return context


def _async_unit(unit: UnitOfWork, event: Event[Any]) -> AbstractAsyncContextManager[object]:
    context = unit(event)
    if isinstance(context, AbstractAsyncContextManager):
        return context
    if isinstance(context, AbstractContextManager):
        return _AsyncOf(context)
    raise ConfigurationError("unit_of_work must return a context manager")


class _AsyncOf(AbstractAsyncContextManager[object]):
    """A plain context manager entered and exited from the event loop."""

    def __init__(self, context: AbstractContextManager[object]) -> None:
        self._context = context

    async def __aenter__(self) -> object:
        return self._context.__enter__()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return self._context.__exit__(*exc_info)


def _close(opened: object) -> None:
    """``opened.close()`` when it has one (stores and inboxes that hold connections)."""
    closer = getattr(opened, "close", None)
    if closer is not None:
        closer()
