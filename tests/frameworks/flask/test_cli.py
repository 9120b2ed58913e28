"""``flask service-webhooks list|show|replay`` through ``app.test_cli_runner()``: they
print what ``service-webhooks inbox list|show|replay`` prints."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from flask import Flask

from service_webhooks import Event, sign
from service_webhooks.adapters.flask import CONFIG_KEYS, ServiceWebhooks
from service_webhooks.cli import main
from service_webhooks.inbox import InboxQuery, MemoryInbox, SQLiteInbox

SECRET = "whsec-flask-cli-0123456789abcdef0123456789abcdef"


def envelope(name: str, **data: object) -> bytes:
    data = {"id": uuid.uuid4().hex, "author": "a@example.com", "text": "hi", **data}
    return json.dumps({"eventName": name, "version": 1, "data": data}).encode()


class App:
    """An app whose ``note.created`` handler raises until ``fixed``, with a memory inbox."""

    def __init__(self, inbox: Any = None, **config: Any) -> None:
        self.runs: list[str] = []
        self.fixed = False
        self.inbox = MemoryInbox() if inbox is None else inbox
        webhooks = ServiceWebhooks()
        webhooks.on("note.created")(self.handler)
        self.app = Flask(__name__)
        self.app.config.update(
            {
                "SERVICE_WEBHOOKS_SECRETS": SECRET,
                "SERVICE_WEBHOOKS_STORE": "memory",
                "SERVICE_WEBHOOKS_INBOX": self.inbox,
                **config,
            }
        )
        webhooks.init_app(self.app)
        self.cli = self.app.test_cli_runner()

    def handler(self, event: Event[Any]) -> None:
        self.runs.append(event.data.id)
        if not self.fixed:
            raise RuntimeError("a bug in the handler")

    def deliver(self, body: bytes) -> int:
        signature = sign(body, SECRET, "o-1")
        response = self.app.test_client().post(
            "/webhooks", data=body, headers={"Service-Signature": signature}
        )
        return response.status_code

    def run(self, *argv: str) -> Any:
        return self.cli.invoke(args=["service-webhooks", *argv])


@pytest.fixture
def app() -> App:
    return App()


def test_the_inbox_is_a_config_key() -> None:
    assert CONFIG_KEYS["SERVICE_WEBHOOKS_INBOX"] == "inbox"


def test_list_show_and_replay(app: App) -> None:
    failed = envelope("note.created", text="<b>bold</b>")
    unhandled = envelope("segment.trend_alert")
    assert app.deliver(failed) == 500
    assert app.deliver(unhandled) == 200
    [first] = app.inbox.search().items[1:]
    assert first.body == failed

    listing = app.run("list")
    assert listing.exit_code == 0, listing.output
    assert listing.output.index("unhandled") < listing.output.index(first.id)  # newest first
    only_5xx = app.run("list", "--status", "5xx", "--event", "note.created", "--since", "1h")
    assert only_5xx.output.splitlines()[1].split("\t")[0] == first.id
    assert app.run("list", "--organization", "o-other").output == HEADER + "\n"
    as_json = json.loads(app.run("list", "--status", "handler_failed", "--json").output)
    assert (as_json["id"], as_json["reason"]) == (first.id, "handler_failed")

    shown = app.run("show", first.id[:20])
    assert shown.exit_code == 0, shown.output
    assert "RuntimeError: a bug in the handler" in shown.output
    assert '"text": "<b>bold</b>"' in shown.output  # pretty-printed payload
    assert app.run("show", "ffffffff").exit_code == 1

    dry = app.run("replay", "--status", "handler_failed", "--dry-run")
    assert (dry.exit_code, len(app.runs)) == (0, 1)
    assert dry.stdout == f"{first.id}\tnote.created\thandler_failed\twould replay\n"
    assert dry.stderr == "1 delivery would be replayed\n"
    assert app.run("replay", first.id).exit_code == 1  # still broken: not successful
    app.fixed = True
    replayed = app.run("replay", first.id)
    assert replayed.exit_code == 0, replayed.output
    assert replayed.stdout == f"{first.id}\tnote.created\thandler_failed -> 200 processed\n"
    assert replayed.stderr == "1 replayed, 0 not successful\n"
    assert len(app.runs) == 3
    record = app.inbox.get(first.id)
    assert record is not None
    assert [r.reason for r in record.replays] == ["handler_failed", "processed"]


HEADER = "ID\tRECEIVED (UTC)\tORG\tEVENT\tSTATUS\tREASON\tSEEN\tREPLAYED"
LIST_FIELDS = [
    "id", "receivedAt", "organizationId", "eventName", "version", "status", "reason", "seen",
    "handlerTime", "replays",
]  # fmt: skip
SHOW_FIELDS = [
    *LIST_FIELDS, "idempotencyKey", "contentType", "userAgent", "detail", "errorType",
    "errorMessage", "traceback", "payload", "bodyBase64",
]  # fmt: skip


def test_list_and_show_print_the_documented_table_and_json(app: App) -> None:
    body = envelope("note.created", text="é")
    assert app.deliver(body) == 500
    [record] = app.inbox.search().items

    listing = app.run("list")
    assert listing.exit_code == 0, listing.output
    header, row = listing.output.splitlines()
    assert header == HEADER
    assert row.split("\t") == [
        record.id, f"{record.received_at:%Y-%m-%d %H:%M:%S}", "o-1", "note.created v1", "500",
        "handler_failed", "1", "",
    ]  # fmt: skip

    listed = app.run("list", "--json")
    assert listed.exit_code == 0, listed.output
    fields = json.loads(listed.output)
    assert list(fields) == LIST_FIELDS  # camelCase, as documented; no body
    assert (fields["receivedAt"], fields["organizationId"]) == (
        record.received_at.isoformat(), "o-1",
    )  # fmt: skip

    shown = app.run("show", record.id[:20], "--json")
    assert shown.exit_code == 0, shown.output
    fields = json.loads(shown.output)
    assert list(fields) == SHOW_FIELDS
    assert base64.b64decode(fields["bodyBase64"]) == body
    assert fields["payload"]["data"]["text"] == "é"
    assert fields["errorMessage"] == "a bug in the handler"

    text = app.run("show", record.id).output.splitlines()
    assert text[:3] == [f"id: {record.id}", f"receivedAt: {record.received_at.isoformat()}",
                        "organizationId: o-1"]  # fmt: skip
    assert "errorType: RuntimeError" in text


def test_the_flask_commands_print_what_the_console_script_prints(tmp_path: Path) -> None:
    """The same inbox, read by ``flask service-webhooks`` and by ``service-webhooks inbox``
    (piped: the table's plain lines): the same output, byte for byte."""
    path = tmp_path / "inbox.sqlite3"
    app = App(SQLiteInbox(str(path)))
    assert app.deliver(envelope("note.created")) == 500
    assert app.deliver(envelope("segment.trend_alert")) == 200
    app.fixed = True
    [failed] = app.inbox.search().items[1:]
    assert app.run("replay", failed.id).exit_code == 0
    store = ["--store", f"sqlite:{path}"]
    for argv in (
        ["list"],
        ["list", "--json"],
        ["list", "--status", "5xx", "--json"],
        ["show", failed.id[:20]],
        ["show", failed.id[:20], "--json"],
    ):
        flask = app.run(*argv)
        console = CliRunner().invoke(main, ["inbox", *argv, *store])
        assert (flask.exit_code, console.exit_code) == (0, 0), (flask.output, console.output)
        assert flask.stdout == console.stdout, argv
    assert app.run("list").stdout.splitlines()[0] == HEADER
    dry = ["replay", "--status", "5xx", "--dry-run"]
    flask = app.run(*dry)
    console = CliRunner().invoke(main, ["inbox", *dry, *store, "--receiver", "unused:r"])
    assert (flask.stdout, flask.stderr) == (console.stdout, console.stderr)
    assert flask.stdout.endswith("\twould replay\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["replay"],
        ["replay", "abc", "--status", "5xx"],
        ["list", "--status", "4xx", "--status", "5xx"],
        ["list", "--since", "yesterday"],
        ["list", "--since", "99999999999d"],  # OverflowError in timedelta: no traceback
        ["list", "--since", "9999999d"],  # before year 1
        ["replay", "--status", "5xx", "--since", "99999999999d", "--dry-run"],
        ["show", "not-hex"],
    ],
)
def test_bad_arguments_are_usage_errors(app: App, argv: list[str]) -> None:
    result = app.run(*argv)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


