"""What ``service-webhooks inbox``, ``flask service-webhooks`` and ``manage.py
service_webhooks_replay`` share (:mod:`service_webhooks.inbox.commands`): filters and
the lines they print."""

from __future__ import annotations

import datetime
import json

import msgspec
import pytest

from service_webhooks import Outcome
from service_webhooks.inbox import InboxPage, InboxQuery, MemoryInbox, ReceivedDelivery, Replay
from service_webhooks.inbox.commands import (
    CELL_CHARS,
    REPLAY_PAGE,
    dry_run_line,
    json_line,
    replay_line,
    replay_selection,
    selection,
    show_lines,
    table_lines,
    table_row,
)


@pytest.mark.parametrize("status", ["6xx", "0xx", "9XX", ""])
def test_a_status_no_answer_can_have_is_refused(status: str) -> None:
    with pytest.raises(ValueError, match=r"or a class \(2xx, 4xx, 5xx\)"):
        selection([status])


def test_reasons_and_one_class_are_kept() -> None:
    query = selection(["handoff_failed", "5XX", "unhandled"])
    assert query.reasons == ("handoff_failed", "unhandled")
    assert query.status_class == 5


def test_no_line_is_split_or_drives_the_terminal() -> None:
    record = ReceivedDelivery(
        id="0" * 32,
        received_at=datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC),
        organization_id="o-1",
        event_name="a\tb\nreason: processed\x1b[2J\x07",
        version=1,
        idempotency_key="k",
        body=b'\x1b[31m{"eventName": 1}\r',
        content_type="text/plain\x1b[0m",
        user_agent=None,
        status=200,
        reason="unhandled",
    )
    _, line = table_lines([record])
    assert line.split("\t")[3] == "a b reason: processed\\x1b[2J\\x07 v1"
    assert dry_run_line(record).count("\t") == 3
    text = "\n".join(show_lines(record))
    for control in ("\x1b", "\x07", "\r"):
        assert control not in text
    assert "eventName: a\\tb\\nreason: processed\\x1b[2J\\x07" in text.splitlines()
    assert text.endswith('payload:\n\\x1b[31m{"eventName": 1}\\r')


def test_a_json_line_never_drives_the_terminal() -> None:
    """JSON itself escapes only C0 controls: a C1 CSI (``\\x9b``, which terminals
    take as ``ESC [``), DEL, a bidi override or a line separator went out raw."""
    hostile = "\x9b2J\x1b]0;owned\x07\x7f\u202eevil\u2028\u2029\ufeff\U000e0041"
    record = ReceivedDelivery(
        id="0" * 32,
        received_at=datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC),
        organization_id="o-1" + hostile,
        event_name="e" + hostile,
        version=1,
        idempotency_key="k",
        body=json.dumps({"eventName": "e", "version": 1, "data": hostile}).encode(),
        content_type=None,
        user_agent="ua" + hostile,
        status=500,
        reason="handler_failed",
        error_message=hostile,
        traceback="Traceback\n" + hostile,
    )
    for full in (False, True):
        line = json_line(record, full=full)
        assert line.isprintable(), [c for c in line if not c.isprintable()]
        fields = json.loads(line)  # the exact values all the same
        assert (fields["eventName"], fields["organizationId"]) == ("e" + hostile, "o-1" + hostile)
    fields = json.loads(json_line(record, full=True))
    assert (fields["userAgent"], fields["errorMessage"]) == ("ua" + hostile, hostile)
    assert fields["payload"]["data"] == hostile
    assert "\\u009b2J" in json_line(record)
    readable = msgspec.structs.replace(record, event_name="note.créée ü")
    assert '"eventName": "note.créée ü"' in json_line(readable)  # printable: kept as is


HOSTILE_REASON = "done\n4 replayed, 0 not successful\x1b[2J\x9b"


def _record(**fields: object) -> ReceivedDelivery:
    values: dict[str, object] = {
        "id": "0" * 32,
        "received_at": datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC),
        "organization_id": "o-1",
        "event_name": "note.created",
        "version": 1,
        "idempotency_key": "k",
        "body": b"{}",
        "content_type": None,
        "user_agent": None,
        "status": 500,
        "reason": "handler_failed",
    }
    values.update(fields)
    return ReceivedDelivery(**values)  # type: ignore[arg-type]


def test_a_replay_line_escapes_the_replays_reason() -> None:
    """The replay's reason (a receiver's own error class may name any) was printed raw:
    a line break forged a line, an escape drove the terminal."""
    line = replay_line(_record(), Outcome(500, HOSTILE_REASON))
    assert all(cell.isprintable() for cell in line.split("\t"))  # as a table cell
    assert line.endswith("-> 500 done 4 replayed, 0 not successful\\x1b[2J\\x9b")


def test_shows_replay_lines_escape_the_replays_reason() -> None:
    at = datetime.datetime(2026, 1, 3, tzinfo=datetime.UTC)
    record = _record(replays=(Replay(at=at, status=500, reason=HOSTILE_REASON),))
    lines = show_lines(record)
    assert f"replay: {at.isoformat()} 500 done\\n4 replayed, 0 not successful\\x1b[2J\\x9b" in lines
    assert all(line.isprintable() for line in lines if line.startswith("replay:"))


def test_list_cells_show_the_first_characters_of_a_long_event_or_organization() -> None:
    """Piped, a 1 MiB event name made a 1 MiB line: cut as on a terminal and in the
    dashboard. ``--json`` keeps the whole value."""
    record = _record(event_name="e" * 1_000_000, organization_id="o" * 5000)
    row = table_row(record)
    assert row[2] == "o" * (CELL_CHARS - 1) + "\u2026"
    assert row[3] == "e" * (CELL_CHARS - 1) + "\u2026 v1"
    _, line = table_lines([record])
    assert len(line) < 2 * CELL_CHARS + 100
    assert json.loads(json_line(record))["eventName"] == "e" * 1_000_000


def test_a_cell_is_cut_before_its_control_characters_are_escaped() -> None:
    """Cut after escaping, a ``\\x1b`` could lose its last digits."""
    record = _record(event_name="\x1b" * 500)
    cell = table_row(record)[3]
    assert cell == "\\x1b" * (CELL_CHARS - 1) + "\u2026 v1"


class _PagesRead(MemoryInbox):
    """A memory inbox that remembers the ``limit`` of every page searched."""

    def __init__(self) -> None:
        super().__init__()
        self.limits: list[int] = []

    def search(
        self, query: InboxQuery | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> InboxPage:
        self.limits.append(limit)
        return super().search(query, limit=limit, cursor=cursor)


def test_a_replay_selection_keeps_no_body_and_reads_small_pages() -> None:
    """The records a replay selects are kept until the last is replayed: with their
    bodies (1 MiB each at most), 10,000 failed deliveries held 10 GiB before the first
    replay ran. Each replay reads its record again; the lines show no body."""
    inbox = _PagesRead()
    start = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
    for index in range(250):
        inbox.record(
            msgspec.structs.replace(
                _record(reason="handler_failed", status=500, traceback="Traceback…"),
                id=f"{index:032x}",
                received_at=start + datetime.timedelta(seconds=index),
                body=b"x" * 10_000,
            )
        )
    records = replay_selection(inbox, selection(["handler_failed"]))
    assert [r.id for r in records] == [f"{index:032x}" for index in range(250)]  # oldest first
    assert {(r.body, r.traceback) for r in records} == {(b"", None)}
    assert dry_run_line(records[0]) == f"{0:032x}\tnote.created\thandler_failed\twould replay"
    assert inbox.limits
    assert max(inbox.limits) <= REPLAY_PAGE <= 100
