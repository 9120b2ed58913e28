"""``service-webhooks trigger`` / ``deliver`` with the sender's transport scripted in-process
(no sockets): verdicts, exit codes, the summary, the audit log and the JSONL options."""

from __future__ import annotations

import functools
import importlib
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
from click.testing import CliRunner

from service_webhooks import SIGNATURE_HEADER, Secret, SignatureMismatchError, verify
from service_webhooks.cli import main
from service_webhooks.delivery import ScaledClock, Sender

deliver_module = importlib.import_module("service_webhooks.cli.deliver")  # not the command

URL = "http://receiver.test/hooks"


class PublicResolver:
    async def resolve(self, host: str, port: int) -> Sequence[str]:
        return ["93.184.215.14"]  # public: passes the reserved-address check


@pytest.fixture
def answer_with(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], list[httpx.Request]]:
    """``answer_with(status or handler)``: every Sender the commands build gets a mock
    transport; returns the list of requests it received."""

    def install(answer: Any) -> list[httpx.Request]:
        requests: list[httpx.Request] = []

        def handler(request: httpx.Request) -> httpx.Response:
            requests.append(request)
            return answer(request) if callable(answer) else httpx.Response(answer)

        factory = functools.partial(
            Sender, transport=httpx.MockTransport(handler), resolver=PublicResolver()
        )
        monkeypatch.setattr(deliver_module, "Sender", factory)
        return requests

    return install


def run(*args: str) -> Any:
    return CliRunner(env={"COLUMNS": "200"}).invoke(main, list(args), catch_exceptions=False)


def test_trigger_delivered(answer_with: Any) -> None:
    requests = answer_with(200)
    result = run("trigger", "note.created", "--url", URL, "--secret", "s", "--org", "o-TRIG")
    assert result.exit_code == 0, result.output
    assert re.search(r"#1 +\+00:00:00 success", result.output)
    assert "delivered after 1 attempt(s)" in result.output
    assert "allow-private-destinations" not in result.output
    [request] = requests
    assert request.headers["service-signature"].startswith("o:o-TRIG,t:")
    assert json.loads(request.content)["eventName"] == "note.created"


def test_trigger_permanent_failure_is_not_retried(answer_with: Any) -> None:
    requests = answer_with(410)
    result = run(
        "trigger", "segment.trend.alert", "--url", URL, "--secret", "s", "--fast",
        "--subcategory", "c2VnLTE", "--data", '{"duration": "WEEKLY"}',
    )  # fmt: skip
    assert result.exit_code == 1
    assert "permanent failure: not retried after 1 attempt(s)" in result.output
    [request] = requests
    assert json.loads(request.content)["data"] == {"duration": "WEEKLY"}


def test_trigger_invalid_data_is_a_usage_error(answer_with: Any) -> None:
    requests = answer_with(200)
    result = CliRunner().invoke(
        main, ["trigger", "note.created", "--url", URL, "--secret", "s", "--data", "{nope"]
    )
    assert result.exit_code == 2
    assert requests == []