FILTERS = "--status, --event or --organization"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay"], f"Error: nothing to replay: give delivery IDs, or select them with {FILTERS}"),
        (["replay", "abc", "--status", "5xx"], f"Error: give delivery IDs or {FILTERS}, not both"),
        (["replay", "--since", "1h"], f"Error: --since selects with {FILTERS}"),
        (["replay", "zzz"], "Error: delivery ID 'zzz' is not a hex ID prefix"),
        (["show", "not-hex"], "Error: delivery ID 'not-hex' is not a hex ID prefix"),
        (["list", "--status", "4xx", "--status", "5xx"], "Error: --status takes one status class"),
    ],
)
def test_replay_and_show_say_what_is_wrong(app: App, argv: list[str], message: str) -> None:
    result = app.run(*argv)
    assert result.exit_code == 2
    assert message in result.output
    assert "id_prefix" not in result.output


def test_a_delivery_pruned_during_a_replay_is_reported_not_a_traceback(app: App) -> None:
    """A prune job may delete a selected delivery before its turn comes: it is named on
    stderr, as by ``service-webhooks inbox replay``, and the others are still replayed."""
    assert [app.deliver(envelope("note.created")) for _ in range(2)] == [500, 500]
    second, first = app.inbox.search().items  # newest first; replayed oldest first
    app.fixed = True
    app.app.extensions["service_webhooks"].on("note.created")(
        lambda event: app.inbox.purge(InboxQuery(id_prefix=second.id))
    )
    result = app.run("replay", "--status", "handler_failed")
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stdout == f"{first.id}\tnote.created\thandler_failed -> 200 processed\n"
    assert result.stderr.startswith(
        f"{second.id}\tnot in the receiver's inbox\n2 replayed, 1 not successful\n"
    )


