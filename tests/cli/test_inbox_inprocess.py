"""``service-webhooks inbox list|show|replay|prune|serve`` in-process, through
``click.testing.CliRunner``.

``tests/cli/test_inbox_cli.py`` runs the real console script in subprocesses (not
measured by coverage); these tests drive the same command objects inside the pytest
process, against an inbox a receiver filled in ``tmp_path``. For ``serve``,
``uvicorn.run`` is replaced by a recorder (in every serve test, refusals included), so no
server is ever started; the app it would have served is fed through
``httpx.ASGITransport``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import json
import re
import socket
import sqlite3
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from sw_closing import is_closed

from service_webhooks import WebhookReceiver, sign
from service_webhooks.cli import main
from service_webhooks.inbox.commands import CELL_CHARS

SECRET = "whsec-inbox-inprocess"
ORG = "o-INBOXIN-eu1"
OTHER_ORG = "o-INBOXOTHER-us1"

NOTE = b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a@b.c","text":"hi"}}'
FLAKY = b'{"eventName":"note.created","version":1,"data":{"id":"n-2","author":"a@b.c","text":"x"}}'
DELETED = b'{"eventName":"note.deleted","version":1,"data":{"id":"n-3"}}'
GARBLED = b"not json{"

# The receiver module `--receiver` loads: the same store file as the inbox the tests
# read; its handler fails for n-2 until the file `fixed` exists; `other` records into
# another file, `bare` keeps no inbox, `number` is not a receiver.
HOOKS = """
from pathlib import Path
from service_webhooks import WebhookReceiver

HERE = Path(__file__).parent
receiver = WebhookReceiver({secret!r}, store="sqlite:" + str(HERE / "app.sqlite3"))
other = WebhookReceiver({secret!r}, store="sqlite:" + str(HERE / "other.sqlite3"))
bare = WebhookReceiver({secret!r}, store="sqlite:" + str(HERE / "bare.sqlite3"), inbox=False)
number = 7

@receiver.on("note.created")
def handle(event):
    with open(HERE / "runs.txt", "a") as runs:
        runs.write(event.data.id + "\\n")
    if event.data.id == "n-2" and not (HERE / "fixed").exists():
        raise RuntimeError("bug in the handler")
"""


@dataclass
class Box:
    """The filled inbox: its store URL, the module name of its receiver, the record IDs
    by reason, and the file the handler appends each run to."""

    store: str
    module: str
    ids: dict[str, str]
    runs: Path
    path: Path

    def ran(self) -> list[str]:
        return self.runs.read_text().split() if self.runs.exists() else []


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Box]:
    module = f"hooks_inprocess_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(HOOKS.format(secret=SECRET)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    store = f"sqlite:{tmp_path / 'app.sqlite3'}"
    receiver = WebhookReceiver(SECRET, store=store)
    receiver.on("note.created")(lambda event: None)
    outcomes = {
        "processed": receiver.process(NOTE, sign(NOTE, SECRET, ORG)),
        "duplicate": receiver.process(NOTE, sign(NOTE, SECRET, ORG)),
        "unhandled": receiver.process(DELETED, sign(DELETED, SECRET, OTHER_ORG)),
        "malformed_envelope": receiver.process(GARBLED, sign(GARBLED, SECRET, ORG)),
    }
    assert {reason: o.reason for reason, o in outcomes.items()} == {r: r for r in outcomes}
    hooks = importlib.import_module(module)
    failed = hooks.receiver.process(FLAKY, sign(FLAKY, SECRET, ORG))
    assert (failed.status, failed.reason) == (500, "handler_failed")
    rows = [
        json.loads(line) for line in run("list", "--store", store, "--json").stdout.splitlines()
    ]
    ids = {row["reason"]: row["id"] for row in rows if row["reason"] != "duplicate"}
    assert set(ids) == {"processed", "unhandled", "malformed_envelope", "handler_failed"}
    yield Box(store, module, ids, tmp_path / "runs.txt", tmp_path)
    sys.modules.pop(module, None)


def run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(main, ["inbox", *args], env=env)
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def listed(box: Box, *args: str) -> list[dict[str, Any]]:
    out = run("list", "--store", box.store, "--json", *args).stdout
    return [json.loads(line) for line in out.splitlines()]


# --- list --------------------------------------------------------------------------


def test_list_json_is_newest_first_with_every_record(box: Box) -> None:
    rows = listed(box)
    assert [(r["reason"], r["status"], r["seen"]) for r in rows] == [
        ("handler_failed", 500, 1),
        ("malformed_envelope", 400, 1),
        ("unhandled", 200, 1),
        ("duplicate", 200, 2),
        ("processed", 200, 1),
    ]
    assert rows[0]["eventName"] == "note.created"
    assert rows[0]["version"] == 1
    assert rows[0]["replays"] == []


def test_list_filters(box: Box) -> None:
    def reasons(*args: str) -> list[str]:
        return [r["reason"] for r in listed(box, *args)]

    assert reasons("--status", "handler_failed") == ["handler_failed"]
    assert reasons("--status", "unhandled", "--status", "handler_failed") == [
        "handler_failed",
        "unhandled",
    ]
    assert reasons("--status", "2xx") == ["unhandled", "duplicate", "processed"]
    assert reasons("--status", "4XX") == ["malformed_envelope"]
    assert reasons("--status", "5xx") == ["handler_failed"]
    assert reasons("--event", "note.deleted") == ["unhandled"]
    assert reasons("--organization", OTHER_ORG) == ["unhandled"]
    assert reasons("--since", "1h") == reasons()
    assert reasons("--since", "2000-01-01T00:00:00") == reasons()  # naive: UTC
    assert reasons("--since", "2999-01-01T00:00:00+00:00") == []
    assert reasons("--limit", "2") == ["handler_failed", "malformed_envelope"]


def test_list_reads_the_store_from_the_environment(box: Box) -> None:
    out = run("list", "--json", "--status", "5xx", env={"SERVICE_WEBHOOKS_STORE": box.store})
    assert [json.loads(line)["id"] for line in out.stdout.splitlines()] == [
        box.ids["handler_failed"]
    ]


def test_list_reads_the_file_of_a_store_url_with_a_timeout(box: Box) -> None:
    """``sqlite:PATH?timeout=2``, as the receiver's setting may say: the inbox in PATH."""
    rows = listed(box, "--store", box.store + "?timeout=2")
    assert [r["reason"] for r in rows] == [r["reason"] for r in listed(box)]
    assert [p.name for p in box.path.iterdir() if "?" in p.name] == []
    result = run("list", "--store", box.store + "?mode=ro", code=2)
    assert "takes no query parameter but ?timeout=SECONDS" in result.stderr


