"""What the inbox commands share: ``--status/--event/--organization/--since`` ->
an :class:`InboxQuery`, what ``replay`` may be given, an ID prefix -> its record, and
one line per record.

Errors are :class:`ValueError` (a bad filter, selection or ID) and :class:`LookupError`
(no such record, or a prefix matching several); each command reports them its own way.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from .._exceptions import ConfigurationError
from ._base import Inbox, InboxQuery, ReceivedDelivery

if TYPE_CHECKING:
    from .._outcome import Outcome

__all__ = [
    "check_replay_selection",
    "every",
    "find",
    "parse_since",
    "record_line",
    "replay_line",
    "selection",
    "show_lines",
]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_CLASS = re.compile(r"([1-5])xx")


def parse_since(text: str) -> datetime.datetime:
    """``30m``, ``2h``, ``7d``, ``1w`` ago, or an ISO 8601 time (UTC when naive).

    Raises:
        ValueError: Neither.
    """
    match = _DURATION.fullmatch(text.strip())
    if match:
        seconds = float(match[1]) * _UNITS[match[2]]
        return datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds)
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError("--since takes a duration (30m, 2h, 7d) or an ISO 8601 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def selection(
    statuses: Sequence[str] = (),
    event: str | None = None,
    organization: str | None = None,
    since: str | None = None,
) -> InboxQuery:
    """The query for the CLI's filters: each status a reason (``handler_failed``) or one
    class (``5xx``).

    Raises:
        ValueError: Two status classes, or a bad ``since``.
    """
    reasons: list[str] = []
    status_class: int | None = None
    for status in statuses:
        match = _CLASS.fullmatch(status.strip().lower())
        if match and status_class is not None:
            raise ValueError("--status takes one status class at a time")
        if match:
            status_class = int(match[1])
        else:
            reasons.append(status.strip())
    return InboxQuery(
        reasons=tuple(reasons),
        status_class=status_class,
        event_name=event,
        organization_id=organization,
        since=parse_since(since) if since else None,
    )


def check_replay_selection(
    ids: Sequence[str], filters: Mapping[str, object], since: str | None = None
) -> None:
    """Check that a replay is given its deliveries one way: IDs, or filters.

    Args:
        ids: The delivery IDs (or prefixes) given.
        filters: Each filter option the command has, by name, with its value (empty or
            ``None`` when not given), e.g. ``{"--status": ("5xx",), "--event": None}``.
        since: ``--since``, which only narrows a filter selection.

    Raises:
        ValueError: IDs and filters both, neither, or ``since`` without a filter.
    """
    *others, last = filters
    named = f"{', '.join(others)} or {last}" if others else last
    selecting = any(filters.values())
    if ids and selecting:
        raise ValueError(f"give delivery IDs or {named}, not both")
    if since and not selecting:
        raise ValueError(f"--since selects with {named}")
    if not ids and not selecting:
        raise ValueError(f"nothing to replay: give delivery IDs, or select them with {named}")


def find(inbox: Inbox, prefix: str) -> ReceivedDelivery:
    """The one record whose ID starts with ``prefix`` (hex digits).

    Raises:
        ValueError: ``prefix`` is not hex digits.
        LookupError: None, or several.
    """
    text = prefix.strip().lower()
    try:
        query = InboxQuery(id_prefix=text)
    except ConfigurationError:
        raise ValueError(f"delivery ID {text!r} is not a hex ID prefix") from None
    found = inbox.search(query, limit=2).items
    if not found:
        raise LookupError(f"no delivery {text!r} in the inbox")
    if len(found) > 1:
        raise LookupError(f"{text!r} matches several deliveries: give more digits")
    return found[0]


def every(inbox: Inbox, query: InboxQuery) -> Iterator[ReceivedDelivery]:
    """Every record ``query`` selects, newest first, page by page."""
    cursor: str | None = None
    while True:
        page = inbox.search(query, limit=500, cursor=cursor)
        yield from page.items
        cursor = page.next_cursor
        if cursor is None:
            return


def record_line(record: ReceivedDelivery) -> str:
    """``ID  RECEIVED  ORG  EVENT  STATUS REASON  seen=N [replayed: REASON]`` (tabs)."""
    replayed = f"\treplayed: {record.replays[-1].reason}" if record.replays else ""
    return (
        f"{record.id}\t{record.received_at:%Y-%m-%d %H:%M:%S}\t{record.organization_id}\t"
        f"{record.event_name or '-'}\t{record.status} {record.reason}\tseen={record.seen}"
        + replayed
    )


def replay_line(record: ReceivedDelivery, outcome: Outcome) -> str:
    """``ID  EVENT  REASON -> STATUS REASON`` (tabs): a record and its replay's answer."""
    return (
        f"{record.id}\t{record.event_name or '-'}\t{record.reason} -> "
        f"{outcome.status} {outcome.reason}"
    )


def show_lines(record: ReceivedDelivery) -> list[str]:
    """One record as text: its fields, replays, traceback and pretty-printed payload."""
    lines = [
        f"{name}: {value}"
        for name, value in (
            ("id", record.id),
            ("received_at", record.received_at.isoformat()),
            ("organization_id", record.organization_id),
            ("event_name", record.event_name),
            ("version", record.version),
            ("idempotency_key", record.idempotency_key),
            ("status", record.status),
            ("reason", record.reason),
            ("detail", record.detail),
            ("seen", record.seen),
            ("handler_time", record.handler_time),
            ("content_type", record.content_type),
            ("user_agent", record.user_agent),
            ("error_type", record.error_type),
            ("error_message", record.error_message),
        )
        if value not in (None, "")
    ]
    for replay in record.replays:
        forced = " (forced)" if replay.forced else ""
        lines.append(f"replay: {replay.at.isoformat()} {replay.status} {replay.reason}{forced}")
    if record.traceback:
        lines += ["traceback:", record.traceback.rstrip()]
    try:
        payload = json.dumps(json.loads(record.body), indent=2, ensure_ascii=False)
    except ValueError:
        payload = record.body.decode("utf-8", "replace")
    return [*lines, "payload:", payload]
