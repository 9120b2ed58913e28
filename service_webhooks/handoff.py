"""Hand slow work to Celery: answer the service in milliseconds, run the handler later.

The service waits at most 10 s for an answer (spec §3.3). When a handler may take
longer, register it on a :class:`CeleryHandoff` instead of the receiver: the receiver
still verifies, decodes and *claims* the delivery, then its only handler enqueues the
event to a Celery task and the receiver answers 200 once the broker has accepted the
message. A Celery worker rebuilds the same :class:`~service_webhooks._events.Event`
from the raw body and runs your handlers::

    app = Celery("hooks", broker="redis://127.0.0.1:6379/1")
    handoff = CeleryHandoff(app)

    @handoff.on("note.created")          # runs in the Celery worker
    def index_note(event): ...

    receiver = WebhookReceiver(secrets=..., store=RedisStore.from_url(...))
    handoff.attach(receiver)             # the receiver enqueues and answers 200

The delivery's idempotency claim happens before the enqueue, so a duplicated delivery
is enqueued once. If the broker does not accept the message, :meth:`enqueue` raises
:class:`HandoffError` (a :class:`~service_webhooks.RetryLater`) and the receiver
answers 503 (the claim is released, so the service's retry enqueues again): never
2xx for an event that is not safely queued.
With RabbitMQ, set ``broker_transport_options={"confirm_publish": True}`` so
"accepted" means confirmed by the broker; Redis accepts synchronously.

Celery itself delivers at least once (the task acks late and requeues its message
when its worker is lost, by default; a Redis visibility timeout re-delivers too).
Pass ``store=`` to also deduplicate on the worker: each task then claims
``"task:" + idempotency key`` before running the handlers. A worker whose store fails
that claim sends the task again, to run one lease later, rather than failing it (a
failed task's message is acknowledged, and it is the event's only copy).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ._dispatch import Router
from ._envelope import decode_envelope
from ._events import Event
from ._exceptions import ConfigurationError, RetryLater, StoreError
from ._idempotency import (
    DEFAULT_LEASE,
    DEFAULT_RETENTION,
    describe,
    guard,
    guard_release,
    new_token,
)
from ._receiver import WebhookReceiver, require_positive_seconds
from ._recording import forced_replay
from ._renewal import Renewer
from .stores import MIN_RETENTION, ClaimState, IdempotencyStore

try:
    import celery  # type: ignore[import-untyped]
except ImportError as error:  # pragma: no cover - depends on the environment
    from ._extras import missing_extra

    raise missing_extra("celery", "celery", what="CeleryHandoff", cause=error) from error

__all__ = ["DEFAULT_TASK_NAME", "CeleryHandoff", "HandoffError"]

logger = logging.getLogger("service_webhooks")

DEFAULT_TASK_NAME = "service_webhooks.handle_event"

_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}


class HandoffError(RetryLater):
    """The broker did not accept the event: the receiver answers 503 (retried later)."""

    reason = "handoff_failed"


class CeleryHandoff:
    """Enqueue events to one Celery task; run the registered handlers in the worker.

    Args:
        app: The Celery application (the same in the web process and the worker).
        task_name: The registered task's name.
        queue: The queue to send to (default: Celery's routing).
        store: Optional idempotency store for worker-side deduplication (see the
            module docstring); the receiver's store can be shared.
        lease: Seconds a worker-side claim holds (``store`` only). While the
            handlers run, the claim is renewed every ``lease / 3`` seconds, as the
            receiver renews its own, so a re-delivery of a task still running finds
            it in flight however long the handlers take; a worker that died stops
            renewing, and its claim expires one lease later.
        retention: Seconds a worker-side done record is kept (``store`` only); at
            least 48 h, as the receiver's: a broker may hand a finished task's message
            out again long after it ran (a worker killed between the handlers' end and
            the ack, a Redis ``visibility_timeout`` of an hour, a queue backed up for
            hours), and that copy must still find the event done.
        retry_policy: Kombu publish retry policy; the default gives up within about
            half a second so the answer stays far inside the 10 s deadline.
        task_options: More options for the task, as ``@app.task(...)`` takes them.
            By default the task acknowledges late and rejects (requeues) its message
            when its worker is lost (``acks_late=True, reject_on_worker_lost=True``),
            so a worker killed mid-task does not lose the event; set them to ``False``
            here for at-most-once. Keep a Redis broker's ``visibility_timeout`` above
            ``lease``.
            A handler that raises in the worker is not run again unless they say so
            (the delivery was already answered 200, so the service does not retry
            it), e.g. ``{"autoretry_for": (Exception,), "max_retries": 5,
            "retry_backoff": True}``. ``name`` and ``ignore_result`` are set here.

    Raises:
        ConfigurationError: ``app`` is not a Celery application, ``lease`` is not a
            finite number of seconds > 0, or ``retention`` is not one >= 48 h.
    """

    def __init__(
        self,
        app: Any,
        *,
        task_name: str = DEFAULT_TASK_NAME,
        queue: str | None = None,
        store: IdempotencyStore | None = None,
        lease: float = DEFAULT_LEASE,
        retention: float = DEFAULT_RETENTION,
        retry_policy: dict[str, Any] | None = None,
        task_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(app, celery.Celery):
            raise ConfigurationError("CeleryHandoff needs a celery.Celery application")
        require_positive_seconds("lease", lease)
        require_positive_seconds("retention", retention)
        if retention < MIN_RETENTION:
            raise ConfigurationError(
                f"retention must be a finite number of seconds >= {MIN_RETENTION} (48 h), "
                "as the receiver's: a broker may hand a finished task out again hours later"
            )
        # A message is acknowledged once its task has run, and a worker lost mid-task
        # (killed, out of memory) puts it back on the queue: the delivery was already
        # answered 200, so this queue is its only copy (the claim keeps a re-run once).
        options = {"acks_late": True, "reject_on_worker_lost": True, **(task_options or {})}
        if {"name", "ignore_result"} & options.keys():
            raise ConfigurationError("task_options cannot set name or ignore_result")
        self.app = app
        self.queue = queue
        self.store = store
        self.lease = lease
        self.retention = retention
        self.retry_policy = dict(_RETRY_POLICY if retry_policy is None else retry_policy)
        self._renewer: tuple[IdempotencyStore, float, Renewer] | None = None
        self.router = Router()
        self.on = self.router.on
        self.on_any = self.router.on_any

        def handle_event(
            body: str, organization_id: str, timestamp: int, key: str, replay: str | None = None
        ) -> str:
            return self.run(body, organization_id, timestamp, key, replay=replay)

        self.task: Any = app.task(name=task_name, ignore_result=True, **options)(handle_event)

    def __repr__(self) -> str:
        return f"CeleryHandoff(task={self.task.name!r}, queue={self.queue!r})"

    # -- the web process ----------------------------------------------------------------

    def attach(
        self,
        receiver: WebhookReceiver,
        event_name: str | None = None,
        *,
        version: int | None = None,
    ) -> None:
        """Register :meth:`enqueue` on ``receiver``: for ``event_name`` (and ``version``),
        or for every event when ``event_name`` is ``None``."""
        if event_name is None:
            receiver.on_any(self.enqueue)
        else:
            receiver.on(event_name, self.enqueue, version=version)

    def enqueue(self, event: Event[Any]) -> None:
        """Send ``event`` to the task; return once the broker accepted it.

        A receiver handler (sync: under ``aprocess`` it runs in a worker thread).
        A forced replay (``receiver.replay(id, force=True)``) sends its own token along,
        so the worker runs the handlers again instead of finding the event done.

        Raises:
            HandoffError: The broker refused or could not be reached within the retry
                policy; the message never names the broker URL.
            Exception: With ``task_always_eager`` (tests), whatever the task raised
                when it ran here (with ``task_eager_propagates``), unchanged.
        """
        args = (
            event.body.decode("utf-8"),
            event.organization_id,
            event.timestamp,
            event.idempotency_key,
        )
        self._send(args, forced_replay(), again=False)

    def _send(self, args: tuple[str, str, int, str], replay: str | None, *, again: bool) -> None:
        """Publish the task with these arguments; ``replay``: the forced replay's token
        (else ``None``); ``again``: a copy sent back by the worker, to run one lease later.

        Raises:
            HandoffError: The broker refused or could not be reached within the retry
                policy; the message never names the broker URL.
        """
        try:
            self.task.apply_async(
                args=args,
                kwargs={} if replay is None else {"replay": replay},
                countdown=self.lease if again else None,
                queue=self.queue,
                retry=True,
                retry_policy=self.retry_policy,
            )
        except Exception as error:
            if self.app.conf.task_always_eager:
                # The task ran here, in this call, and no broker was involved: this is
                # its own error (a handler's, or HandoffError/StoreError from run), so
                # the receiver answers it as it would a handler's (500 handler_failed
                # with its traceback), not as a queue that refused the event.
                raise
            verb = "re-enqueue" if again else "enqueue"
            logger.error("service_webhooks: %s to Celery failed: %s", verb, describe(error))
            accepted = "the event again" if again else "the event"
            raise HandoffError(f"the task queue did not accept {accepted}") from error

    # -- the Celery worker -------------------------------------------------------------

    def run(
        self,
        body: str,
        organization_id: str,
        timestamp: int,
        idempotency_key: str,
        *,
        replay: str | None = None,
    ) -> str:
        """The task body: rebuild the event and run its handlers (in the worker).

        ``replay`` is a forced replay's token: the worker-side claim is then
        ``"task:" + key + ":replay:" + token``, so the forced run is deduplicated
        against its own re-deliveries only, not against the event's first run.

        Returns:
            ``"processed"``, ``"duplicate"`` (worker-side store says done),
            ``"unhandled"``, ``"in_flight"``: another worker holds the claim, so the
            task was sent again to run one ``lease`` later (see :meth:`_run_again_later`),
            or ``"store_unavailable"``: the store failed the worker-side claim, so the
            task was sent again to run one ``lease`` later (in a worker; the event
            was answered 200 once queued, so failing would drop it).

        Raises:
            Exception: Whatever a handler raised (the worker-side claim is released
                first), so Celery's own retry settings apply.
            HandoffError: Another worker holds the claim and this call runs outside a
                worker (called directly or eagerly), or the broker refused the
                re-sent task.
            StoreError: The store failed the worker-side claim and this call runs
                outside a worker.
        """
        raw = body.encode("utf-8")
        envelope = decode_envelope(raw)
        event: Event[Any] = Event(
            envelope.event_name,
            envelope.version,
            envelope.data,
            organization_id,
            timestamp,
            idempotency_key,
            raw,
        )
        if not self.router.handlers_for(event.name, event.version):
            return "unhandled"
        store = self.store
        if store is None:
            self.router.dispatch(event)
            return "processed"
        key = "task:" + idempotency_key
        if replay is not None:
            key += ":replay:" + replay
        token = new_token()
        try:
            state = guard(store.claim, key, token, self.lease)
        except StoreError:
            # The delivery was answered 200 when this message was queued: failing the
            # task would have Celery acknowledge (drop) the event's only copy.
            if self._outside_worker():
                raise
            self._send((body, organization_id, timestamp, idempotency_key), replay, again=True)
            return "store_unavailable"
        if state is ClaimState.DONE:
            return "duplicate"
        if state is ClaimState.IN_FLIGHT:
            return self._run_again_later(body, organization_id, timestamp, idempotency_key, replay)
        renewer = self._renewer_for(store)
        renewer.add(key, token)  # a slow handler keeps its claim past the lease
        try:
            try:
                self.router.dispatch(event)
            finally:
                renewer.remove(token)  # before any release: no renewal after it
        except BaseException:
            guard_release(store.release, key, token)
            raise
        guard(store.complete, key, token, self.retention)
        return "processed"

    def _run_again_later(
        self,
        body: str,
        organization_id: str,
        timestamp: int,
        idempotency_key: str,
        replay: str | None,
    ) -> str:
        """Another worker holds the claim: send the task again, to run one lease later.

        The twin may be running (it renews its claim; the next try then finds the event
        done or, if the twin failed, claims it) or may have died (a worker killed with
        ``acks_late``: its claim ends one lease after its last renewal). Either way the
        event is run once and never dropped. Outside a worker (a direct call, or an
        eager app inside the receiver's handler) there is no queue to wait in, so this
        raises :class:`HandoffError` and the caller retries (the receiver answers 503).
        """
        if self._outside_worker():
            raise HandoffError("the same event is running in another worker")
        self._send((body, organization_id, timestamp, idempotency_key), replay, again=True)
        return "in_flight"

    def _outside_worker(self) -> bool:
        """Whether the task body runs outside a Celery worker (a direct call of
        :meth:`run` or the task, or an eager app): there is no queue to wait in."""
        request = self.task.request
        return bool(request.called_directly or request.is_eager)

    def _renewer_for(self, store: IdempotencyStore) -> Renewer:
        """The renewer of worker-side claims on ``store`` (one thread, made on first
        use): a claim is renewed while its handlers run, as the receiver renews its own."""
        current = self._renewer
        if current is None or current[0] is not store or current[1] != self.lease:
            current = self._renewer = (store, self.lease, Renewer(store, self.lease))
        return current[2]
