"""The admin for received deliveries (the ORM inbox): filters, search, the payload and
the traceback, and a "replay" action running the project receiver's handlers again.

Read-only otherwise: nothing can be added, changed or deleted here. Replaying needs the
``change_receiveddeliveryrecord`` permission (superusers have it). The list page is
outside ``ATOMIC_REQUESTS``, as the delivery view is: each replay's handlers commit (or
fail) on their own, never rolled back with the whole request by another one's error.
"""

from __future__ import annotations

from typing import Any, cast

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from service_webhooks.inbox.commands import pretty_body

from .models import ReceivedDeliveryRecord
from .views import outside_atomic_requests


@admin.register(ReceivedDeliveryRecord)
class ReceivedDeliveryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Lists received deliveries newest first; shows one with its payload; replays."""

    list_display = (
        "delivery_id", "received_at", "organization_id", "event_name", "status", "reason",
        "seen", "last_replay",
    )  # fmt: skip
    list_filter = ("reason", "status", "event_name", "organization_id", "received_at")
    search_fields = ("^id", "=idempotency_key", "=organization_id")
    ordering = ("-received_at", "-id")
    # no date_hierarchy: its links are the distinct months (days) of every record, each
    # record's time truncated on every page (4 s per page over 600,000 records on SQLite,
    # where the truncation is a Python function); the received_at filter needs no query
    actions = ("replay",)
    fields = (
        "id", "received_at", "organization_id", "event_name", "version", "idempotency_key",
        "status", "reason", "detail", "seen", "handler_time", "content_type", "user_agent",
        "error_type", "error_message", "traceback_text", "replays_made", "payload",
    )  # fmt: skip
    readonly_fields = fields

    @admin.display(description="ID", ordering="id")
    def delivery_id(self, record: ReceivedDeliveryRecord) -> str:
        return record.id

    @admin.display(description="replayed")
    def last_replay(self, record: ReceivedDeliveryRecord) -> str:
        return str(record.replays[-1]["reason"]) if record.replays else ""

    @admin.display(description="payload")
    def payload(self, record: ReceivedDeliveryRecord) -> SafeString:
        text, _ = pretty_body(bytes(record.body))  # a body too deep to indent: as received
        return format_html("<pre>{}</pre>", text)  # escaped

    @admin.display(description="traceback")
    def traceback_text(self, record: ReceivedDeliveryRecord) -> SafeString | str:
        return format_html("<pre>{}</pre>", record.traceback) if record.traceback else "-"

    @admin.display(description="replays")
    def replays_made(self, record: ReceivedDeliveryRecord) -> SafeString | str:
        if not record.replays:
            return "-"
        rows = (
            (r["at"], r["status"], r["reason"], " (forced)" if r.get("forced") else "")
            for r in record.replays
        )
        return format_html("<ul>{}</ul>", format_html_join("", "<li>{} {} {}{}</li>", rows))

    @outside_atomic_requests  # where the replay action runs the handlers, as for deliveries
    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(request, extra_context)

    @admin.action(description="Replay the selected deliveries", permissions=["replay"])
    def replay(self, request: HttpRequest, queryset: QuerySet[ReceivedDeliveryRecord]) -> None:
        from .conf import receiver

        # Under ASGI this runs in the request's thread-sensitive executor thread, where the
        # sync replay() would run an async handler in a loop of its own: the handler's
        # sync_to_async calls (Django's async ORM) would queue onto this busy thread and
        # hang. areplay() through async_to_sync runs on the server's loop and lends this
        # thread to them, as the async view does for deliveries.
        asgi = getattr(request, "scope", None) is not None
        replay = async_to_sync(receiver.areplay) if asgi else receiver.replay
        for record_id in queryset.order_by("received_at", "id").values_list("id", flat=True):
            try:
                outcome = replay(record_id)
            except Exception as error:
                text = f"Delivery {record_id}: not replayed ({type(error).__name__})"
                self.message_user(request, text, messages.ERROR)
                continue
            level = messages.SUCCESS if outcome.ok else messages.WARNING
            text = f"Delivery {record_id}: {outcome.status} {outcome.reason}"
            self.message_user(request, text, level)

    def has_replay_permission(self, request: HttpRequest) -> bool:
        opts, user = self.opts, cast(Any, request.user)
        return bool(user.has_perm(f"{opts.app_label}.change_{opts.model_name}"))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
