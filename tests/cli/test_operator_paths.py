"""The console script as an operator uses it: ``api ... --json`` prints what the service
sent, the servers stop cleanly on Ctrl-C and SIGTERM, their logs carry no colour codes
into a file, and data from a delivery or a receiver is printed as it is (never read as
rich markup, never a terminal escape)."""

from __future__ import annotations

import functools
import importlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from service_webhooks.cli import main
from service_webhooks.delivery import Sender, StaticResolver
from service_webhooks.testing.fake_api import FakeAPI

deliver_module = importlib.import_module("service_webhooks.cli.deliver")
send_module = importlib.import_module("service_webhooks.cli.send")
serve_module = importlib.import_module("service_webhooks.cli._serve")

COMMAND = str(Path(sys.executable).with_name("service-webhooks"))
URL = "http://receiver.test/hooks"
PUBLIC_IP = "93.184.216.34"


def api(*args: str, transport: httpx.BaseTransport) -> Any:
    env = {"SERVICE_API_KEY": "test-key", "SERVICE_API_BASE_URL": "http://fake"}
    return CliRunner(env=env).invoke(
        main, ["api", *args], obj={"api_transport": transport}, catch_exceptions=False
    )


# -- api ... --json: the resources as sent -----------------------------------------------


@pytest.mark.parametrize("paging", [[], ["--all", "--limit", "7"]], ids=["page", "all"])
def test_operations_json_keeps_fields_the_models_do_not_know(paging: list[str]) -> None:
    fake = FakeAPI()
    result = api("operations", "--json", *paging, transport=fake.sync_transport())
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line]
    by_id = {json.loads(line)["id"]: json.loads(line) for line in lines}
    assert by_id["op-future-type"]["priority"] == "high"  # an unknown field (spec §9)
    assert len(lines) == (62 if paging else 100 if len(fake.operations) > 100 else 62)
    for line in lines:  # each object exactly as the fake sent it, keys in its order
        sent = next(op for op in fake.operations if op["id"] == json.loads(line)["id"])
        assert line == json.dumps(sent, separators=(",", ":"))


def test_history_json_keeps_unknown_fields_and_timestamps_as_sent() -> None:
    fake = FakeAPI()
    result = api("privacy-history", "--json", "--all", transport=fake.sync_transport())
    assert result.exit_code == 0, result.output
    versions = [json.loads(line) for line in result.stdout.splitlines()]
    assert versions == fake.versions
    assert any("consentBanner" in version for version in versions)


def test_json_is_one_line_per_resource_even_when_the_service_indents() -> None:
    body = {
        "operations": [
            {"id": "a", "type": "DELETE_USER", "state": "PENDING",
             "createdAt": "2024-05-01T12:00:00Z", "finishedAt": "0001-01-01T00:00:00Z",
             "details": None, "results": None,
             "errorDetails": "", "estimatePctComplete": 1.50, "new": {"x": [1, 2]}},
        ],
        "nextPaginationToken": "",
    }  # fmt: skip
    text = json.dumps(body, indent=4).replace("1.5", "1.50")
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text=text))
    result = api("operations", "--json", transport=transport)
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert '"estimatePctComplete":1.50' in line  # the number's text, not a re-encoding
    assert json.loads(line)["new"] == {"x": [1, 2]}


# -- listen and serve-fake stop cleanly --------------------------------------------------


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    stderr = tmp_path / f"stderr-{time.monotonic_ns()}"
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            [COMMAND, *args, "--port", "0"], stdout=subprocess.DEVNULL, stderr=err
        )
    deadline = time.monotonic() + 20
    while not re.search(r"(listening|serving|dashboard) on http://", stderr.read_text()):
        assert process.poll() is None, stderr.read_text()
        assert time.monotonic() < deadline, "did not start"
        time.sleep(0.05)
    time.sleep(0.5)  # uvicorn installs its signal handlers as it starts serving
    return process, stderr


@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize(
    "command",
    [
        ["listen", "--secret", "s"],
        ["api", "serve-fake"],
        ["inbox", "serve", "--store", "sqlite:{tmp}/inbox.sqlite3", "--basic-auth", "a:b"],
    ],
    ids=["listen", "fake", "inbox"],
)
def test_a_server_stopped_on_purpose_exits_0_quietly(
    tmp_path: Path, command: list[str], stop: signal.Signals
) -> None:
    process, stderr = _start(tmp_path, *(part.format(tmp=tmp_path) for part in command))
    process.send_signal(stop)
    assert process.wait(15) == 0
    log = stderr.read_text()
    assert "Aborted" not in log
    assert "Traceback" not in log


