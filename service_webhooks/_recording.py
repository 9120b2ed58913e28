"""The inbox's side of the receive pipeline: record each authenticated delivery, replay one.

How it plugs into :class:`~service_webhooks._receiver.WebhookReceiver` (the places are
marked ``# inbox:`` there):

* ``process``/``aprocess`` hand the delivery to :meth:`Recorder.process` /
  :meth:`Recorder.aprocess` when an inbox is configured. It opens a :class:`Note` (a
  per-delivery scratch pad in a context variable), runs the ordinary pipeline, and
  then writes one :class:`~service_webhooks.inbox.ReceivedDelivery`, durably, *before*
  the answer is returned. If that write fails the answer is 503 ``store_unavailable``:
  never a 2xx for a delivery that could not be recorded. This is the one extra round
  trip the inbox costs.
* When the inbox and the idempotency store share a database (a SQLite file; a
  PostgreSQL connection string), a *processed* delivery's record is written in the
  completion's own transaction instead (:meth:`Recorder.complete`, through the
  store's ``complete_with``): both rows or neither, and no extra round trip. In a
  SQLite file the other records go through the store's connection too (its
  ``write``/``awrite``): under asyncio they join the store's group commit.
* The one record written *after* its answer: a 503 ``store_unavailable`` that the
  store's database gave while the inbox is in that database. In a SQLite file it is
  tried once (a lock fails at once); in PostgreSQL, where a database that stopped
  answering holds every call for the timeout, it is written in the background
  (:mod:`._background`), so the answer comes after one timeout, not two.
* ``_finish`` (every answer's exit) and ``_failed`` (a handler raised) fill the note:
  version, key, handler time, detail, the exception and its traceback.
* Deliveries refused before their signature was verified are not stored (their bodies
  are untrusted); :meth:`Inbox.count_rejected` counts them per reason, in memory.

:func:`replay` / :func:`areplay` run the handlers again on a stored body, through the
receiver's own claim/handlers/complete step (``_execute``), so the idempotency rules
are the same as for a delivery; ``force=True`` runs the handlers of a key already
processed. The timestamp is never checked again (the body comes from the inbox,
which only holds verified deliveries) and nothing from outside the inbox is accepted.
"""

from __future__ import annotations

import datetime
import logging
import time
import traceback
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from time import perf_counter
from typing import TYPE_CHECKING, Any, overload

import msgspec

from ._background import ain_background, in_background
from ._dispatch import arun, run
from ._envelope import decode_envelope
from ._exceptions import ConfigurationError, EnvelopeError, StoreError
from ._idempotency import (
    DEFAULT_SQLITE_PATH,
    aguard,
    default_idempotency_key,
    describe,
    guard,
)
from ._outcome import DeliveryRecord, Outcome, outcome_for_error
from ._storage_url import POSTGRES_SCHEMES, scheme_of
from .inbox._base import Inbox, ReceivedDelivery, Replay, from_micros, new_record_id
from .inbox._sql import SQLInbox
from .inbox._sqlite import SQLiteInbox
from .inbox._url import inbox_from_url
from .stores._base import IdempotencyStore
from .stores._sqlite import SQLiteStore

if TYPE_CHECKING:
    from ._receiver import WebhookReceiver, _Plan

__all__ = ["InboxConfig", "Note", "Recorder", "areplay", "forced_replay", "open_inbox", "replay"]

logger = logging.getLogger("service_webhooks")

InboxConfig = Inbox | str | bool | None
"""What ``WebhookReceiver(inbox=...)`` accepts (see :func:`open_inbox`)."""

_MAX_MESSAGE = 2000  # characters of a handler exception's message kept
_MAX_TRACEBACK = 16 * 1024  # characters of its traceback kept (the end: where it raised)

_INBOX_METHODS = ("record", "add_replay", "get", "search", "arecord", "count_rejected")

_current: ContextVar[Note | None] = ContextVar("service_webhooks_inbox_note", default=None)
_forcing: ContextVar[str | None] = ContextVar("service_webhooks_forced_replay", default=None)
_NO_SPAN: AbstractContextManager[object] = nullcontext()  # reusable: no tracer configured


