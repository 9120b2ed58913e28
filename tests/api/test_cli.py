"""``service-webhooks api ...`` through click's CliRunner, against the fake API."""

from __future__ import annotations

import importlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
from click.testing import CliRunner, Result
from rich.console import Console

from service_webhooks.cli import main
from service_webhooks.testing.fake_api import FakeAPI, Fault

ENV = {"SERVICE_API_KEY": "test-key", "SERVICE_API_BASE_URL": "http://fake.invalid"}


@pytest.fixture
def fake() -> FakeAPI:
    return FakeAPI()


def run(fake: FakeAPI, *args: str, env: dict[str, str] | None = None) -> Result:
    obj: dict[str, Any] = {"api_transport": fake.sync_transport()}
    return CliRunner().invoke(main, ["api", *args], env=ENV if env is None else env, obj=obj)


def on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """Make the ``api`` commands print to a colourless terminal 200 columns wide, whose
    screen is returned (CliRunner's own output is never a terminal)."""
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=200, color_system=None)
    cli_api = importlib.import_module("service_webhooks.cli.api")  # the module, not the group
    monkeypatch.setattr(cli_api, "console", lambda: terminal)
    return screen


def lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_operations_json_lines_keep_the_filters(fake: FakeAPI) -> None:
    result = run(fake, "operations", "--state", "PENDING", "--type", "DELETE_USER", "--json")
    assert result.exit_code == 0, result.output
    rows = lines(result)
    assert rows
    assert {(r["state"], r["type"]) for r in rows} == {("PENDING", "DELETE_USER")}
    assert rows[0]["finishedAt"] == "0001-01-01T00:00:00Z"
    assert dict(fake.requests[0].params) == {"state": "PENDING", "type": "DELETE_USER"}


def test_operations_all_follows_every_page(fake: FakeAPI) -> None:
    result = run(fake, "operations", "--all", "--limit", "5", "--json")
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in lines(result)] == [op["id"] for op in fake.operations]
    assert len(fake.requests) == 13


def test_operations_table_shows_never(fake: FakeAPI) -> None:
    result = run(fake, "operations", "--state", "PENDING", "--limit", "3")
    assert result.exit_code == 0, result.output
    assert "op-0000" in result.stdout
    assert "never" in result.stdout
    assert "--pagination-token" in result.stderr


def test_privacy_history_one_page_by_default(fake: FakeAPI) -> None:
    result = run(fake, "privacy-history", "--limit", "4", "--json")
    assert result.exit_code == 0, result.output
    rows = lines(result)
    assert len(rows) == 4
    assert rows[0]["metadata"]["lastUpdatedBy"] == fake.versions[0]["metadata"]["lastUpdatedBy"]
    assert "--pagination-token" in result.stderr


def test_privacy_history_all_as_a_table(fake: FakeAPI) -> None:
    result = run(fake, "privacy-history", "--all", "--limit", "10")
    assert result.exit_code == 0, result.output
    assert len(fake.requests) == 5
    assert "PRIVACY" in result.stdout
    assert result.stdout.count("admin") == 42


def test_privacy_history_limit_is_checked_before_any_request(fake: FakeAPI) -> None:
    result = run(fake, "privacy-history", "--limit", "101")
    assert result.exit_code == 2
    assert fake.requests == []


def test_a_state_added_later_is_passed_on(fake: FakeAPI) -> None:
    """Spec §9: enums are open; the CLI does not refuse a state it does not know."""
    result = run(fake, "operations", "--state", "PAUSED", "--json")
    assert result.exit_code == 0, result.output
    assert [row["id"] for row in lines(result)] == ["op-future-state"]
    assert dict(fake.requests[0].params) == {"state": "PAUSED"}