def test_list_prints_tab_separated_lines_when_piped(box: Box) -> None:
    lines = run("list", "--store", box.store).stdout.splitlines()
    assert lines[0].split("\t") == [
        "ID", "RECEIVED (UTC)", "ORG", "EVENT", "STATUS", "REASON", "SEEN", "REPLAYED",
    ]  # fmt: skip
    cells = [line.split("\t") for line in lines[1:]]
    assert [c[5] for c in cells] == [
        "handler_failed", "malformed_envelope", "unhandled", "duplicate", "processed",
    ]  # fmt: skip
    failed, garbled, deleted, _, _ = cells
    assert failed[0] == box.ids["handler_failed"]  # whole: its first digits are the time
    assert (failed[2], failed[3], failed[4], failed[6], failed[7]) == (
        ORG, "note.created v1", "500", "1", "",
    )  # fmt: skip
    assert garbled[3] == "-"  # no version: no event shown
    assert (deleted[2], deleted[3]) == (OTHER_ORG, "note.deleted v1")


def test_list_usage_errors(box: Box) -> None:
    result = run("list", "--store", box.store, "--status", "2xx", "--status", "5xx", code=2)
    assert "one status class at a time" in result.stderr
    result = run("list", "--store", box.store, "--since", "yesterday", code=2)
    assert "a duration (30m, 2h, 7d) or an ISO 8601 time" in result.stderr
    for too_long in ("9999999d", "99999999999d"):  # before year 1: was an OverflowError
        result = run("list", "--store", box.store, "--since", too_long, code=2)
        assert f"--since {too_long}: a duration too long to count back" in result.stderr
    result = run("list", "--store", box.store, "--limit", "0", code=2)
    assert "--limit" in result.stderr
    result = run("list", "--store", "redis://127.0.0.1:6379/0", code=2)
    assert "no inbox for URL scheme 'redis'" in result.stderr


@pytest.mark.parametrize("status", ["6xx", "0XX", " "])
def test_a_status_no_answer_can_have_is_a_usage_error_not_an_empty_list(
    box: Box, status: str
) -> None:
    result = run("list", "--store", box.store, "--status", status, code=2)
    assert "a reason (handler_failed, unhandled...) or a class (2xx, 4xx, 5xx)" in result.stderr
    result = run(
        "replay", "--store", box.store, "--status", status, "--receiver",
        f"{box.module}:receiver", "--dry-run", code=2,
    )  # fmt: skip
    assert "or a class (2xx, 4xx, 5xx)" in result.stderr