def open_inbox(
    config: InboxConfig, store_config: IdempotencyStore | str | None, store: IdempotencyStore
) -> Inbox | None:
    """The inbox a receiver's ``inbox=`` names.

    ``None`` (the default): a SQLite inbox in the idempotency store's file (with its
    lock ``timeout``) when that store is the default one or a SQLite store, else none.
    ``True``: the same, and also beside a ``postgresql://`` store URL; an error when no
    inbox can go beside the store. ``False``: none. A URL:
    :func:`~service_webhooks.inbox.inbox_from_url`. An
    :class:`~service_webhooks.inbox.Inbox`: itself.

    Raises:
        ConfigurationError: Anything else, or ``True`` beside a store with no inbox.
    """
    if config is False:
        return None
    if config is None or config is True:
        if store_config is None:
            return SQLiteInbox(DEFAULT_SQLITE_PATH)
        if isinstance(store, SQLiteStore):  # in its file, waiting as long for its lock
            return SQLiteInbox(store.path, timeout=store.timeout)
        if (
            config is True
            and isinstance(store_config, str)
            and scheme_of(store_config.strip()) in POSTGRES_SCHEMES
        ):
            return inbox_from_url(store_config)
        if config is True:
            raise ConfigurationError(
                "inbox=True needs a SQLite or PostgreSQL store URL; pass inbox=URL or an Inbox"
            )
        return None
    if isinstance(config, str):
        return inbox_from_url(config)
    if not all(callable(getattr(config, name, None)) for name in _INBOX_METHODS):
        raise ConfigurationError("inbox must be an Inbox, a URL, True, False or None")
    return config


class Note:
    """What the pipeline tells the inbox about one delivery (or one replay) while it runs."""

    __slots__ = (
        "body",
        "content_type",
        "detail",
        "error",
        "error_type",
        "handler_time",
        "key",
        "live",
        "received",
        "recorded",
        "report",
        "signature",
        "user_agent",
        "version",
    )

    def __init__(
        self,
        body: bytes,
        signature: str | bytes | None,
        content_type: str | None,
        user_agent: str | None,
        *,
        live: bool = False,
    ) -> None:
        self.received = time.time()
        self.body = body
        self.signature = signature
        self.content_type = content_type
        self.user_agent = user_agent
        self.version: int | None = None
        self.key: str | None = None
        self.handler_time: float | None = None
        self.detail = ""
        self.error_type: str | None = None
        self.error: BaseException | None = None
        self.live = live  # a delivery (not a replay): its record is still to be written
        self.recorded = False  # written with the completion (Recorder.complete)
        self.report: DeliveryRecord | None = None  # reported once the answer is final


def note_finish(
    recorder: Recorder,
    outcome: Outcome,
    version: int | None,
    key: str | None,
    handler_time: float | None,
    detail: str,
    error_type: str | None,
) -> None:
    """Called by the receiver's ``_finish``: the answer's details. An answer given
    outside :meth:`Recorder.process` (``precheck``, or ``handle`` refusing before the
    body was read) is a refusal before authentication: counted."""
    note = _current.get()
    if note is None:
        if outcome.organization_id is None:
            recorder.inbox.count_rejected(outcome.reason)
    else:
        note.version, note.key, note.handler_time = version, key, handler_time
        note.detail, note.error_type = detail, error_type


def defer_report(record: DeliveryRecord) -> bool:
    """Called by the receiver's ``_finish``: keep ``record`` until the delivery is
    recorded, since a failed record turns the answer into 503 and the log line, the
    observers and the span must tell the answer sent; or until a replay's answer is
    final (a forced replay answers ``duplicate`` before its handlers run again: one
    report, of the answer it returns). ``False``: no delivery or replay is being
    recorded, so report it now."""
    note = _current.get()
    if note is None:
        return False
    note.report = record
    return True


def note_error(error: BaseException) -> None:
    """Called by the receiver's ``_failed``: the handler's exception (for its traceback)."""
    note = _current.get()
    if note is not None:
        note.error = error


