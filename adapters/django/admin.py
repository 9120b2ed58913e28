"""A read-only admin for idempotency records ("processed deliveries")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import IdempotencyRecord


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Lists records; nothing can be added, changed or deleted here."""

    list_display = ("key", "state", "expires", "updated_at")
    list_filter = ("state",)
    search_fields = ("key",)
    ordering = ("-updated_at",)

    @admin.display(description="expires", ordering="expires_at")
    def expires(self, record: IdempotencyRecord) -> datetime:
        return datetime.fromtimestamp(record.expires_at, tz=UTC)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