def test_state_and_type_help_and_completion_list_the_known_values() -> None:
    command = main.commands["api"].commands["operations"]  # type: ignore[attr-defined]
    ctx = click.Context(command)
    state = next(p for p in command.params if p.name == "state")
    assert [item.value for item in state.shell_complete(ctx, "")] == [
        "PENDING",
        "COMPLETED",
        "FAILED",
    ]
    type_ = next(p for p in command.params if p.name == "type_")
    assert [item.value for item in type_.shell_complete(ctx, "delete_s")] == [
        "DELETE_SESSION",
        "DELETE_SEGMENT_SESSIONS",
        "DELETE_SEGMENT_USERS",
    ]
    help_text = " ".join(CliRunner().invoke(main, ["api", "operations", "--help"]).output.split())
    assert "PENDING, COMPLETED, FAILED" in help_text


def test_cancel(fake: FakeAPI) -> None:
    result = run(fake, "cancel", "op-0000")
    assert result.exit_code == 0, result.output
    assert "cancelled op-0000" in result.stdout
    assert fake.requests[0].raw_path == "/operations/v1/op-0000/cancel"


def test_cancel_refused_exits_1_with_the_reason(fake: FakeAPI) -> None:
    result = run(fake, "cancel", "op-0001")
    assert result.exit_code == 1
    assert "409" in result.stderr
    assert "not cancelable" in result.stderr


def test_api_key_option_overrides_the_environment(fake: FakeAPI) -> None:
    result = run(fake, "operations", "--api-key", "wrong", "--json")
    assert result.exit_code == 1
    assert "401" in result.stderr
    assert "wrong" not in result.output
    assert fake.requests[0].headers["authorization"] == "Basic wrong"


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("SERVICE_API_KEY", "Error: Missing option '--api-key' (env var: 'SERVICE_API_KEY')."),
        (
            "SERVICE_API_BASE_URL",
            "Error: Missing option '--base-url' (env var: 'SERVICE_API_BASE_URL').",
        ),
    ],
)
def test_a_missing_connection_option_is_a_usage_error_naming_its_variable(
    fake: FakeAPI, missing: str, message: str
) -> None:
    env: dict[str, str | None] = {**ENV, missing: None}
    result = CliRunner().invoke(
        main, ["api", "operations"], env=env, obj={"api_transport": fake.sync_transport()}
    )
    assert result.exit_code == 2
    assert message in result.stderr
    assert fake.requests == []


def test_server_errors_are_reported(fake: FakeAPI) -> None:
    fake.inject(Fault(status=500))
    result = run(fake, "privacy-history")
    assert result.exit_code == 1
    assert "500" in result.stderr


@pytest.mark.e2e
def test_cli_over_real_http(fake: FakeAPI) -> None:
    with fake.serve() as base_url:
        result = CliRunner().invoke(
            main,
            ["api", "operations", "--all", "--limit", "20", "--json", "--base-url", base_url],
            env={"SERVICE_API_KEY": "test-key"},
        )
    assert result.exit_code == 0, result.output
    assert len(lines(result)) == 62