class Recorder:
    """Runs a receiver's pipeline for one delivery and records it in the inbox."""

    def __init__(self, receiver: WebhookReceiver, inbox: Inbox) -> None:
        self.receiver = receiver
        self.inbox = inbox
        self._joined_inbox = (
            inbox if isinstance(inbox, SQLInbox) and inbox.shares_database(receiver.store) else None
        )
        """The inbox when a processed delivery's record goes in the completion's
        transaction (it and the store share a database), else ``None``."""
        store = receiver.store
        self._writer = (
            store if self._joined_inbox is not None and isinstance(store, SQLiteStore) else None
        )
        """The store when the other records go through its own connection too (a
        SQLite file: under asyncio they then join its group commit, instead of taking a
        worker thread and a connection that contends with it for the write lock)."""

    @property
    def joined(self) -> bool:
        """Whether a processed delivery's record goes in the completion's transaction."""
        return self._joined_inbox is not None

    def _joined_record(
        self, plan: _Plan, handler_time: float
    ) -> tuple[Note, SQLInbox, str, list[Any]] | None:
        """The live delivery's note, the inbox and its record as a statement, for a
        completion; ``None`` for a replay or an inbox in another database."""
        note = _current.get()
        inbox = self._joined_inbox
        if note is None or not note.live or inbox is None:
            return None  # a replay: recorded on its delivery (add_replay), not as a new one
        event = plan.event
        note.version, note.key = event.version, event.idempotency_key
        note.handler_time = handler_time
        micros = int(note.received * 1_000_000)
        statement, params = inbox.processed_statement(
            new_record_id(micros),
            micros,
            _storable(event.organization_id),
            _storable(event.name),
            _storable_version(event.version),
            _storable(event.idempotency_key),
            note.body,
            _storable(note.content_type),
            _storable(note.user_agent),
            handler_time,
        )
        return note, inbox, statement, params

    def complete(self, plan: _Plan, handler_time: float, retention: float) -> None:
        """Complete the claim and record the processed delivery in one transaction.

        Raises:
            StoreError: The store failed: neither row was written (the answer is 503,
                and the recorder then tries to record that answer on its own).
        """
        store: Any = self.receiver.store
        key, token = plan.event.idempotency_key, plan.token
        joined = self._joined_record(plan, handler_time)
        if joined is None:
            guard(store.complete, key, token, retention)
            return
        note, inbox, statement, params = joined
        guard(store.complete_with, key, token, retention, statement, params)
        note.recorded = True
        inbox.recorded()

    async def acomplete(self, plan: _Plan, handler_time: float, retention: float) -> None:
        """Async twin of :meth:`complete`."""
        store: Any = self.receiver.store
        key, token = plan.event.idempotency_key, plan.token
        joined = self._joined_record(plan, handler_time)
        if joined is None:
            await aguard(store.acomplete(key, token, retention))
            return
        note, inbox, statement, params = joined
        await aguard(store.acomplete_with(key, token, retention, statement, params))
        note.recorded = True
        await inbox.arecorded()

    def process(
        self,
        body: bytes,
        signature: str | bytes | None,
        method: str,
        content_type: str | None,
        user_agent: str | None,
    ) -> Outcome:
        receiver = self.receiver
        note = Note(body, signature, content_type, user_agent, live=True)
        reset = _current.set(note)
        try:
            tracer = receiver.tracer
            with _NO_SPAN if tracer is None else tracer.delivery():
                outcome = receiver._process(body, signature, method, tracer)
                delivery = self._unwritten(note, outcome)
                failure = None
                if delivery is not None:
                    try:
                        self._record(delivery)
                    except Exception as error:
                        failure = error
                outcome = self._settled(note, outcome, failure)  # reported in the span
        finally:
            _current.reset(reset)
        return outcome

    async def aprocess(
        self,
        body: bytes,
        signature: str | bytes | None,
        method: str,
        content_type: str | None,
        user_agent: str | None,
    ) -> Outcome:
        receiver = self.receiver
        note = Note(body, signature, content_type, user_agent, live=True)
        reset = _current.set(note)
        try:
            tracer = receiver.tracer
            with _NO_SPAN if tracer is None else tracer.delivery():
                outcome = await receiver._aprocess(body, signature, method, tracer)
                delivery = self._unwritten(note, outcome)
                failure = None
                if delivery is not None:
                    try:
                        await self._arecord(delivery)
                    except Exception as error:
                        failure = error
                outcome = self._settled(note, outcome, failure)
        finally:
            _current.reset(reset)
        return outcome

    def _unwritten(self, note: Note, outcome: Outcome) -> ReceivedDelivery | None:
        """The record still to write for this answer: ``None`` when the completion
        wrote it (in its transaction) or when none is kept (a refusal before
        authentication, counted instead)."""
        return None if note.recorded else self._delivery(note, outcome)

    def _settled(self, note: Note, outcome: Outcome, failure: Exception | None) -> Outcome:
        """The answer to send (503 when the record could not be written: ``failure``),
        and the one report of the delivery, which ``_finish`` deferred until now so that
        the log line, the observers and the span tell that answer."""
        if failure is not None:
            outcome = _unrecorded(outcome, failure)
        record = note.report
        if record is not None:
            if failure is not None:
                record = msgspec.structs.replace(
                    record, outcome=outcome, detail=_INBOX_DOWN, error_type=type(failure).__name__
                )
            self.receiver._report(record)
        return outcome

    def _record(self, delivery: ReceivedDelivery) -> None:
        """Write a record that no completion carried (raises what the write raised)."""
        writer, inbox = self._writer, self._joined_inbox
        if writer is None or inbox is None:
            if inbox is not None and not _store_answered(delivery):
                in_background(self._record_after, delivery)
                return
            self.inbox.record(delivery)
            return
        writer.write(*inbox.record_statement(delivery), wait=_store_answered(delivery))
        inbox.recorded()

    async def _arecord(self, delivery: ReceivedDelivery) -> None:
        """Async twin of :meth:`_record`."""
        writer, inbox = self._writer, self._joined_inbox
        if writer is None or inbox is None:
            if inbox is not None and not _store_answered(delivery):
                ain_background(self._arecord_after(delivery))
                return
            await self.inbox.arecord(delivery)
            return
        await writer.awrite(*inbox.record_statement(delivery), wait=_store_answered(delivery))
        await inbox.arecorded()

    # The store's PostgreSQL database failed this delivery (503 store_unavailable), and
    # the inbox is in it: a database that stopped answering would hold the record for a
    # whole timeout more, bringing the answer to the service's 10 s response wait (spec
    # §8). The answer is 503 whether the record is written or not, so it is written
    # after the answer. (In a SQLite file it is tried once instead: a lock fails at once.)

    def _record_after(self, delivery: ReceivedDelivery) -> None:
        try:
            self.inbox.record(delivery)
        except Exception as error:
            _not_recorded(delivery, error)

    async def _arecord_after(self, delivery: ReceivedDelivery) -> None:
        try:
            await self.inbox.arecord(delivery)
        except Exception as error:
            _not_recorded(delivery, error)

    def _delivery(self, note: Note, outcome: Outcome) -> ReceivedDelivery | None:
        """The record for an authenticated delivery; ``None`` (counted) for the rest."""
        organization_id = outcome.organization_id
        if organization_id is None:  # answered before the signature was verified
            self.inbox.count_rejected(outcome.reason)
            return None
        key = note.key
        if key is None and outcome.event_name is not None and not self.receiver._key_function:
            key = default_idempotency_key(organization_id, note.body)  # unhandled: no key yet
        error = note.error
        message = trace = None
        if error is not None:
            message = str(error)[:_MAX_MESSAGE]
            trace = "".join(traceback.format_exception(error))[-_MAX_TRACEBACK:]
        micros = int(note.received * 1_000_000)
        return ReceivedDelivery(
            id=new_record_id(micros),
            received_at=from_micros(micros),
            organization_id=_storable(organization_id),
            event_name=_storable(outcome.event_name),
            version=_storable_version(note.version),
            idempotency_key=_storable(key),
            body=note.body,
            content_type=_storable(note.content_type),
            user_agent=_storable(note.user_agent),
            status=outcome.status,
            reason=outcome.reason,
            detail=_storable(note.detail),
            error_type=_storable(note.error_type),
            error_message=_storable(message),
            traceback=_storable(trace),
            handler_time=note.handler_time,
        )