def test_replay_usage_shows_the_ids_are_optional_and_repeatable(app: App) -> None:
    result = app.run("replay", "--help")
    assert result.exit_code == 0
    usage = " ".join(result.output.split("\n\n")[0].split())  # wrapped: the prog name is long
    assert usage.endswith(" service-webhooks replay [OPTIONS] [ID]...")


def test_an_app_without_an_inbox() -> None:
    app = App(SERVICE_WEBHOOKS_INBOX=False)
    result = app.run("list")
    assert result.exit_code == 2
    assert "keeps no inbox" in result.output


@pytest.mark.parametrize("argv", [["list"], ["show", "01a2"], ["replay", "--status", "5xx"]])
def test_a_missing_sqlite_file_is_an_error_not_an_empty_inbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """The default ``sqlite:service_webhooks.sqlite3`` is relative: run from another
    directory than the app's, the commands listed an empty inbox (exit 0) and left a new
    database file there."""
    monkeypatch.chdir(tmp_path)
    app = App(inbox=True, SERVICE_WEBHOOKS_STORE="sqlite:service_webhooks.sqlite3")
    result = app.run(*argv)
    assert result.exit_code == 1
    where = tmp_path / "service_webhooks.sqlite3"
    assert f"no inbox at {where}: the file does not exist" in result.output
    assert "working directory" in result.output
    assert not where.exists()