@pytest.mark.e2e
def test_serve_fake_and_piped_tables_are_plain_lines(tmp_path: Path) -> None:
    """`api serve-fake` runs the fake over HTTP; piped, a table is one line per row."""
    command = str(Path(sys.executable).with_name("service-webhooks"))
    stderr = tmp_path / "stderr"
    with stderr.open("wb") as err:
        server = subprocess.Popen(
            [command, "api", "serve-fake", "--port", "0", "--api-key", "k-1"], stderr=err
        )
    try:
        deadline = time.monotonic() + 15
        while not (match := re.search(r"serving on (http://\S+)", stderr.read_text())):
            assert server.poll() is None, stderr.read_text()
            assert time.monotonic() < deadline, "serve-fake did not start"
            time.sleep(0.05)
        env = {**os.environ, "SERVICE_API_KEY": "k-1", "SERVICE_API_BASE_URL": match.group(1)}
        result = subprocess.run(
            [command, "api", "operations", "--state", "FAILED"],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(10)
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split("\t") == [
        "id", "type", "state", "created (UTC)", "finished (UTC)", "%", "error",
    ]  # fmt: skip
    assert len(rows) == 20
    assert all(row.split("\t")[2] == "FAILED" for row in rows)
    assert all(row.endswith("\tquota exceeded") for row in rows)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["operations", "--state", ""], "state must be a non-empty str"),
        (["operations", "--type", ""], "type must be a non-empty str"),
        (["cancel", ""], "operation id must be a non-empty str"),
        (["operations", "--base-url", "ftp://api.example.com"], "--base-url: must be"),
        (["operations", "--base-url", "http://h/?x=1"], "--base-url: must not have a query"),
        (["operations", "--api-key", "clé"], "--api-key: must contain only ASCII"),
    ],
)
def test_values_refused_before_any_request_are_usage_errors(
    fake: FakeAPI, args: list[str], message: str
) -> None:
    """Exit status 2, like a --limit over 100 (was 1, and a traceback for a non-ASCII key)."""
    result = run(fake, *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert fake.requests == []


def test_a_retry_after_the_client_did_not_wait_for_is_shown(fake: FakeAPI) -> None:
    fake.inject(Fault(status=429, retry_after="3600"))
    result = run(fake, "operations")
    assert result.exit_code == 1
    assert "429" in result.stderr
    assert "retry after 3600 s" in result.stderr


def test_markup_and_line_breaks_in_api_texts_are_printed_as_they_are(
    fake: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal rich read ``[/bold]`` in a field as markup (MarkupError traceback);
    piped, a line break in a field split its row in two."""
    fake.operations[0]["errorDetails"] = "bad [/bold] thing [red]x"
    fake.operations[1]["errorDetails"] = "line one\nline two"
    piped = run(fake, "operations", "--limit", "2")
    assert piped.exit_code == 0, piped.output
    rows = [line.split("\t") for line in piped.stdout.splitlines()[1:]]
    assert [row[0] for row in rows] == ["op-0000", "op-0001"]
    assert [row[-1] for row in rows] == ["bad [/bold] thing [red]x", "line one line two"]
    screen = on_a_terminal(monkeypatch)
    shown = run(fake, "operations", "--limit", "2")
    assert shown.exit_code == 0, shown.output
    assert "bad [/bold] thing [red]x" in screen.getvalue()


def test_times_are_shown_in_utc_as_the_columns_say(fake: FakeAPI) -> None:
    fake.operations[0]["createdAt"] = "2024-05-01T14:00:00+02:00"
    result = run(fake, "operations", "--limit", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].split("\t")[3] == "2024-05-01 12:00"


def test_all_writes_nothing_on_stderr_when_it_is_not_a_terminal(fake: FakeAPI) -> None:
    """The progress line is for a terminal; piped, it left an empty line on stderr."""
    result = run(fake, "operations", "--all", "--limit", "20", "--json")
    assert result.exit_code == 0, result.output
    assert len(lines(result)) == 62
    assert result.stderr == ""
    fake.inject(Fault(status=404))
    failed = run(fake, "privacy-history", "--all")
    assert failed.exit_code == 1
    assert failed.stderr.splitlines() == [
        "Error: 404 Not Found: injected (GET /settings/recording/v1/privacy/history)"
    ]


def test_an_api_error_text_cannot_forge_a_line_on_stderr(fake: FakeAPI) -> None:
    fake.inject(Fault(status=409, body=b'{"message": "no\\nError: forged\\u001b]0;t\\u0007"}'))
    result = run(fake, "cancel", "op-0000")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "Error: 409 Conflict: no\\nError: forged\\x1b]0;t\\x07 (POST /operations/v1/op-0000/cancel)"
    ]


def _failing_third_request(fake: FakeAPI) -> httpx.MockTransport:
    """The fake's transport, but the third request is answered 404."""
    inner = fake.sync_transport()
    count = 0

    def handle(request: httpx.Request) -> httpx.Response:
        nonlocal count
        count += 1
        if count == 3:
            return httpx.Response(404, json={"message": "gone"})
        return inner.handle_request(request)

    return httpx.MockTransport(handle)


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_all_shows_the_rows_fetched_before_a_page_failed(fake: FakeAPI, as_json: bool) -> None:
    """The table of ``--all`` was printed after the last page only: a failing page lost
    the rows of every page before it (JSON lines were printed as they came)."""
    obj: dict[str, Any] = {"api_transport": _failing_third_request(fake)}
    args = ["api", "operations", "--all", "--limit", "5", *(["--json"] if as_json else [])]
    result = CliRunner().invoke(main, args, env=ENV, obj=obj)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["Error: 404 Not Found: gone (GET /operations/v1)"]
    expected = [op["id"] for op in fake.operations[:10]]
    if as_json:
        assert [row["id"] for row in lines(result)] == expected
    else:
        header, *rows = result.stdout.splitlines()
        assert header.split("\t")[0] == "id"
        assert [row.split("\t")[0] for row in rows] == expected


def test_all_shows_every_page_up_to_a_repeated_token_then_fails(fake: FakeAPI) -> None:
    fake.repeat_tokens = True
    result = run(fake, "privacy-history", "--all", "--limit", "5")
    assert result.exit_code == 1
    assert len(result.stdout.splitlines()) == 1 + 10  # the header, then both pages
    assert "repeated pagination token" in result.stderr


def _one_page(page: dict[str, Any]) -> dict[str, Any]:
    """``obj`` for CliRunner: every request is answered 200 with ``page``."""
    return {"api_transport": httpx.MockTransport(lambda request: httpx.Response(200, json=page))}


def test_the_next_page_hint_is_quoted_and_escaped() -> None:
    """The service's token was printed as sent: a ``;`` or ``&`` in it ran a command
    when the hint was pasted into a shell, an ESC drove the terminal."""
    page = {"operations": [], "nextPaginationToken": "a&b; rm -rf x\x1b]0;t\x07"}
    result = CliRunner().invoke(main, ["api", "operations"], env=ENV, obj=_one_page(page))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "more results: --pagination-token 'a&b; rm -rf x\\x1b]0;t\\x07' (or --all)"
    ]
    base64ish = {"versions": [], "next_pagination_token": "ab+/c=="}
    result = CliRunner().invoke(main, ["api", "privacy-history"], env=ENV, obj=_one_page(base64ish))
    assert result.stderr.splitlines() == ["more results: --pagination-token ab+/c== (or --all)"]


def test_terminal_escapes_in_api_texts_are_escaped_in_tables(
    fake: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ESC in an id or an error text reached the terminal (and a piped file)."""
    fake.operations[0]["id"] = "op-\x1b[31mred"
    fake.operations[0]["errorDetails"] = "no\x1b]0;title\x07"
    fake.versions[0]["metadata"]["lastUpdatedBy"] = "a@b\x1b[2J"
    piped = run(fake, "operations", "--limit", "1")
    assert piped.exit_code == 0, piped.output
    row = piped.stdout.splitlines()[1].split("\t")
    assert (row[0], row[-1]) == ("op-\\x1b[31mred", "no\\x1b]0;title\\x07")
    history = run(fake, "privacy-history", "--limit", "1")
    assert history.stdout.splitlines()[1].split("\t")[1] == "a@b\\x1b[2J"
    screen = on_a_terminal(monkeypatch)
    shown = run(fake, "operations", "--limit", "1")
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in screen.getvalue()
    assert "op-\\x1b[31mred" in screen.getvalue()


def test_a_page_nested_too_deeply_is_an_error_not_a_traceback() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    body = '{"operations": [{"id": "x", "type": "T", "state": "S", "details": ' + deep + "}]}"
    obj = {"api_transport": httpx.MockTransport(lambda r: httpx.Response(200, text=body))}
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(main, ["api", "operations", *extra], env=ENV, obj=obj)
        assert result.exit_code == 1
        assert result.stderr.splitlines() == [
            "Error: unexpected response body: nested too deeply (GET /operations/v1)"
        ]
