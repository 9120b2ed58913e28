"""Idempotency records in the project's database, through the ORM (see the architecture
page's idempotency rule).

:class:`DjangoStore` is race-safe on PostgreSQL and SQLite: a claim is an ``INSERT``
guarded by the table's unique key (one concurrent inserter wins), else an ``UPDATE``
whose ``WHERE`` only matches an expired record or the caller's own in-flight claim (a
lease renewal; one concurrent updater wins, the database re-checks the condition
under the row lock). Times are Unix seconds from the application's clock, so every
process must share a clock (NTP).

:class:`TransactionalReceiver` (``"TRANSACTIONAL": True``): the claim commits at
once; then the receiver's unit of work, ``transaction.atomic()`` on the store's
database, wraps the handlers and the completion, so the handlers' writes and the
DONE record commit together, and a handler's exception rolls both back. A crash in
between commits nothing, and the retry, once the lease runs out, redoes both:
exactly-once effects for database work done by synchronous handlers on the same
database alias.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from service_webhooks import Outcome, WebhookReceiver
from service_webhooks.stores import ClaimState, SyncStore

from .models import DONE, IN_FLIGHT, IdempotencyRecord

__all__ = ["DjangoStore", "TransactionalReceiver"]


class DjangoStore(SyncStore):
    """The store protocol over :class:`~.models.IdempotencyRecord`.

    Args:
        using: The database alias (``DATABASES`` key) holding the records.
        clock: Current time in Unix seconds; defaults to :func:`time.time`.

    Database errors propagate; the receiver answers 503 for them (fail closed). The
    async twins run in Django's thread-sensitive executor, like Django's async ORM.
    """

    def __init__(self, *, using: str = "default", clock: Callable[[], float] | None = None):
        self.using = using
        self._clock = clock or time.time
        self._records = IdempotencyRecord.objects.db_manager(using)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(using={self.using!r})"

    def claim(self, key: str, token: str, lease: float) -> ClaimState:
        now = self._clock()
        fields = {"state": IN_FLIGHT, "token": token, "expires_at": now + lease}
        try:
            with transaction.atomic(using=self.using):  # a savepoint inside a transaction
                self._records.create(key=key, updated_at=timezone.now(), **fields)
            return ClaimState.NEW
        except IntegrityError:
            pass
        if self._take(key, token, now, fields):  # expired, or renewed by its owner
            return ClaimState.NEW
        live = self._records.filter(key=key, expires_at__gt=now)
        state = live.values_list("state", flat=True).first()
        return ClaimState.DONE if state == DONE else ClaimState.IN_FLIGHT

    def complete(self, key: str, token: str, retention: float) -> bool:
        now = self._clock()
        fields = {"state": DONE, "token": token, "expires_at": now + retention}
        owned = Q(token=token) | Q(expires_at__lte=now)
        if self._records.filter(owned, key=key).update(updated_at=timezone.now(), **fields):
            return True
        try:  # no record at all (released, pruned): record it now
            with transaction.atomic(using=self.using):
                self._records.create(key=key, updated_at=timezone.now(), **fields)
            return True
        except IntegrityError:
            return False

    def release(self, key: str, token: str) -> bool:
        deleted, _ = self._records.filter(key=key, token=token, state=IN_FLIGHT).delete()
        return deleted > 0

    def prune(self) -> int:
        """Delete every expired record now; returns how many were deleted."""
        deleted, _ = self._records.filter(expires_at__lte=self._clock()).delete()
        return deleted

    def _take(self, key: str, token: str, now: float, fields: dict[str, Any]) -> bool:
        takeable = Q(expires_at__lte=now) | Q(state=IN_FLIGHT, token=token)
        taken = self._records.filter(takeable, key=key)
        return taken.update(updated_at=timezone.now(), **fields) == 1

    async def aclaim(self, key: str, token: str, lease: float) -> ClaimState:
        return await sync_to_async(self.claim)(key, token, lease)

    async def acomplete(self, key: str, token: str, retention: float) -> bool:
        return await sync_to_async(self.complete)(key, token, retention)

    async def arelease(self, key: str, token: str) -> bool:
        return await sync_to_async(self.release)(key, token)


class TransactionalReceiver(WebhookReceiver):
    """A receiver whose handlers and completed key commit in one ``transaction.atomic``.

    Its unit of work is ``transaction.atomic(using=store.using)`` around "run the
    handlers + record the key as done": both commit together, or a handler's
    exception (or a failed completion) rolls both back and the claim is released, so
    the service's retry redoes the work. ``aprocess`` runs :meth:`process` in
    Django's thread-sensitive executor, so the claim, the handlers and the completion
    share one thread and one connection (an ``atomic`` block is bound to both).

    Args:
        store: The :class:`DjangoStore` (its ``using`` alias is the transaction's).
        **options: Any other :class:`~service_webhooks.WebhookReceiver` argument.
    """

    def __init__(self, *, store: DjangoStore, **options: Any) -> None:
        using = store.using
        super().__init__(
            store=store, unit_of_work=lambda event: transaction.atomic(using=using), **options
        )

    async def aprocess(
        self,
        body: bytes,
        signature: str | bytes | None,
        *,
        method: str = "POST",
        content_type: str | None = None,
        user_agent: str | None = None,
    ) -> Outcome:
        return await sync_to_async(self.process)(
            body, signature, method=method, content_type=content_type, user_agent=user_agent
        )

    async def areplay(self, delivery_id: str, *, force: bool = False) -> Outcome:
        """:meth:`replay` in Django's thread-sensitive executor, as :meth:`aprocess`: the
        unit of work (``transaction.atomic``) cannot be entered in an event loop (Django
        raises ``SynchronousOnlyOperation``), so a replay from the dashboard would fail."""
        return await sync_to_async(self.replay)(delivery_id, force=force)
