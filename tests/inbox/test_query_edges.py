"""Inbox queries at the edges of time, and bodies UTF-8 cannot print, as the views use them."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from service_webhooks import ConfigurationError, MemoryStore, WebhookReceiver, sign
from service_webhooks.inbox import Inbox, InboxQuery, MemoryInbox, SQLiteInbox
from service_webhooks.inbox.commands import json_line, pretty_body, selection, show_lines

UTC = datetime.UTC
PLUS_ONE = datetime.timezone(datetime.timedelta(hours=1))
MINUS_ONE = datetime.timezone(datetime.timedelta(hours=-1))
LONE_SURROGATE = b'{"eventName": "note.created", "version": 1, "data": "a \\ud800 b"}'


@pytest.mark.parametrize("cursor", ["9" * 24 + "-ab", str(2**63) + "-ab"])
def test_a_cursor_past_year_9999_is_refused_not_a_crash(tmp_path: Path, cursor: str) -> None:
    inbox = SQLiteInbox(tmp_path / "inbox.sqlite3")
    with pytest.raises(ConfigurationError, match="not an inbox cursor"):
        inbox.search(cursor=cursor)


@pytest.mark.parametrize("cursor", ["\u00b2-ab", "1\u00b3-ab", "\u0661-ab", "1-\u00e9"])
def test_a_cursor_of_other_than_ascii_digits_and_letters_is_refused(
    inbox: Inbox, cursor: str
) -> None:
    """``str.isdigit`` holds for superscripts, which ``int`` refuses: a ValueError."""
    with pytest.raises(ConfigurationError, match="not an inbox cursor"):
        inbox.search(cursor=cursor)


@pytest.mark.parametrize(
    "moment",
    [
        datetime.datetime(1, 1, 1, tzinfo=PLUS_ONE),  # year 0 in UTC
        datetime.datetime(9999, 12, 31, 23, 59, tzinfo=MINUS_ONE),  # year 10000 in UTC
    ],
)
def test_since_or_until_outside_utc_years_is_a_configuration_error(
    moment: datetime.datetime,
) -> None:
    with pytest.raises(ConfigurationError, match=r"years 1\.\.9999"):
        InboxQuery(since=moment)
    with pytest.raises(ConfigurationError, match=r"years 1\.\.9999"):
        InboxQuery(until=moment)


def test_the_cli_filter_reports_an_iso_time_outside_utc_years_as_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"years 1\.\.9999"):
        selection(since="0001-01-01T00:00+01:00")


def test_the_last_utc_moments_are_still_accepted(tmp_path: Path) -> None:
    inbox = SQLiteInbox(tmp_path / "inbox.sqlite3")
    early = datetime.datetime(1, 1, 1, tzinfo=UTC)
    late = datetime.datetime.max.replace(tzinfo=UTC)
    assert inbox.search(InboxQuery(since=early, until=late)).items == ()


def test_a_lone_surrogate_in_a_body_is_shown_as_its_json_escape() -> None:
    text, note = pretty_body(LONE_SURROGATE)
    assert note == "JSON, indented for reading"
    assert '"a \\ud800 b"' in text
    text.encode("utf-8")  # printable and sendable


def test_show_json_of_a_lone_surrogate_body_is_valid_utf8_json() -> None:
    inbox = MemoryInbox()
    receiver = WebhookReceiver("whsec-trial", store=MemoryStore(), inbox=inbox)
    outcome = receiver.process(LONE_SURROGATE, sign(LONE_SURROGATE, "whsec-trial", "o-1"))
    assert outcome.status == 400  # a malformed envelope, kept all the same
    [record] = inbox.search().items
    line = json_line(record, full=True)
    line.encode("utf-8")
    assert json.loads(line)["payload"]["data"] == "a \ud800 b"
    "\n".join(show_lines(record)).encode("utf-8")


@pytest.mark.parametrize(
    "query",
    [
        {"event_name": "note\x00created"},
        {"organization_id": "\x00"},
        {"reasons": ("processed", "unhandled\x00")},
    ],
)
def test_a_filter_holding_a_nul_is_a_configuration_error(inbox: Inbox, query: Any) -> None:
    """No record holds a NUL (the receiver replaces it; PostgreSQL cannot store one):
    PostgreSQL refused the query with a DataError, the others matched nothing."""
    with pytest.raises(ConfigurationError, match="NUL"):
        inbox.search(InboxQuery(**query))
    with pytest.raises(ConfigurationError, match="NUL"):
        inbox.purge(InboxQuery(**query))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retention": "2592000"}, r"^retention must be a number of seconds > 0, not str$"),
        ({"retention": True}, r"^retention must be a number of seconds > 0, not bool$"),
        ({"retention": float("inf")}, r"^retention must be > 0 seconds and at most"),
        ({"retention": 1e300}, r"^retention must be > 0 seconds and at most"),
        ({"retention": float("nan")}, r"^retention must be > 0 seconds and at most"),
        ({"max_bytes": "1000"}, r"^max_bytes must be an int of bytes \(or None: no cap\), not str"),
        ({"max_bytes": 1.5}, r"^max_bytes must be an int of bytes \(or None: no cap\), not float"),
        ({"max_bytes": True}, r"^max_bytes must be an int of bytes \(or None: no cap\), not bool"),
    ],
)
def test_a_retention_or_size_cap_of_the_wrong_type_or_past_a_date_is_refused(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    """A ``str`` raised a bare ``TypeError`` comparing it, a ``bool`` was taken as 1 (a
    one-second retention), and an infinite or huge retention was accepted, then every
    prune raised ``OverflowError`` computing its cutoff."""
    for build in (MemoryInbox, lambda **kw: SQLiteInbox(tmp_path / "inbox.sqlite3", **kw)):
        with pytest.raises(ConfigurationError, match=message):
            build(**options)


def test_the_longest_retention_still_prunes(tmp_path: Path) -> None:
    from service_webhooks.inbox._base import MAX_INBOX_RETENTION

    assert MemoryInbox(retention=MAX_INBOX_RETENTION).prune() == 0
    assert SQLiteInbox(tmp_path / "inbox.sqlite3", retention=MAX_INBOX_RETENTION).prune() == 0
