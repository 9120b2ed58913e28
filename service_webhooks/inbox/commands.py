"""What the inbox commands share: ``--status/--event/--organization/--since`` ->
an :class:`InboxQuery`, what ``replay`` may be given, an ID prefix -> its record, and
what they print, so ``service-webhooks inbox``, ``flask service-webhooks`` and
``manage.py service_webhooks_replay`` print the same: the ``list`` table
(:data:`TABLE_COLUMNS`, :func:`table_row`, :func:`table_lines`), a record as JSON
(:func:`record_json`, :func:`json_line`), ``show``'s text (:func:`show_lines`) and
``replay``'s selection and lines (:func:`replay_selection`, :func:`replay_line`,
:func:`dry_run_line`, :func:`replay_total`).

Errors are :class:`ValueError` (a bad filter, selection or ID) and :class:`LookupError`
(no such record, or a prefix matching several); each command reports them its own way.
"""

from __future__ import annotations

import base64
import datetime
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from .._exceptions import ConfigurationError
from .._reporting import printable
from ._base import Inbox, InboxQuery, ReceivedDelivery

if TYPE_CHECKING:
    from .._outcome import Outcome

__all__ = [
    "CELL_CHARS",
    "PRETTY_MIN",
    "TABLE_COLUMNS",
    "check_replay_selection",
    "clip",
    "dry_run_line",
    "find",
    "json_line",
    "parse_since",
    "pretty_body",
    "record_json",
    "replay_line",
    "replay_selection",
    "replay_total",
    "selection",
    "show_lines",
    "table_lines",
    "table_row",
]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_CLASS = re.compile(r"([1-5])xx")
_ANY_CLASS = re.compile(r"\dxx")  # 0xx, 6xx...: a class no status has, not a reason


def parse_since(text: str) -> datetime.datetime:
    """``30m``, ``2h``, ``7d``, ``1w`` ago, or an ISO 8601 time (UTC when naive).

    Raises:
        ValueError: Neither, or a duration reaching back before year 1.
    """
    match = _DURATION.fullmatch(text.strip())
    if match:
        seconds = float(match[1]) * _UNITS[match[2]]
        try:
            return datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds)
        except OverflowError:  # before year 1: timedelta or the subtraction overflows
            raise ValueError(f"--since {text.strip()}: a duration too long to count back") from None
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
        ValueError: Two status classes, an empty status or a class no status has
            (``6xx``), or a bad ``since``.
    """
    reasons: list[str] = []
    status_class: int | None = None
    for status in statuses:
        text = status.strip()
        match = _CLASS.fullmatch(text.lower())
        if not text or (not match and _ANY_CLASS.fullmatch(text.lower())):
            raise ValueError(
                f"--status {status!r}: a reason (handler_failed, unhandled...) or a class "
                "(2xx, 4xx, 5xx)"
            )
        if match and status_class is not None:
            raise ValueError("--status takes one status class at a time")
        if match:
            status_class = int(match[1])
        else:
            reasons.append(text)
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


REPLAY_PAGE = 100
"""Records one page of a replay's selection reads: bodies reach 1 MiB, so a page holds
at most about 100 MiB while it is read."""


def replay_selection(inbox: Inbox, query: InboxQuery) -> list[ReceivedDelivery]:
    """The records ``query`` selects, oldest first (arrival order), for a replay: each
    without its body and traceback, which the replay reads again with the record (and
    :func:`replay_line` and :func:`dry_run_line` do not show). A selection of 10,000
    failed 1 MiB deliveries held 10 GiB of bodies before the first replay ran."""
    kept: list[ReceivedDelivery] = []
    cursor: str | None = None
    while True:
        page = inbox.search(query, limit=REPLAY_PAGE, cursor=cursor)
        kept += [msgspec.structs.replace(r, body=b"", traceback=None) for r in page.items]
        cursor = page.next_cursor
        if cursor is None:
            kept.reverse()
            return kept


TABLE_COLUMNS = ("ID", "RECEIVED (UTC)", "ORG", "EVENT", "STATUS", "REASON", "SEEN", "REPLAYED")
"""The headers of ``list``'s table, one per :func:`table_row` cell."""


def table_row(record: ReceivedDelivery) -> list[str]:
    """One record's cells under :data:`TABLE_COLUMNS`: the whole ID (its first digits
    are the time), ``EVENT vN`` (``-`` without a version), the last replay's reason.

    The organization ID and the event name are cut to :data:`CELL_CHARS` characters
    (:func:`clip`, as in the dashboard's list), before their control characters are
    escaped: an ``eventName`` may fill a 1 MiB body. ``--json`` and ``show`` give
    all of it."""
    return [
        record.id,
        f"{record.received_at:%Y-%m-%d %H:%M:%S}",
        _cell(clip(record.organization_id)),
        f"{_event(record)} v{record.version}" if record.version else "-",
        str(record.status),
        _cell(record.reason),
        str(record.seen),
        _cell(record.replays[-1].reason) if record.replays else "",
    ]