@overload
def _storable(text: str) -> str: ...
@overload
def _storable(text: str | None) -> str | None: ...
def _storable(text: str | None) -> str | None:
    """``text`` any database can store: no NUL, no lone surrogate (both become
    replacement characters). The body keeps the exact bytes."""
    if text is None or (text.isascii() and "\x00" not in text):
        return text
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")


def _storable_version(version: int | None) -> int | None:
    """``version`` when a 64-bit column holds it, else ``None`` (the body still has it)."""
    return version if version is None or -(2**63) <= version < 2**63 else None


def _store_answered(delivery: ReceivedDelivery) -> bool:
    """Whether the store gave this answer. When it did not (503 ``store_unavailable``),
    a record through the same SQLite file is tried once: the store has just waited its
    whole timeout for the lock, and a second wait would double the answer's time."""
    return delivery.reason != "store_unavailable"


_INBOX_DOWN = "the inbox is unavailable"


def _not_recorded(delivery: ReceivedDelivery, error: Exception) -> None:
    """Log a record written after its answer (503) that failed: the answer stands."""
    logger.error(
        "service_webhooks: could not record a delivery answered %s in the inbox (%s)",
        delivery.reason,
        describe(error) if isinstance(error, ConfigurationError) else type(error).__name__,
    )


def _unrecorded(outcome: Outcome, error: Exception) -> Outcome:
    """503: the delivery could not be recorded, so the service must send it again."""
    logger.error(
        "service_webhooks: could not record a delivery answered %s in the inbox (%s); answered 503",
        outcome.reason,
        # a driver's message may quote the row (the payload); the library's own names a fix
        describe(error) if isinstance(error, ConfigurationError) else type(error).__name__,
    )
    answer = outcome_for_error(StoreError(_INBOX_DOWN))
    return Outcome(
        answer.status, answer.reason, answer.headers, outcome.event_name, outcome.organization_id
    )


