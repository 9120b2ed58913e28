"""For writing an :class:`~service_webhooks.inbox.Inbox` backend (the Django ORM inbox
uses these): argument checks, the keyset cursor, and microsecond times.

A cursor is ``"<received_at in µs since the epoch>-<id>"``: the position just after a
record in the newest-first order ``(received_at, id)``.
"""

from __future__ import annotations

from ._base import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    check_bounds,
    check_limit,
    decode_cursor,
    encode_cursor,
    from_micros,
    to_micros,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "check_bounds",
    "check_limit",
    "decode_cursor",
    "encode_cursor",
    "from_micros",
    "to_micros",
]