def _cell(text: str) -> str:
    """``text`` for one cell of a line: a tab or a line break becomes a space, any other
    control character (an ANSI escape) from the request a Python escape, as in the log
    lines, so a value never splits a line nor drives the terminal."""
    return printable(" ".join(text.splitlines()).replace("\t", " "))


def _event(record: ReceivedDelivery) -> str:
    """The event name for a line: cut (:func:`clip`), then escaped; ``-`` if none."""
    return _cell(clip(record.event_name)) if record.event_name else "-"


def table_lines(records: Iterable[ReceivedDelivery]) -> list[str]:
    """``list``'s table as plain text: the header line, then one line per record, cells
    separated by tabs (a tab inside a cell becomes a space)."""
    rows = [list(TABLE_COLUMNS), *(table_row(record) for record in records)]
    return ["\t".join(cell.replace("\t", " ") for cell in row) for row in rows]


def record_json(record: ReceivedDelivery, *, full: bool = False) -> dict[str, Any]:
    """A record as the JSON object the commands print (camelCase names).

    ``list --json`` prints the summary: ``id``, ``receivedAt``, ``organizationId``,
    ``eventName``, ``version``, ``status``, ``reason``, ``seen``, ``handlerTime`` and
    ``replays``. ``show --json`` (``full``) adds ``idempotencyKey``, ``contentType``,
    ``userAgent``, ``detail``, ``errorType``, ``errorMessage``, ``traceback``,
    ``payload`` (the decoded body, ``None`` when it is not JSON) and ``bodyBase64``.
    """
    summary: dict[str, Any] = {
        "id": record.id,
        "receivedAt": record.received_at.isoformat(),
        "organizationId": record.organization_id,
        "eventName": record.event_name,
        "version": record.version,
        "status": record.status,
        "reason": record.reason,
        "seen": record.seen,
        "handlerTime": record.handler_time,
        "replays": [
            {
                "at": replay.at.isoformat(),
                "status": replay.status,
                "reason": replay.reason,
                "forced": replay.forced,
                "handlerTime": replay.handler_time,
                "errorType": replay.error_type,
            }
            for replay in record.replays
        ],
    }
    if not full:
        return summary
    try:
        payload: Any = json.loads(record.body)
    except (ValueError, RecursionError):  # not JSON, or too deep for Python's parser
        payload = None
    return {
        **summary,
        "idempotencyKey": record.idempotency_key,
        "contentType": record.content_type,
        "userAgent": record.user_agent,
        "detail": record.detail,
        "errorType": record.error_type,
        "errorMessage": record.error_message,
        "traceback": record.traceback,
        "payload": payload,
        "bodyBase64": base64.b64encode(record.body).decode("ascii"),
    }


CELL_CHARS = 120
"""Characters of an event name or organization ID that a table cell shows, in the
dashboard and in ``list``'s table (:func:`clip`); a delivery's page, ``show`` and
``--json`` give all of it."""


def clip(text: str) -> str:
    """``text`` cut to :data:`CELL_CHARS` characters, the last an ellipsis when cut.

    An ``eventName`` may fill a whole 1 MiB body: 50 of them in full, escaped, made a
    list page of 200 MB."""
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


PRETTY_MIN = 1 << 20
"""Characters of indented JSON always shown; past it, at most 8 per byte of the body."""
_TOO_NESTED = "JSON too nested to indent: shown as received"
_EMPTY = "empty body: the delivery had no payload"
_NOT_UTF8 = "not UTF-8: invalid bytes shown as \N{REPLACEMENT CHARACTER} (the download has them)"


def pretty_body(body: bytes) -> tuple[str, str]:
    """The body as text and what the page says of it: indented JSON when it parses,
    else decoded UTF-8 (a body that is not UTF-8: its invalid bytes as U+FFFD, which the
    note says); an empty body is ``""`` with a note saying so.

    Indenting costs two characters per level on every line: a nested body (a 48 KB
    one of arrays 400 deep becomes 19 MB of text) would make one page hundreds of
    megabytes, and one 1,000 levels deep exceeds Python's recursion limit. Past
    ``max(8 * len(body), PRETTY_MIN)`` characters, or too deep, it is the raw text
    instead: never an error, nor a text larger than 1 MiB or 8 times the body. What
    the dashboard, ``inbox show`` and the Django admin show of a payload.
    """
    if not body:
        return "", _EMPTY
    try:
        raw = body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("utf-8", "replace"), _NOT_UTF8
    try:
        value = json.loads(body, object_pairs_hook=_Members)
    except ValueError:
        return raw, "not JSON: shown as UTF-8 text"
    except RecursionError:  # too deep for Python's parser
        return raw, _TOO_NESTED
    budget = max(8 * len(body), PRETTY_MIN)
    parts: list[str] = []
    try:
        for part in json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(value):
            budget -= len(part)
            if budget < 0:
                return raw, _TOO_NESTED
            parts.append(part)
    except RecursionError:
        return raw, _TOO_NESTED
    return _escape_surrogates("".join(parts)), "JSON, indented for reading"