# -- replay -------------------------------------------------------------------------------

NO_INBOX = "this receiver keeps no inbox (inbox=False, or no inbox= beside a memory or Redis store)"
"""Why a receiver cannot replay: the words every command that replays uses."""


def _stored(receiver: WebhookReceiver, delivery_id: str) -> tuple[Inbox, ReceivedDelivery]:
    inbox = receiver.inbox
    if inbox is None:
        raise ConfigurationError(f"{NO_INBOX}: nothing to replay")
    record = inbox.get(delivery_id)
    if record is None:
        raise KeyError(f"no delivery {delivery_id[:40]!r} in the inbox")
    return inbox, record


def _plan(receiver: WebhookReceiver, record: ReceivedDelivery, started: float) -> _Plan | Outcome:
    """The stored delivery as the pipeline's plan (handlers found), else the answer now."""
    organization_id = record.organization_id
    try:
        envelope = decode_envelope(record.body, max_size=max(len(record.body), 1))
    except EnvelopeError as error:  # e.g. a schema drift, replayed before the fix
        return receiver._undecodable(error, started, organization_id)
    arrived = int(record.received_at.timestamp())  # t is not kept; the arrival time stands in
    return receiver._planned(envelope, organization_id, arrived, record.body, None, started)


def forced_replay() -> str | None:
    """A token unique to the forced replay whose handlers run now (``force=True`` on a
    key already processed), else ``None``. :class:`~service_webhooks.handoff.CeleryHandoff`
    hands it to its task, so the worker's own deduplication does not take the forced
    run for a duplicate of the first one."""
    return _forcing.get()


def _forced(receiver: WebhookReceiver, plan: _Plan, started: float) -> Outcome:
    """Run the handlers of a key already processed (``force=True``): no claim is taken
    (the key stays done), the unit of work still wraps them, a failure is answered as
    for a delivery."""
    from ._receiver import _sync_unit

    handlers_started = perf_counter()
    unit = receiver.unit_of_work
    forcing = _forcing.set(plan.token)
    try:
        if unit is None:
            run(plan.handlers, plan.event)
        else:
            with _sync_unit(unit, plan.event):
                run(plan.handlers, plan.event)
    except BaseException as error:
        return receiver._failed(plan, error, started, perf_counter() - handlers_started)
    finally:
        _forcing.reset(forcing)
    return receiver._answer(plan, receiver._processed, started, perf_counter() - handlers_started)