def test_control_characters_of_a_delivery_never_reach_the_terminal(box: Box) -> None:
    name = "evil\tname\nstatus: 200\x1b[2J\x1b]0;owned\x07"
    body = json.dumps(
        {"eventName": name, "version": 1, "data": {"text": "\x1b[31mred\x9b"}}
    ).encode()
    receiver = WebhookReceiver(SECRET, store=box.store)
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "unhandled"
    out = run("list", "--store", box.store).stdout
    assert "\x1b" not in out
    assert "\x07" not in out
    lines = out.splitlines()
    assert len(lines) == 1 + 6  # the header, one line per delivery
    assert lines[1].split("\t")[3] == "evil name status: 200\\x1b[2J\\x1b]0;owned\\x07 v1"
    newest = listed(box)[0]["id"]
    assert run("replay", newest, "--store", box.store, "--receiver", f"{box.module}:receiver",
               "--dry-run").stdout.count("\n") == 1  # fmt: skip
    shown = run("show", newest, "--store", box.store).stdout
    for control in ("\x1b", "\x07", "\x9b"):
        assert control not in shown
    assert "eventName: evil\\tname\\nstatus: 200\\x1b[2J\\x1b]0;owned\\x07" in shown.splitlines()
    assert not any(line.startswith("status: 200\\x1b") for line in shown.splitlines())
    as_json = run("show", newest, "--store", box.store, "--json").stdout
    assert "\x9b" not in as_json  # JSON leaves C1 controls raw: escaped as \u009b
    assert json.loads(as_json)["eventName"] == name  # JSON keeps the exact value
    assert json.loads(as_json)["payload"]["data"]["text"] == "\x1b[31mred\x9b"


def test_piped_list_cuts_a_long_event_name_as_the_terminal_does(box: Box) -> None:
    """Piped, every cell was printed whole (a 1 MiB event name, a 1 MiB line) while a
    terminal's table showed its start; ``--json`` keeps the whole value."""
    name = "note." + "x" * 300_000
    body = json.dumps({"eventName": name, "version": 1, "data": {}}).encode()
    receiver = WebhookReceiver(SECRET, store=box.store)
    assert receiver.process(body, sign(body, SECRET, ORG)).reason == "unhandled"
    newest = run("list", "--store", box.store).stdout.splitlines()[1].split("\t")
    assert newest[3] == name[: CELL_CHARS - 1] + "\u2026 v1"
    assert listed(box)[0]["eventName"] == name


def test_an_inbox_that_cannot_be_opened_is_an_error_without_the_password() -> None:
    url = "postgresql://user:s3cret@127.0.0.1:1/nowhere"
    result = run("list", "--store", url, code=1)
    assert "cannot open the inbox at postgresql://user:***@127.0.0.1:1/nowhere" in result.stderr
    assert "OperationalError: connection failed" in result.stderr  # libpq's reason, at once
    assert "PoolTimeout" not in result.stderr
    assert "s3cret" not in result.stderr


@pytest.mark.parametrize("command", [["list"], ["show", "0123"], ["prune", "--all"]])
def test_a_missing_sqlite_file_is_an_error_not_an_empty_inbox(
    tmp_path: Path, command: list[str]
) -> None:
    """A mistyped path (or the default one, run from the wrong directory) must not list
    an empty inbox it just created."""
    path = tmp_path / "typo.sqlite3"
    result = run(*command, "--store", f"sqlite:{path}", code=1)
    assert f"no inbox at {path}: the file does not exist" in result.stderr
    assert not path.exists()


@pytest.mark.parametrize(
    ("store", "kept"),
    [("memory", "memory store"), ("sqlite::memory:", "in-memory SQLite database")],
)
@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["list", "--json"],
        ["show", "0123"],
        ["replay", "0123", "--receiver", "x:receiver"],
        ["replay", "--status", "5xx", "--dry-run", "--receiver", "x:receiver"],
        ["prune", "--all"],
    ],
)
def test_a_store_that_keeps_no_inbox_is_a_usage_error(
    store: str, kept: str, command: list[str]
) -> None:
    """Not an empty table and exit 0: nothing a receiver recorded can be read there."""
    result = run(*command, "--store", store, code=2)
    assert result.stdout == ""
    assert (
        f"Error: Invalid value for --store: the {kept} keeps no inbox: use sqlite:PATH or "
        "postgresql://…"
    ) in result.stderr


@pytest.mark.parametrize(
    ("store", "scheme"), [("redis://127.0.0.1:6379/0", "redis"), ("nosuch://x", "nosuch")]
)
def test_a_scheme_that_keeps_no_inbox_names_only_the_ones_that_do(store: str, scheme: str) -> None:
    """Not "use memory, sqlite:PATH or postgresql://…": the memory store is refused too."""
    result = run("list", "--store", store, code=2)
    assert result.stdout == ""
    assert result.stderr.endswith(
        f"Error: Invalid value for --store: no inbox for URL scheme '{scheme}': use "
        "sqlite:PATH or postgresql://…\n"
    )


# --- show --------------------------------------------------------------------------


