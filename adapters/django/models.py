"""The idempotency record (one row per key, unique at the database level) and the
inbox's received delivery."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import models

IN_FLIGHT = "in_flight"
DONE = "done"


class IdempotencyRecord(models.Model):
    """A claimed (``in_flight``) or processed (``done``) delivery, until ``expires_at``.

    ``expires_at`` is Unix seconds: the lease end for a claim, the retention end for a
    processed delivery (at least 48 h, spec §3.3 retries for 24 h).
    """

    key: models.CharField[str, str] = models.CharField(max_length=255, unique=True)
    state: models.CharField[str, str] = models.CharField(
        max_length=16, choices=[(IN_FLIGHT, "in flight"), (DONE, "done")]
    )
    token: models.CharField[str, str] = models.CharField(max_length=64)
    expires_at: models.FloatField[float, float] = models.FloatField(
        db_index=True, help_text="Unix seconds"
    )
    updated_at: models.DateTimeField[datetime, datetime] = models.DateTimeField()

    class Meta:
        verbose_name = "processed delivery"
        verbose_name_plural = "processed deliveries"

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"


class ReceivedDeliveryRecord(models.Model):
    """One authenticated delivery as received and answered (the Django ORM inbox,
    :class:`~.inbox.DjangoInbox`); the fields of
    :class:`~service_webhooks.inbox.ReceivedDelivery`, plus ``size`` (bytes of body and
    traceback, for the size cap). Indexed for the newest-first keyset order and for each
    filter with time."""

    id: models.CharField[str, str] = models.CharField(max_length=32, primary_key=True)
    received_at: models.DateTimeField[datetime, datetime] = models.DateTimeField()
    organization_id: models.CharField[str, str] = models.CharField(max_length=255)
    event_name: models.CharField[str | None, str | None] = models.CharField(
        max_length=255, null=True, blank=True
    )
    version: models.IntegerField[int | None, int | None] = models.IntegerField(null=True)
    idempotency_key: models.CharField[str | None, str | None] = models.CharField(
        max_length=255, null=True, blank=True, db_index=True
    )
    body: models.BinaryField[bytes, bytes] = models.BinaryField()
    content_type: models.TextField[str | None, str | None] = models.TextField(null=True)
    user_agent: models.TextField[str | None, str | None] = models.TextField(null=True)
    status: models.IntegerField[int, int] = models.IntegerField()
    reason: models.CharField[str, str] = models.CharField(max_length=64)
    detail: models.TextField[str, str] = models.TextField(default="", blank=True)
    seen: models.IntegerField[int, int] = models.IntegerField(default=1)
    error_type: models.CharField[str | None, str | None] = models.CharField(
        max_length=255, null=True, blank=True
    )
    error_message: models.TextField[str | None, str | None] = models.TextField(null=True)
    traceback: models.TextField[str | None, str | None] = models.TextField(null=True)
    handler_time: models.FloatField[float | None, float | None] = models.FloatField(
        null=True, help_text="seconds"
    )
    replays: models.JSONField[Any, Any] = models.JSONField(default=list)
    size: models.BigIntegerField[int, int] = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "received delivery"
        verbose_name_plural = "received deliveries"
        indexes = [
            models.Index(fields=["-received_at", "-id"], name="sw_inbox_received"),
            models.Index(fields=["reason", "received_at"], name="sw_inbox_reason"),
            models.Index(fields=["event_name", "received_at"], name="sw_inbox_event"),
            models.Index(fields=["organization_id", "received_at"], name="sw_inbox_org"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.event_name or '-'} ({self.reason})"
