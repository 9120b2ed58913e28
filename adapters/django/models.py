"""The idempotency record: one row per key, unique at the database level."""

from __future__ import annotations

from datetime import datetime

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