def test_show_json_is_the_whole_record(box: Box) -> None:
    out = run("show", box.ids["handler_failed"][:20], "--store", box.store, "--json").stdout
    shown = json.loads(out)
    assert shown["id"] == box.ids["handler_failed"]
    assert base64.b64decode(shown["bodyBase64"]) == FLAKY
    assert shown["payload"]["data"]["id"] == "n-2"
    assert (shown["errorType"], shown["errorMessage"]) == ("RuntimeError", "bug in the handler")
    assert "RuntimeError: bug in the handler" in shown["traceback"]

    garbled = json.loads(
        run("show", box.ids["malformed_envelope"], "--store", box.store, "--json").stdout
    )
    assert garbled["payload"] is None
    assert base64.b64decode(garbled["bodyBase64"]) == GARBLED


def test_show_text_gives_fields_traceback_replays_and_payload(box: Box) -> None:
    (box.path / "fixed").touch()
    run("replay", box.ids["handler_failed"], "--receiver", f"{box.module}:receiver",
        "--store", box.store)  # fmt: skip
    run("replay", box.ids["handler_failed"], "--force", "--receiver", f"{box.module}:receiver",
        "--store", box.store)  # fmt: skip
    lines = run("show", box.ids["handler_failed"], "--store", box.store).stdout.splitlines()
    assert f"id: {box.ids['handler_failed']}" in lines
    assert "reason: handler_failed" in lines
    assert "status: 500" in lines
    assert "errorMessage: bug in the handler" in lines
    replays = [line for line in lines if line.startswith("replay: ")]
    assert [line.split()[2:] for line in replays] == [
        ["200", "processed"],
        ["200", "processed", "(forced)"],
    ]
    assert "traceback:" in lines
    assert any("RuntimeError: bug in the handler" in line for line in lines)
    payload = lines[lines.index("payload:") + 1 :]
    assert json.loads("\n".join(payload))["data"] == {"id": "n-2", "author": "a@b.c", "text": "x"}


def test_show_text_of_a_body_that_is_not_json_prints_it_as_text(box: Box) -> None:
    lines = run("show", box.ids["malformed_envelope"], "--store", box.store).stdout.splitlines()
    assert lines[-2:] == ["payload:", GARBLED.decode()]
    assert "traceback:" not in lines
    assert not any(line.startswith("errorType:") for line in lines)


def test_show_errors(box: Box) -> None:
    result = run("show", "abcdef0123", "--store", box.store, code=1)
    assert "no delivery 'abcdef0123' in the inbox" in result.stderr
    result = run("show", "", "--store", box.store, code=1)  # every ID starts with ""
    assert "matches several deliveries: give more digits" in result.stderr
    result = run("show", "not-hex", "--store", box.store, code=2)
    assert "Error: delivery ID 'not-hex' is not a hex ID prefix" in result.stderr
    assert "id_prefix" not in result.stderr


# --- replay ------------------------------------------------------------------------


def test_replay_by_id_then_duplicate_then_forced(box: Box) -> None:
    failed = box.ids["handler_failed"]
    spec = f"{box.module}:receiver"
    assert box.ran() == ["n-2"]

    result = run("replay", failed[:20], "--receiver", spec, "--store", box.store, code=1)
    assert result.stdout == f"{failed}\tnote.created\thandler_failed -> 500 handler_failed\n"
    assert "1 replayed, 1 not successful" in result.stderr
    assert box.ran() == ["n-2", "n-2"]

    (box.path / "fixed").touch()
    result = run("replay", failed, "--receiver", spec, "--store", box.store)
    assert result.stdout == f"{failed}\tnote.created\thandler_failed -> 200 processed\n"
    assert "1 replayed, 0 not successful" in result.stderr
    assert box.ran() == ["n-2"] * 3

    result = run("replay", failed, "--receiver", spec, "--store", box.store)
    assert "-> 200 duplicate" in result.stdout
    assert box.ran() == ["n-2"] * 3  # nothing ran

    result = run("replay", failed, "--force", "--receiver", spec, "--store", box.store)
    assert "-> 200 processed" in result.stdout
    assert box.ran() == ["n-2"] * 4
    replays = listed(box, "--status", "handler_failed")[0]["replays"]
    assert [(r["reason"], r["forced"]) for r in replays] == [
        ("handler_failed", False),
        ("processed", False),
        ("duplicate", False),
        ("processed", True),
    ]


def test_replay_a_status_selection_dry_run_then_for_real(box: Box) -> None:
    spec = f"{box.module}:receiver"
    args = ("--status", "handler_failed", "--status", "unhandled", "--since", "1h")
    result = run("replay", *args, "--receiver", spec, "--store", box.store, "--dry-run")
    assert result.stdout.splitlines() == [  # oldest first
        f"{box.ids['unhandled']}\tnote.deleted\tunhandled\twould replay",
        f"{box.ids['handler_failed']}\tnote.created\thandler_failed\twould replay",
    ]
    assert "2 deliveries would be replayed" in result.stderr
    assert box.ran() == ["n-2"]

    (box.path / "fixed").touch()
    result = run("replay", *args, "--receiver", spec, "--store", box.store)
    assert result.stdout.splitlines() == [
        f"{box.ids['unhandled']}\tnote.deleted\tunhandled -> 200 unhandled",
        f"{box.ids['handler_failed']}\tnote.created\thandler_failed -> 200 processed",
    ]
    assert "2 replayed, 0 not successful" in result.stderr
    assert box.ran() == ["n-2", "n-2"]