def test_server_logs_are_coloured_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # uvicorn looks at stdout
    formatters = serve_module.log_config()["formatters"].values()
    assert [f["use_colors"] for f in formatters] == [False] * len(formatters)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    formatters = serve_module.log_config()["formatters"].values()
    assert all(f["use_colors"] for f in formatters)
    monkeypatch.setenv("NO_COLOR", "1")
    formatters = serve_module.log_config()["formatters"].values()
    assert not any(f["use_colors"] for f in formatters)


# -- trigger, deliver and send print data as it is ---------------------------------------


class PublicResolver:
    async def resolve(self, host: str, port: int) -> Sequence[str]:
        return [PUBLIC_IP]


@pytest.fixture
def answer_with(monkeypatch: pytest.MonkeyPatch) -> Callable[[httpx.Response], None]:
    """Every Sender that trigger/deliver/send build answers with this response."""

    def install(response: httpx.Response) -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            return response

        factory = functools.partial(
            Sender, transport=httpx.MockTransport(handler), resolver=PublicResolver()
        )
        monkeypatch.setattr(deliver_module, "Sender", factory)

        def sender(allow_private_destinations: bool, verify: object = True) -> Sender:
            return Sender(
                transport=httpx.MockTransport(handler),
                resolver=StaticResolver(default=[PUBLIC_IP]),
                snippet_size=send_module._READ_LIMIT,
            )

        monkeypatch.setattr(send_module, "_sender", sender)

    return install


def run(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("name", ["x[/bold]y", "a[/]b", "p[red]q", "n\x1b[31m\nl"])
def test_trigger_prints_an_event_name_as_it_is(answer_with: Any, name: str) -> None:
    answer_with(httpx.Response(200, json={"status": 200, "reason": "unhandled"}))
    result = run("trigger", name, "--url", URL, "--secret", "s", "--fast", "--data", "{}")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith(name.replace("\x1b", "\\x1b").replace("\n", "\\n") + " v1 ")


def test_trigger_prints_the_receivers_reason_as_it_is(answer_with: Any) -> None:
    answer_with(httpx.Response(200, json={"reason": "[/x] [bold]odd\x1b[2J"}))
    result = run("trigger", "note.created", "--url", URL, "--secret", "s", "--fast")
    assert result.exit_code == 0, result.output
    assert "HTTP 200: delivered [/x] [bold]odd\\x1b[2J" in result.stdout


def test_deliver_names_an_undelivered_event_as_it_is(answer_with: Any, tmp_path: Path) -> None:
    answer_with(httpx.Response(200))
    events = tmp_path / "events.jsonl"
    events.write_text(json.dumps({"eventName": "a[/]b\n", "version": 2, "data": {}}) + "\n")
    result = run("deliver", "--url", URL, "--secret", "s", "--events", str(events), "--fast")
    assert result.exit_code == 1
    assert "line 1: a[/]b\\n v2 id " in result.stderr


def test_the_private_destination_hint_goes_to_stderr() -> None:
    result = run("trigger", "note.created", "--url", "http://127.0.0.1:9/x", "--secret", "s")
    assert result.exit_code == 1
    assert "--allow-private-destinations" in result.stderr
    assert "--allow-private-destinations" not in result.stdout


def test_send_prints_the_receivers_answer_without_its_terminal_escapes(answer_with: Any) -> None:
    answer_with(httpx.Response(200, content=b"\x1b]0;owned\x07ok\nforged line"))
    result = run(
        "send", URL, "--secret", "s", "--org", "o-1", "--event", "e\x1b[2J", "--data", "{}"
    )
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout
    assert "response: \\x1b]0;owned\\x07ok\\nforged line" in result.stdout
    assert result.stdout.startswith(f"POST {URL}  e\\x1b[2J v1  org o-1")


def test_listen_help_and_docs_give_the_exit_status_of_a_stop() -> None:
    result = run("listen", "--help")
    assert "exits with status 0" in " ".join(result.output.split())
    docs = Path(__file__).parents[2] / "docs" / "cli.md"
    assert "Ctrl-C or SIGTERM" in docs.read_text()
