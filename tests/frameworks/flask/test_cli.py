"""``flask service-webhooks list|show|replay`` through ``app.test_cli_runner()``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from flask import Flask

from service_webhooks import Event, sign
from service_webhooks.adapters.flask import CONFIG_KEYS, ServiceWebhooks
from service_webhooks.inbox import MemoryInbox

SECRET = "whsec-flask-cli-0123456789abcdef0123456789abcdef"


def envelope(name: str, **data: object) -> bytes:
    data = {"id": uuid.uuid4().hex, "author": "a@example.com", "text": "hi", **data}
    return json.dumps({"eventName": name, "version": 1, "data": data}).encode()


class App:
    """An app whose ``note.created`` handler raises until ``fixed``, with a memory inbox."""

    def __init__(self, **config: Any) -> None:
        self.runs: list[str] = []
        self.fixed = False
        self.inbox = MemoryInbox()
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
    assert only_5xx.output.strip().split("\t")[0] == first.id
    assert app.run("list", "--organization", "o-other").output == ""
    as_json = json.loads(app.run("list", "--status", "handler_failed", "--json").output)
    assert (as_json["id"], as_json["reason"]) == (first.id, "handler_failed")

    shown = app.run("show", first.id[:20])
    assert shown.exit_code == 0, shown.output
    assert "RuntimeError: a bug in the handler" in shown.output
    assert '"text": "<b>bold</b>"' in shown.output  # pretty-printed payload
    assert app.run("show", "ffffffff").exit_code == 1

    dry = app.run("replay", "--status", "handler_failed", "--dry-run")
    assert (dry.exit_code, len(app.runs)) == (0, 1)
    assert first.id in dry.output
    assert app.run("replay", first.id).exit_code == 1  # still broken: not successful
    app.fixed = True
    replayed = app.run("replay", first.id)
    assert replayed.exit_code == 0, replayed.output
    assert f"{first.id}\tnote.created\thandler_failed -> 200 processed" in replayed.output
    assert len(app.runs) == 3
    record = app.inbox.get(first.id)
    assert record is not None
    assert [r.reason for r in record.replays] == ["handler_failed", "processed"]


@pytest.mark.parametrize(
    "argv",
    [
        ["replay"],
        ["replay", "abc", "--status", "5xx"],
        ["list", "--status", "4xx", "--status", "5xx"],
        ["list", "--since", "yesterday"],
        ["show", "not-hex"],
    ],
)
def test_bad_arguments_are_usage_errors(app: App, argv: list[str]) -> None:
    assert app.run(*argv).exit_code == 2


FILTERS = "--status, --event or --organization"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay"], f"Error: nothing to replay: give delivery IDs, or select them with {FILTERS}"),
        (["replay", "abc", "--status", "5xx"], f"Error: give delivery IDs or {FILTERS}, not both"),
        (["replay", "--since", "1h"], f"Error: --since selects with {FILTERS}"),
        (["replay", "zzz"], "Error: delivery ID 'zzz' is not a hex ID prefix"),
        (["show", "not-hex"], "Error: delivery ID 'not-hex' is not a hex ID prefix"),
    ],
)
def test_replay_and_show_say_what_is_wrong(app: App, argv: list[str], message: str) -> None:
    result = app.run(*argv)
    assert result.exit_code == 2
    assert message in result.output
    assert "id_prefix" not in result.output


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