def test_trigger_in_real_time_says_when_the_next_attempt_starts(
    answer_with: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between attempts a real-time trigger waits 1 to 10 minutes: stderr says until when."""
    statuses = iter([503, 500, 200])
    answer_with(lambda request: httpx.Response(next(statuses)))
    monkeypatch.setattr(deliver_module, "SystemClock", lambda: ScaledClock(speed=60_000))
    result = CliRunner().invoke(
        main, ["trigger", "note.created", "--url", URL, "--secret", "s"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    waits = result.stderr.splitlines()
    assert len(waits) == 2, result.stderr
    assert all(
        re.fullmatch(r" +next attempt at \+00:0\d:\d\d, in \d+ s \(Ctrl-C stops\)", line)
        for line in waits
    ), waits
    assert "next attempt" not in result.stdout
    assert "delivered after 3 attempt(s)" in result.stdout


def test_trigger_fast_prints_no_wait(answer_with: Any) -> None:
    statuses = iter([503, 200])
    answer_with(lambda request: httpx.Response(next(statuses)))
    result = CliRunner().invoke(
        main, ["trigger", "note.created", "--url", URL, "--secret", "s", "--fast"]
    )
    assert result.exit_code == 0, result.output
    assert "next attempt" not in result.output


def write_events(path: Path, *items: Any) -> Path:
    path.write_text("\n".join(json.dumps(item) for item in items) + "\n", encoding="utf-8")
    return path


def test_deliver_uses_ids_orgs_and_subcategories_from_the_file(
    answer_with: Any, tmp_path: Path
) -> None:
    requests = answer_with(200)
    events = write_events(
        tmp_path / "events.jsonl",
        {"eventName": "note.created", "data": {"id": "n-1"}, "id": 42, "organizationId": "o-A"},
        {"eventName": "note.created", "data": {"id": "n-2"}, "organizationId": "o-B"},
        {"eventName": "segment.trend.alert", "data": {"duration": "DAILY"},
         "organizationId": "o-B", "subcategory": "sub-1"},
    )  # fmt: skip
    audit = tmp_path / "audit.json"
    result = run(
        "deliver", "--url", URL, "--secret", "s", "--events", str(events), "--fast",
        "--audit-log", str(audit), "--seed", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"audit log: {audit} (3 attempts)" in result.output
    assert re.search(r"^events\t3$", result.output, re.M)
    assert re.search(r"^deliveries succeeded\t3$", result.output, re.M)
    organizations = sorted(r.headers["service-signature"].split(",")[0] for r in requests)
    assert organizations == ["o:o-A", "o:o-B", "o:o-B"]
    bodies = [json.loads(r.content) for r in requests]
    assert {(b["eventName"], b["version"]) for b in bodies} == {
        ("note.created", 1),
        ("segment.trend.alert", 1),
    }
    rows = json.loads(audit.read_text(encoding="utf-8"))
    assert len(rows) == 3
    assert "42" in {row["event_id"] for row in rows}
    assert {row["result"] for row in rows} == {"success"}


def test_deliver_with_failures_exits_1_without_an_audit_log(
    answer_with: Any, tmp_path: Path
) -> None:
    answer_with(lambda request: httpx.Response(400 if b"n-bad" in request.content else 200))
    events = write_events(
        tmp_path / "events.jsonl",
        {"eventName": "note.created", "data": {"id": "n-ok"}},
        {"eventName": "note.created", "data": {"id": "n-bad"}},
    )
    result = run("deliver", "--url", URL, "--secret", "s", "--events", str(events), "--fast")
    assert result.exit_code == 1
    assert re.search(r"^deliveries succeeded\t1$", result.output, re.M)
    assert re.search(r"^deliveries failed permanently\t1$", result.output, re.M)
    assert "audit log" not in result.output


def test_deliver_summary_counts_events_apart_from_deliveries(
    answer_with: Any, tmp_path: Path
) -> None:
    """One event of 4 is not sent (a version the endpoint is not configured for) and the
    3 sent are each sent twice: the table counts 3 of 4 events delivered, as stderr says,
    and 6 deliveries succeeded."""
    requests = answer_with(200)
    note = {"eventName": "note.created", "version": 1}
    events = write_events(
        tmp_path / "events.jsonl",
        *({**note, "data": {"id": f"n-{n}"}} for n in range(3)),
        {**note, "version": 2, "data": {"id": "n-v2"}, "id": "v2"},
    )
    result = CliRunner().invoke(
        main,
        ["deliver", "--url", URL, "--secret", "s", "--events", str(events), "--fast",
         "--duplicates", "1", "--seed", "1"],
    )  # fmt: skip
    assert result.exit_code == 1
    rows = dict(line.split("\t") for line in result.stdout.splitlines()[1:] if "\t" in line)
    assert {name: rows[name] for name in list(rows)[:9]} == {
        "events": "4",
        "events delivered": "3",
        "deliveries (incl. duplicates)": "6",
        "duplicates injected": "3",
        "deliveries succeeded": "6",
        "deliveries retried": "0",
        "deliveries failed permanently": "0",
        "deliveries dead": "0",
        "attempts": "6",
    }
    assert len(requests) == 6
    assert "1 of 4 event(s) not delivered" in result.stderr
    assert re.search(r"^line 4: note\.created v2 id v2: not sent", result.stderr, re.M)


def test_deliver_refused_destination_prints_the_hint(tmp_path: Path) -> None:
    events = write_events(tmp_path / "e.jsonl", {"eventName": "note.created", "data": {}})
    result = run(
        "deliver", "--url", "http://127.0.0.1:9/", "--secret", "s", "--events", str(events),
        "--fast",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "pass --allow-private-destinations" in result.output


@pytest.mark.parametrize(
    ("url", "line"),
    [
        ("ftp://receiver.test/", "http or https"),
        ("http://receiver.test/", "line 1"),
    ],
)
def test_deliver_configuration_errors_are_usage_errors(
    answer_with: Any, tmp_path: Path, url: str, line: str
) -> None:
    requests = answer_with(200)
    events = tmp_path / "e.jsonl"
    if line == "line 1":
        events.write_text('{"eventName": "note.created", "version": "one"}\n', encoding="utf-8")
    else:
        write_events(events, {"eventName": "note.created", "data": {}})
    result = CliRunner().invoke(
        main, ["deliver", "--url", url, "--secret", "s", "--events", str(events)]
    )
    assert result.exit_code == 2, result.output
    assert line in result.output
    assert requests == []


def test_trigger_and_deliver_sign_with_the_first_secret_of_the_environment(
    answer_with: Any, tmp_path: Path
) -> None:
    requests = answer_with(200)
    events = write_events(tmp_path / "e.jsonl", {"eventName": "note.created", "data": {}})
    env = {"SERVICE_WEBHOOKS_SECRET": "NEW-secret OLD-secret"}  # rotation: newest first
    for args in (
        ["trigger", "note.created", "--url", URL],
        ["deliver", "--url", URL, "--events", str(events), "--fast"],
    ):
        result = CliRunner(env=env).invoke(main, args)
        assert result.exit_code == 0, result.output
    assert len(requests) == 2
    for request in requests:
        signature = request.headers[SIGNATURE_HEADER]
        verify(request.content, signature, [Secret("NEW-secret")])
        with pytest.raises(SignatureMismatchError):
            verify(request.content, signature, [Secret("NEW-secret OLD-secret")])


@pytest.mark.parametrize("command", ["trigger", "deliver"])
@pytest.mark.parametrize(
    ("args", "env"),
    [(["--secret", ""], {}), ([], {"SERVICE_WEBHOOKS_SECRET": "   "})],
)
def test_an_empty_secret_is_a_usage_error(
    answer_with: Any, tmp_path: Path, command: str, args: list[str], env: Any
) -> None:
    requests = answer_with(200)
    events = write_events(tmp_path / "e.jsonl", {"eventName": "note.created", "data": {}})
    target = ["note.created"] if command == "trigger" else ["--events", str(events)]
    result = CliRunner(env=env).invoke(main, [command, *target, "--url", URL, *args])
    assert result.exit_code == 2
    assert (
        "Error: Invalid value for '--secret' (env var: 'SERVICE_WEBHOOKS_SECRET'): "
        "a secret must be a non-empty str or bytes"
    ) in result.output
    assert requests == []


@pytest.mark.parametrize("command", ["send", "trigger", "deliver"])
def test_the_secret_help_says_which_secret_signs(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert (
        "The endpoint's signing secret. The environment variable may hold several, separated "
        "by spaces, newest first (as for listen): the first one signs."
    ) in " ".join(result.output.split())  # unwrapped


def test_every_deliver_option_has_help() -> None:
    help_text = " ".join(CliRunner().invoke(main, ["deliver", "--help"]).output.split())
    assert "--concurrency INTEGER RANGE Most attempts in flight at once" in help_text
    options = [param for param in deliver_module.deliver.params if isinstance(param, click.Option)]
    assert [option.name for option in options if not option.help] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"eventName": "note.created"}\n\xff\xfe{}\n', "line 2: not UTF-8"),
        (b'{"eventName": "note.created", "organizationId": 123}\n', "line 1: organization_id"),
        (b'{"eventName": "note.created", "organizationId": "\xc3\xb6rg"}\n', "organization_id"),
        (b'{"eventName": "segment.trend.alert", "subcategory": 5}\n', "subcategory must be"),
        (b'{"eventName": ["note.created"]}\n', "eventName must be a non-empty string"),
        (b'{"eventName": "note.created", "data": NaN}\n', "NaN is not valid JSON"),
    ],
)
def test_deliver_a_bad_line_is_a_usage_error_not_a_traceback(
    answer_with: Any, tmp_path: Path, content: bytes, message: str
) -> None:
    # Each of these used to escape as a traceback (UnicodeDecodeError, TypeError,
    # AttributeError, a SignatureFormatError at the first attempt), or, for NaN, to be
    # sent as null.
    requests = answer_with(200)
    events = tmp_path / "e.jsonl"
    events.write_bytes(content)
    result = CliRunner().invoke(
        main, ["deliver", "--url", URL, "--secret", "s", "--events", str(events), "--fast"]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert requests == []


def test_deliver_reads_a_bom_and_a_null_id(answer_with: Any, tmp_path: Path) -> None:
    requests = answer_with(200)
    events = tmp_path / "e.jsonl"
    events.write_bytes(b'\xef\xbb\xbf{"eventName": "note.created", "data": {}, "id": null}\n')
    result = run("deliver", "--url", URL, "--secret", "s", "--events", str(events), "--fast")
    assert result.exit_code == 0, result.output
    assert len(requests) == 1


def test_deliver_checks_the_url_even_without_events(answer_with: Any, tmp_path: Path) -> None:
    events = tmp_path / "e.jsonl"
    events.write_text("", encoding="utf-8")
    result = CliRunner().invoke(
        main, ["deliver", "--url", "ftp://receiver.test/", "--secret", "s", "--events", str(events)]
    )
    assert result.exit_code == 2, result.output
    assert "http or https" in result.output


def test_deliver_audit_log_in_a_missing_folder_is_refused_before_delivering(
    answer_with: Any, tmp_path: Path
) -> None:
    requests = answer_with(200)
    events = write_events(tmp_path / "e.jsonl", {"eventName": "note.created", "data": {}})
    result = CliRunner().invoke(
        main,
        ["deliver", "--url", URL, "--secret", "s", "--events", str(events), "--fast",
         "--audit-log", str(tmp_path / "missing" / "audit.json")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--audit-log" in result.output
    assert requests == []


def test_deliver_audit_log_that_cannot_be_written_is_an_error(
    answer_with: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer_with(200)
    events = write_events(tmp_path / "e.jsonl", {"eventName": "note.created", "data": {}})

    def refuse(*args: Any, **kwargs: Any) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "write_text", refuse)
    result = CliRunner().invoke(
        main,
        ["deliver", "--url", URL, "--secret", "s", "--events", str(events), "--fast",
         "--audit-log", str(tmp_path / "audit.json")],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "cannot write the audit log: [Errno 13] Permission denied" in result.output


@pytest.mark.parametrize("data", ["NaN", '{"x": Infinity}', "-Infinity"])
def test_trigger_data_that_is_not_json_is_a_usage_error(answer_with: Any, data: str) -> None:
    requests = answer_with(200)
    result = CliRunner().invoke(
        main, ["trigger", "note.created", "--url", URL, "--secret", "s", "--data", data]
    )
    assert result.exit_code == 2, result.output
    assert "is not valid JSON" in result.output
    assert requests == []


def test_trigger_an_unsignable_organization_is_a_usage_error(answer_with: Any) -> None:
    requests = answer_with(200)
    result = CliRunner().invoke(
        main, ["trigger", "note.created", "--url", URL, "--secret", "s", "--org", "örg"]
    )
    assert result.exit_code == 2, result.output
    assert "organization_id must be non-empty printable ASCII" in result.output
    assert requests == []


@pytest.mark.parametrize(
    ("event", "option", "named"),
    [
        ("note.created", ["--data", "{nope"], "Invalid value for --data: not valid JSON"),
        ("note.created", ["--data", "NaN"], "Invalid value for --data: not valid JSON"),
        ("note.created", ["--org", "a,b"], "Invalid value for --org: organization_id"),
        ("", [], "Invalid value for EVENT: an event needs a non-empty eventName"),
    ],
)
def test_trigger_usage_errors_name_the_option(
    answer_with: Any, event: str, option: list[str], named: str
) -> None:
    """As ``send`` does: the message says which value to fix."""
    requests = answer_with(200)
    result = CliRunner().invoke(main, ["trigger", event, "--url", URL, "--secret", "s", *option])
    assert result.exit_code == 2, result.output
    assert named in result.output
    assert requests == []


def test_deliver_names_a_duplicate_the_receiver_did_not_accept(
    answer_with: Any, tmp_path: Path
) -> None:
    # The event is delivered, its injected duplicate answered 409 (a permanent failure):
    # the exit code is 1, and stderr now says why instead of nothing.
    seen: set[bytes] = set()

    def answer(request: httpx.Request) -> httpx.Response:
        status = 409 if request.content in seen else 200
        seen.add(request.content)
        return httpx.Response(status)

    answer_with(answer)
    events = write_events(
        tmp_path / "e.jsonl", {"eventName": "note.created", "data": {"id": "n-1"}, "id": "e1"}
    )
    result = CliRunner().invoke(
        main,
        ["deliver", "--url", URL, "--secret", "s", "--events", str(events), "--fast",
         "--duplicates", "1", "--seed", "1"],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "event(s) not delivered" not in result.stderr
    assert "1 delivery(ies) of delivered events not delivered" in result.stderr
    assert re.search(
        r"^line 1: note\.created v1 id e1: duplicate permanent_failure: HTTP 409",
        result.stderr,
        re.M,
    )