class _Members(dict[str, Any]):
    """A JSON object with every member it was sent with, in order, for indenting.

    A ``dict`` keeps one value per name; a body may repeat a name (RFC 8259 §4 leaves
    its meaning open), and the page must show what was received. The indenting
    encoder (Python's own, for any ``indent``) writes what :meth:`items` yields.
    """

    def __init__(self, members: list[tuple[str, Any]]) -> None:
        super().__init__(members)
        self._members = members

    def items(self) -> Any:  # every member, repeated names included
        return self._members


def _escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (a ``\\ud800`` escape in a JSON string decodes
    to one; UTF-8 cannot encode it) written back as that escape, so the text can be
    printed or sent as UTF-8. Inside JSON strings, that is the JSON the body held."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def json_line(record: ReceivedDelivery, *, full: bool = False) -> str:
    """:func:`record_json` as one line of JSON: printable non-ASCII kept as is, every
    other character that is not printable (a C1 control such as ``\\x9b``, which
    terminals take as ``ESC [``; DEL; a bidi override; a lone surrogate) written as its
    ``\\uXXXX`` escape, as JSON writes the C0 controls, so a line never drives the
    terminal and decodes to the exact values. A payload too deep to encode again is
    ``null`` (``bodyBase64`` still holds it)."""
    fields = record_json(record, full=full)
    try:
        return _printable_json(json.dumps(fields, ensure_ascii=False))
    except RecursionError:
        return _printable_json(json.dumps({**fields, "payload": None}, ensure_ascii=False))


def _printable_json(text: str) -> str:
    """JSON text with each character that is not printable as its ``\\uXXXX`` escape
    (two, a surrogate pair, past U+FFFF). Outside its strings JSON text is printable
    ASCII, so only characters of strings are escaped: the value is the same."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _json_escape(c) for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def replay_line(record: ReceivedDelivery, outcome: Outcome) -> str:
    """``ID  EVENT  REASON -> STATUS REASON`` (tabs): a record and its replay's answer,
    texts escaped as in the table (a receiver's own error may name any reason)."""
    return (
        f"{record.id}\t{_event(record)}\t{_cell(record.reason)} -> "
        f"{outcome.status} {_cell(outcome.reason)}"
    )


def dry_run_line(record: ReceivedDelivery) -> str:
    """``ID  EVENT  REASON  would replay`` (tabs): what ``replay --dry-run`` prints."""
    return f"{record.id}\t{_event(record)}\t{_cell(record.reason)}\twould replay"


def replay_total(replayed: int, failed: int | None = None) -> str:
    """The last line of ``replay`` (on stderr): ``N replayed, F not successful``, or, for
    a dry run (``failed`` is ``None``), ``N deliveries would be replayed`` (``1 delivery``)."""
    if failed is None:
        return f"{replayed} {'delivery' if replayed == 1 else 'deliveries'} would be replayed"
    return f"{replayed} replayed, {failed} not successful"


def show_lines(record: ReceivedDelivery) -> list[str]:
    """One record as text: its fields (named as in :func:`record_json`, empty ones left
    out), replays, traceback and the payload, pretty-printed when it is JSON. Control
    characters from the request (a newline in a field, an ANSI escape) are written as
    Python escapes, as in the log lines; the payload and traceback keep their lines."""
    fields = record_json(record, full=True)
    lines = [
        f"{name}: {printable(str(fields[name]))}"
        for name in (
            "id",
            "receivedAt",
            "organizationId",
            "eventName",
            "version",
            "idempotencyKey",
            "status",
            "reason",
            "detail",
            "seen",
            "handlerTime",
            "contentType",
            "userAgent",
            "errorType",
            "errorMessage",
        )
        if fields[name] not in (None, "")
    ]
    for replay in record.replays:
        forced = " (forced)" if replay.forced else ""
        reason = printable(replay.reason)
        lines.append(f"replay: {replay.at.isoformat()} {replay.status} {reason}{forced}")
    if record.traceback:
        lines += ["traceback:", _printable_lines(record.traceback.rstrip())]
    payload, _ = pretty_body(record.body)
    return [*lines, "payload:", _printable_lines(payload)]


def _printable_lines(text: str) -> str:
    """``text`` with its lines kept and every other control character (an ANSI escape,
    a carriage return) written as a Python escape: a payload never drives the terminal."""
    return "\n".join(printable(line) for line in text.split("\n"))