def test_a_dry_run_needs_no_receiver_and_a_real_replay_does(box: Box) -> None:
    """``--dry-run`` runs no handler, yet it had demanded ``--receiver``."""
    failed = box.ids["handler_failed"]
    result = run("replay", failed, "--store", box.store, "--dry-run")
    assert result.stdout.splitlines() == [f"{failed}\tnote.created\thandler_failed\twould replay"]
    refused = run("replay", failed, "--store", box.store, code=2)
    assert "Missing option '--receiver'" in refused.stderr
    assert box.ran() == ["n-2"]  # neither ran a handler


def test_replay_through_a_receiver_of_another_inbox_fails_per_record(box: Box) -> None:
    failed = box.ids["handler_failed"]
    result = run("replay", failed, "--receiver", f"{box.module}:other", "--store", box.store,
                 code=1)  # fmt: skip
    assert f"{failed}\tnot in the receiver's inbox" in result.stderr
    assert "1 replayed, 1 not successful" in result.stderr
    assert box.ran() == ["n-2"]


def test_replay_through_a_receiver_of_another_inbox_says_so_once(box: Box) -> None:
    """When not one selected delivery is in the receiver's inbox, the receiver records
    elsewhere than ``--store``: the operator is told which option to fix, once, instead
    of only a line per delivery (2,000 of them after a day of retries)."""
    args = ("--status", "5xx", "--receiver", f"{box.module}:other", "--store", box.store)
    result = run("replay", *args, code=1)
    assert result.stderr.count("not in the receiver's inbox") == 1
    assert result.stderr.endswith(
        f"none of them is in the inbox of {box.module}:other: it records into another "
        f"inbox than --store {box.store}; pass the --store URL it records into (or load a "
        "receiver that records into this one)\n"
    )
    own = ("--status", "5xx", "--receiver", f"{box.module}:receiver", "--store", box.store)
    assert "none of them" not in run("replay", *own, code=1).stderr  # its handler fails


def test_replay_usage_errors(box: Box) -> None:
    spec = f"{box.module}:receiver"
    failed = box.ids["handler_failed"]

    def refused(*args: str) -> str:
        return run("replay", *args, "--store", box.store, code=2).stderr

    assert "Error: give delivery IDs or --status, not both" in refused(
        failed, "--status", "5xx", "--receiver", spec
    )
    assert "Error: nothing to replay: give delivery IDs, or select them with --status" in (
        refused("--receiver", spec)
    )
    assert "--since selects with --status" in refused(failed, "--since", "1h", "--receiver", spec)
    assert "--since selects with --status" in refused("--since", "1h", "--receiver", spec)
    assert "Error: delivery ID 'zzz' is not a hex ID prefix" in refused("zzz", "--receiver", spec)
    assert "Missing option '--receiver'" in refused(failed)
    assert "MODULE:ATTR, e.g. myapp.webhooks:receiver" in refused(failed, "--receiver", "nocolon")
    assert "MODULE:ATTR" in refused(failed, "--receiver", ":receiver")
    assert "cannot load no_such_module_x:r" in refused(failed, "--receiver", "no_such_module_x:r")
    assert f"cannot load {box.module}:missing" in refused(
        failed, "--receiver", f"{box.module}:missing"
    )
    assert f"{box.module}:number is not a WebhookReceiver" in refused(
        failed, "--receiver", f"{box.module}:number"
    )
    assert (
        "this receiver keeps no inbox (inbox=False, or no inbox= beside a memory or Redis store)"
        in refused(failed, "--receiver", f"{box.module}:bare")
    )
    assert "." not in sys.path[:1]  # the loader's sys.path entry is gone again
    assert box.ran() == ["n-2"]


def test_replay_usage_shows_the_ids_are_optional_and_repeatable() -> None:
    assert " replay [OPTIONS] [ID]...\n" in run("replay", "--help").stdout


# --- prune -------------------------------------------------------------------------