async def _aforced(receiver: WebhookReceiver, plan: _Plan, started: float) -> Outcome:
    """Async twin of :func:`_forced`."""
    from ._receiver import _async_unit

    handlers_started = perf_counter()
    unit = receiver.unit_of_work
    in_thread = receiver.sync_handlers_in_thread
    forcing = _forcing.set(plan.token)
    try:
        if unit is None:
            await arun(plan.handlers, plan.event, in_thread, receiver.to_thread)
        else:
            async with _async_unit(unit, plan.event):
                await arun(plan.handlers, plan.event, in_thread, receiver.to_thread)
    except BaseException as error:
        return receiver._failed(plan, error, started, perf_counter() - handlers_started)
    finally:
        _forcing.reset(forcing)
    return receiver._answer(plan, receiver._processed, started, perf_counter() - handlers_started)


_DONE_REASONS = frozenset({"processed", "duplicate"})


def _was_processed(record: ReceivedDelivery) -> bool:
    """Whether the inbox itself shows this delivery's key processed: answered
    ``processed`` or ``duplicate``, or replayed to ``processed``. The store forgets a
    done key after its ``retention`` (72 hours by default) while the inbox keeps the
    record 30 days: a replay without ``force`` then still runs nothing."""
    return record.reason in _DONE_REASONS or any(
        replay.reason == "processed" for replay in record.replays
    )


def _replay_of(note: Note, outcome: Outcome, forced: bool) -> Replay:
    return Replay(
        at=datetime.datetime.now(datetime.UTC),
        status=outcome.status,
        reason=outcome.reason,
        forced=forced,
        handler_time=note.handler_time,
        error_type=note.error_type,
    )


def _report_replay(receiver: WebhookReceiver, note: Note) -> None:
    """The one report (log line, observers) of a replay: its final answer, which
    ``_finish`` deferred (:func:`defer_report`)."""
    if note.report is not None:
        receiver._report(note.report)


def replay(receiver: WebhookReceiver, delivery_id: str, *, force: bool = False) -> Outcome:
    """See :meth:`WebhookReceiver.replay`."""
    inbox, record = _stored(receiver, delivery_id)
    started = perf_counter()
    note = Note(record.body, None, record.content_type, record.user_agent)
    reset = _current.set(note)
    forced = False
    try:
        plan = _plan(receiver, record, started)
        if isinstance(plan, Outcome):
            outcome = plan
        elif not force and _was_processed(record):
            outcome = receiver._answer(plan, receiver._duplicate, started)
        else:
            outcome = receiver._execute(plan, started, None)
            if force and outcome.reason == "duplicate":
                forced = True
                outcome = _forced(receiver, plan, started)
    finally:
        _current.reset(reset)
    _report_replay(receiver, note)
    inbox.add_replay(record.id, _replay_of(note, outcome, forced))
    return outcome


async def areplay(receiver: WebhookReceiver, delivery_id: str, *, force: bool = False) -> Outcome:
    """See :meth:`WebhookReceiver.areplay`."""
    inbox = receiver.inbox
    if inbox is None:
        raise ConfigurationError(f"{NO_INBOX}: nothing to replay")
    record = await inbox.aget(delivery_id)
    if record is None:
        raise KeyError(f"no delivery {delivery_id[:40]!r} in the inbox")
    started = perf_counter()
    note = Note(record.body, None, record.content_type, record.user_agent)
    reset = _current.set(note)
    forced = False
    try:
        plan = _plan(receiver, record, started)
        if isinstance(plan, Outcome):
            outcome = plan
        elif not force and _was_processed(record):
            outcome = receiver._answer(plan, receiver._duplicate, started)
        else:
            outcome = await receiver._aexecute(plan, started, None)
            if force and outcome.reason == "duplicate":
                forced = True
                outcome = await _aforced(receiver, plan, started)
    finally:
        _current.reset(reset)
    _report_replay(receiver, note)
    await inbox.aadd_replay(record.id, _replay_of(note, outcome, forced))
    return outcome