def test_prune_by_age_size_and_all(box: Box) -> None:
    assert run("prune", "--store", box.store).stdout == "deleted 0 deliveries\n"
    assert run("prune", "--store", box.store, "--retention", "2h").stdout == (
        "deleted 0 deliveries\n"
    )
    result = run("prune", "--store", box.store, "--retention", "soon", code=2)
    assert "a duration such as 30d, 12h or 90m" in result.stderr
    result = run("prune", "--store", box.store, "--max-bytes", "0", code=2)
    assert "--max-bytes" in result.stderr
    assert len(listed(box)) == 5
    failed = json.loads(
        run("show", box.ids["handler_failed"], "--store", box.store, "--json").stdout
    )
    newest_two = len(FLAKY) + len(failed["traceback"].encode()) + len(GARBLED)
    result = run("prune", "--store", box.store, "--max-bytes", str(newest_two))
    assert result.stdout == "deleted 3 deliveries\n"  # the oldest, until the two newest fit
    assert [r["reason"] for r in listed(box)] == ["handler_failed", "malformed_envelope"]
    assert run("prune", "--store", box.store, "--all").stdout == "deleted 2 deliveries\n"
    assert listed(box) == []


@pytest.mark.parametrize("retention", ["0d", "999999999d"])
def test_prune_refuses_a_retention_of_nothing_or_past_a_date(box: Box, retention: str) -> None:
    # 999999999d was taken, then the prune's cutoff overflowed: a traceback, exit 1
    result = run("prune", "--store", box.store, "--retention", retention, code=2)
    assert "Invalid value for --retention: retention must be > 0 seconds" in result.stderr
    assert len(listed(box)) == 5


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[sqlite3.Connection]:
    """Every connection the SQLite inbox opens from now on."""
    sqlite_inbox = importlib.import_module("service_webhooks.inbox._sqlite")
    opened: list[sqlite3.Connection] = []
    real = sqlite_inbox.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(real(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(sqlite_inbox, "connect", connect)
    return opened


def test_the_commands_close_the_inbox_they_opened_when_they_fail_too(
    box: Box, connections: list[sqlite3.Connection]
) -> None:
    # An error's traceback kept the inbox until the interpreter exited, where Python 3.13
    # reports its connection open (ResourceWarning: unclosed database)
    spec = f"{box.module}:receiver"
    results = [
        run("show", "abcdef0123", "--store", box.store, code=1),
        run("show", "", "--store", box.store, code=1),
        run("show", box.ids["processed"], "--store", box.store),
        run("list", "--store", box.store),
        run("replay", "abcdef0123", "--receiver", spec, "--store", box.store, code=1),
        run("replay", box.ids["processed"], "--receiver", "nope_x:r", "--store", box.store, code=2),
        run("replay", "--status", "5xx", "--receiver", spec, "--store", box.store, code=1),
        run("prune", "--store", box.store, "--retention", "3650d"),
    ]
    assert len(connections) >= len(results)
    assert all(is_closed(connection) for connection in connections)


def test_a_postgres_database_without_the_inbox_table_is_closed_when_refused(
    postgres_url: str,
) -> None:
    # "no inbox in ...: it has no ... table" left the inbox's pool, its connection and
    # its threads, open to the interpreter's exit
    import psycopg

    name = f"sw-test-{uuid.uuid4().hex[:8]}"
    table = f"sw_missing_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in postgres_url else "?"
    store = f"{postgres_url}{sep}application_name={name}&inbox_table={table}"
    run("list", "--store", store, code=1)
    with psycopg.connect(postgres_url) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]
        ).fetchone()
    assert row == (0,)


# --- serve (uvicorn.run recorded: no server is ever started) ------------------------


def get(app: Any, path: str, auth: tuple[str, str] | None) -> httpx.Response:
    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://inbox") as client:
            return await client.get(path, auth=auth)

    return asyncio.run(ask())


def test_serve_makes_a_password_and_hands_the_dashboard_to_uvicorn(
    box: Box, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    result = run("serve", "--store", box.store, "--host", "127.0.0.1", "--port", "0")
    [(app, options)] = served
    port = options.pop("bound_port")
    assert options == {
        "host": "127.0.0.1", "port": 0, "log_level": "warning", "server_header": False,
        "root_path": "",
    }  # fmt: skip
    made = re.search(r"no --basic-auth given: log in as admin:(\S+)\n", result.stderr)
    assert made is not None
    assert len(made[1]) >= 16
    assert port != 0  # the port the system chose, printed
    assert f"inbox dashboard on http://127.0.0.1:{port}/ (Ctrl-C to stop)" in result.stderr
    assert get(app, "/", None).status_code == 401
    assert get(app, "/", ("admin", "wrong")).status_code == 401
    page = get(app, "/", ("admin", made[1]))
    assert page.status_code == 200
    assert box.ids["handler_failed"] in page.text
    assert "Webhook inbox" in page.text


def test_serve_on_a_port_in_use_fails_before_making_a_password(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[object] = []  # the real bind, and nothing served after it fails
    inbox_command = importlib.import_module("service_webhooks.cli.inbox")
    monkeypatch.setattr(inbox_command, "serve_until_stopped", lambda *args: served.append(args))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(
            "serve", "--store", box.store, "--host", "127.0.0.1", "--port", str(port), code=1
        )
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "log in as" not in result.stderr
    assert served == []


def test_serve_takes_an_ipv6_host_in_brackets_as_in_a_url(
    box: Box, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    # "[::1]" passed the loopback check, then failed to bind: "Name or service not known"
    result = run("serve", "--store", box.store, "--host", "[::1]", "--port", "0")
    [(_, options)] = served
    assert options["host"] == "::1"
    assert f"inbox dashboard on http://[::1]:{options['bound_port']}/" in result.stderr


def test_serve_with_credentials_a_receiver_and_an_ipv6_host(
    box: Box, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    result = run(
        "serve", "--store", box.store, "--host", "::", "--port", "0", "--basic-auth", "ops:pw-1",
        "--receiver", f"{box.module}:receiver", "--title", "Ops hooks",
    )  # fmt: skip
    assert "log in as" not in result.stderr
    [(app, options)] = served
    assert (options["host"], options["port"]) == ("::", 0)
    assert f"inbox dashboard on http://[::]:{options['bound_port']}/" in result.stderr
    page = get(app, f"/d/{box.ids['handler_failed']}", ("ops", "pw-1"))
    assert page.status_code == 200
    assert "Ops hooks" in page.text
    assert "replay" in page.text.lower()


def test_serve_refuses_a_receiver_it_cannot_load(
    box: Box, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    result = run("serve", "--store", box.store, "--receiver", f"{box.module}:number", code=2)
    assert "is not a WebhookReceiver" in result.stderr
    assert served == []


def test_serve_without_the_dashboard_extra_says_which(
    served: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "service_webhooks.dashboard", None)
    result = run("serve", "--store", "sqlite:unused.sqlite3", code=1)
    assert "pip install 'service-webhooks[dashboard]'" in result.stderr
    assert served == []


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "example.org", "::", "[::]"])
def test_serve_refuses_a_reachable_host_without_credentials(
    host: str, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    result = run("serve", "--store", "sqlite:unused.sqlite3", "--host", host, code=2)
    assert f"--host {host} is reachable from other machines" in result.stderr
    assert served == []


def test_serve_refuses_a_store_that_keeps_no_inbox(
    served: list[tuple[Any, dict[str, Any]]],
) -> None:
    result = run("serve", "--store", "memory", "--basic-auth", "u:p", code=2)
    assert "the memory store keeps no inbox" in result.stderr
    assert served == []


def test_serve_refuses_a_store_that_keeps_no_inbox_before_making_a_password(
    served: list[tuple[Any, dict[str, Any]]],
) -> None:
    result = run("serve", "--store", "memory", code=2)
    assert "log in as" not in result.stderr
    assert served == []


def test_serve_refuses_a_new_sqlite_file_in_a_missing_directory(
    tmp_path: Path, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    # it used to start, then answer every page 500 (sqlite3: unable to open database file)
    missing = tmp_path / "nowhere" / "inbox.sqlite3"
    result = run("serve", "--store", f"sqlite:{missing}", "--basic-auth", "u:p", code=1)
    assert f"the directory {missing.parent} does not exist" in result.stderr
    assert served == []
    assert not missing.parent.exists()


def test_serve_refuses_a_receiver_that_keeps_no_inbox(
    box: Box, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    # its Replay button could only fail: the dashboard answered 500 to each press
    result = run(
        "serve", "--store", box.store, "--receiver", f"{box.module}:bare", "--basic-auth",
        "u:p", code=2,
    )  # fmt: skip
    assert (
        "this receiver keeps no inbox (inbox=False, or no inbox= beside a memory or Redis store)"
        in result.stderr
    )
    assert served == []


@pytest.mark.parametrize("credentials", ["admin", "admin:", ":secret", ""])
def test_serve_refuses_malformed_basic_auth(
    credentials: str, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    result = run("serve", "--basic-auth", credentials, "--host", "::1", code=2)
    assert "USER:PASSWORD, both non-empty" in result.stderr
    assert served == []


def test_serve_reads_malformed_credentials_from_the_environment(
    served: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVICE_WEBHOOKS_DASHBOARD_AUTH", "admin")
    result = run("serve", "--host", "0.0.0.0", code=2)  # credentials given, but malformed
    assert "USER:PASSWORD, both non-empty" in result.stderr
    assert served == []


@pytest.mark.parametrize("credentials", ["ops:pw-1\n", " ops:pw-1", "ops :pw-1", "ops: pw-1"])
def test_serve_refuses_whitespace_around_the_credentials(
    credentials: str, served: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # "ops:pw-1\n" (a line read from a file with its newline) served a dashboard no one
    # could log into: the newline was part of the password
    monkeypatch.setenv("SERVICE_WEBHOOKS_DASHBOARD_AUTH", credentials)
    result = run("serve", "--host", "::1", code=2)
    assert "whitespace around the user or the password" in result.stderr
    assert "pw-1" not in result.stderr  # the password is never shown
    assert served == []


def test_replay_by_status_reads_every_page_of_the_selection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = f"sqlite:{tmp_path / 'many.sqlite3'}"
    receiver = WebhookReceiver(SECRET, store=store)
    bodies = [
        b'{"eventName":"note.deleted","version":1,"data":{"id":"m-%d"}}' % n for n in range(502)
    ]
    for body in bodies:
        assert receiver.process(body, sign(body, SECRET, ORG)).reason == "unhandled"
    result = run("replay", "--status", "unhandled", "--receiver", "unused:r", "--store", store,
                 "--dry-run")  # fmt: skip
    assert "502 deliveries would be replayed" in result.stderr
    ids = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert len(set(ids)) == 502  # past the first page of 500, none twice
    newest_first = [r["id"] for r in map(json.loads, run(
        "list", "--store", store, "--json", "--limit", "3").stdout.splitlines())]  # fmt: skip
    assert ids[-3:] == newest_first[::-1]  # oldest first: the newest come last


# --- a database without the inbox's table (another application's) -------------------

READS = [["list"], ["list", "--json"], ["show", "0123"], ["prune", "--all"]]


def tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {name for (name,) in rows}


@pytest.fixture
def django_db(tmp_path: Path) -> Path:
    """A SQLite file another application made: a Django project's ``db.sqlite3``."""
    path = tmp_path / "db.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE django_migrations (id INTEGER PRIMARY KEY, app TEXT)")
        connection.commit()
    return path


@pytest.mark.parametrize("command", READS)
def test_reading_a_sqlite_file_without_the_inbox_table_leaves_it_as_it_was(
    django_db: Path, command: list[str]
) -> None:
    before = django_db.read_bytes()
    result = run(*command, "--store", f"sqlite:{django_db}", code=1)
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: no inbox in {django_db}: it has no service_webhooks_inbox table (pass the "
        "--store URL your receiver records into; a Django project keeps its inbox in its own "
        "database table: see its admin)\n"
    )
    assert django_db.read_bytes() == before  # no table, not even switched to WAL
    assert tables(django_db) == {"django_migrations"}


def test_a_file_that_is_not_a_database_cannot_be_opened(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, but long enough to have a header " * 4)
    result = run("list", "--store", f"sqlite:{path}", code=1)
    assert f"cannot open the inbox at sqlite:{path}: DatabaseError" in result.stderr
    assert "Traceback" not in result.output


def test_serve_over_a_sqlite_file_without_the_inbox_table_waits_for_a_receiver(
    django_db: Path, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    store, auth = f"sqlite:{django_db}", ("ops", "pw-1")
    result = run("serve", "--store", store, "--basic-auth", "ops:pw-1")
    assert (
        f"note: {django_db} has no service_webhooks_inbox table yet: the dashboard shows no "
        "delivery until a receiver records one there\n"
    ) in result.stderr
    [(app, _)] = served
    assert "No delivery has arrived yet." in get(app, "/", auth).text
    assert get(app, "/overview", auth).status_code == 200
    assert get(app, "/d/0123456789abcdef", auth).status_code == 404
    assert tables(django_db) == {"django_migrations"}  # the pages created nothing

    receiver = WebhookReceiver(SECRET, store=store)  # the receiver does create it
    receiver.on("note.created")(lambda event: None)
    assert receiver.process(NOTE, sign(NOTE, SECRET, ORG)).reason == "processed"
    [record] = receiver.inbox.search().items  # type: ignore[union-attr]
    assert record.id in get(app, "/", auth).text
    assert get(app, f"/d/{record.id}", auth).status_code == 200


def test_reading_a_postgresql_database_without_the_inbox_table_leaves_it_without(
    postgres_url: str, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    psycopg = pytest.importorskip("psycopg")
    table = f"sw_cli_absent_{uuid.uuid4().hex[:12]}"
    store = f"{postgres_url}?inbox_table={table}"

    def exists() -> bool:
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            row = connection.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()
            return bool(row[0])

    try:
        for command in READS:
            result = run(*command, "--store", store, code=1)
            assert result.stderr == (
                f"Error: no inbox in {store}: it has no {table} table (pass the --store URL "
                "your receiver records into; a Django project keeps its inbox in its own "
                "database table: see its admin)\n"
            )
        result = run("serve", "--store", store, "--basic-auth", "ops:pw-1")
        assert f"note: {store} has no {table} table yet" in result.stderr
        [(app, _)] = served
        assert "No delivery has arrived yet." in get(app, "/", ("ops", "pw-1")).text
        assert not exists()
        # replay still creates the table, as the receiver it loads would
        result = run("replay", "--store", store, "--status", "5xx", "--dry-run",
                     "--receiver", "unused:receiver")  # fmt: skip
        assert result.stderr == "0 deliveries would be replayed\n"
        assert exists()
        assert run("list", "--store", store, "--json").stdout == ""
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f"DROP TABLE IF EXISTS {table}")
