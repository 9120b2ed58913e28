"""``service-webhooks trigger`` and ``deliver`` run as the real console script, piped,
against real servers on 127.0.0.1 (the field-report cases)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from service_webhooks import MemoryStore, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp

pytestmark = pytest.mark.e2e

COMMAND = str(Path(sys.executable).with_name("service-webhooks"))
SECRET = "whsec-console-test"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COMMAND, *args], capture_output=True, text=True, timeout=120, check=False
    )


def write_events(path: Path, *items: Any) -> Path:
    path.write_text("\n".join(json.dumps(item) for item in items) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def slow_receiver(serve: Callable[..., Any]) -> Iterator[tuple[str, list[str], list[str]]]:
    """A real WebhookReceiver whose note.created handler takes 2 s; ``seen`` lists
    the note ids it finished processing, ``started`` those it began."""
    seen: list[str] = []
    started: list[str] = []
    receiver = WebhookReceiver(secrets=SECRET, store=MemoryStore())

    @receiver.on("note.created")
    async def handle(event: Any) -> None:
        started.append(event.data.id)
        await asyncio.sleep(2.0)
        seen.append(event.data.id)

    with serve(WebhookApp(receiver)) as url:
        yield url, seen, started


def test_deliver_two_subcategories_of_one_organization(status_server: Any, tmp_path: Path) -> None:
    url, app = status_server
    alert = {"eventName": "segment.trend.alert", "data": {"duration": "DAILY"}}
    events = write_events(
        tmp_path / "events.jsonl",
        {**alert, "organizationId": "o-1", "subcategory": "c2VnLTE", "id": "alert-1"},
        {**alert, "organizationId": "o-1", "subcategory": "c2VnLTI", "id": "alert-2"},
        {"eventName": "note.created", "organizationId": "o-1", "data": {"id": "n-1"}},
    )
    before = len(app.requests)
    result = run(
        "deliver", "--url", f"{url}/status/200", "--secret", "s", "--events", str(events),
        "--allow-private-destinations", "--fast",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^events\t3$", result.stdout, re.M)
    assert re.search(r"^deliveries \(incl\. duplicates\)\t3$", result.stdout, re.M)
    assert re.search(r"^deliveries succeeded\t3$", result.stdout, re.M)
    assert len(app.requests) - before == 3


def test_deliver_names_every_event_it_did_not_deliver(status_server: Any, tmp_path: Path) -> None:
    url, _ = status_server
    events = write_events(
        tmp_path / "events.jsonl",
        {"eventName": "note.created", "data": {"id": "n-1"}, "id": "first"},
        {"eventName": "note.created", "data": {"id": "n-2"}, "id": "second"},
    )
    result = run(
        "deliver", "--url", f"{url}/status/410", "--secret", "s", "--events", str(events),
        "--allow-private-destinations", "--fast",
    )  # fmt: skip
    assert result.returncode == 1
    assert "2 of 2 event(s) not delivered" in result.stderr
    assert re.search(
        r"line 1: note\.created v1 id first: permanent_failure: HTTP 410", result.stderr
    )
    assert re.search(r"line 2: note\.created v1 id second: permanent_failure", result.stderr)


def test_deliver_sends_a_version_only_to_endpoints_configured_for_it(
    status_server: Any, tmp_path: Path
) -> None:
    url, app = status_server
    events = write_events(
        tmp_path / "events.jsonl",
        {"eventName": "note.created", "version": 1, "data": {"id": "n-1"}, "id": "v1"},
        {"eventName": "note.created", "version": 2, "data": {"id": "n-2"}, "id": "v2"},
    )
    args = ["--url", f"{url}/status/200", "--secret", "s", "--events", str(events)]
    before = len(app.requests)
    result = run("deliver", *args, "--allow-private-destinations", "--fast")
    assert result.returncode == 1
    assert re.search(
        r"line 2: note\.created v2 id v2: not sent: .*payload version 1", result.stderr
    )
    sent = [json.loads(r["body"])["version"] for r in app.requests[before:]]
    assert sent == [1]

    before = len(app.requests)
    result = run(
        "deliver", *args, "--allow-private-destinations", "--fast", "--payload-version", "2"
    )
    assert result.returncode == 1
    assert re.search(r"line 1: note\.created v1 id v1: not sent", result.stderr)
    assert [json.loads(r["body"])["version"] for r in app.requests[before:]] == [2]


def test_trigger_payload_version(status_server: Any) -> None:
    url, app = status_server
    before = len(app.requests)
    result = run(
        "trigger", "note.created", "--url", f"{url}/status/200", "--secret", "s",
        "--allow-private-destinations", "--payload-version", "2",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (request,) = app.requests[before:]
    assert json.loads(request["body"])["version"] == 2


def test_segment_trend_alert_without_a_subcategory_is_a_usage_error(
    status_server: Any, tmp_path: Path
) -> None:
    url, app = status_server
    before = len(app.requests)
    result = run(
        "trigger", "segment.trend.alert", "--url", f"{url}/status/200", "--secret", "s",
        "--allow-private-destinations",
    )  # fmt: skip
    assert result.returncode == 2
    assert "segment.trend.alert needs --subcategory" in result.stderr
    events = write_events(
        tmp_path / "events.jsonl",
        {"eventName": "segment.trend.alert", "data": {"duration": "DAILY"}},
    )
    result = run(
        "deliver", "--url", f"{url}/status/200", "--secret", "s", "--events", str(events),
        "--allow-private-destinations", "--fast",
    )  # fmt: skip
    assert result.returncode == 2
    assert "line 1: segment.trend.alert needs a subcategory" in result.stderr
    assert len(app.requests) == before


def test_trigger_fast_waits_for_a_slow_handler(
    slow_receiver: tuple[str, list[str], list[str]],
) -> None:
    """The first attempt times out (1 s) while the handler still works (2 s); under
    --fast the retry must not start before the receiver is done with it."""
    url, seen, _ = slow_receiver
    result = run(
        "trigger", "note.created", "--url", url, "--secret", SECRET, "--fast",
        "--allow-private-destinations", "--timeout", "1",
        "--data", '{"id": "n-slow", "author": "a@example.com", "text": "t"}',
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "delivered after 2 attempt(s)" in result.stdout
    assert "HTTP 503" not in result.stdout
    assert re.search(r"#2 .*HTTP 200: delivered duplicate", result.stdout)
    assert seen.count("n-slow") == 1


def test_trigger_shows_the_receivers_outcome(
    slow_receiver: tuple[str, list[str], list[str]],
) -> None:
    url, _, _ = slow_receiver
    common = ["--url", url, "--secret", SECRET, "--allow-private-destinations", "--fast"]
    data = ["--data", '{"id": "n-shown", "author": "a@example.com", "text": "t"}']
    first = run("trigger", "note.created", *common, *data)
    again = run("trigger", "note.created", *common, *data)
    other = run("trigger", "note.deleted", *common, "--data", '{"id": "x"}')
    assert re.search(r"#1 .*HTTP 200: delivered processed", first.stdout), first.stdout
    assert re.search(r"#1 .*HTTP 200: delivered duplicate", again.stdout), again.stdout
    assert re.search(r"#1 .*HTTP 200: delivered unhandled", other.stdout), other.stdout


def test_piped_output_is_never_wrapped(status_server: Any, tmp_path: Path) -> None:
    url, _ = status_server
    long_url = f"{url}/status/200?{'q' * 120}"
    result = run(
        "trigger", "note.created", "--url", long_url, "--secret", "s",
        "--allow-private-destinations",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (header,) = [line for line in result.stdout.splitlines() if "->" in line]
    assert header.endswith("bytes)")
    assert long_url in header
    events = write_events(tmp_path / "e.jsonl", {"eventName": "note.created", "data": {}})
    result = run(
        "deliver", "--url", long_url, "--secret", "s", "--events", str(events),
        "--allow-private-destinations", "--fast",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "┃" not in result.stdout
    assert "failure notifications\t0" in result.stdout.splitlines()


STOPS = pytest.mark.parametrize(
    ("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)


@STOPS
def test_ctrl_c_stops_deliver_with_its_report_and_exit_code_130(
    status_server: Any, tmp_path: Path, stop: signal.Signals, code: int
) -> None:
    """An interrupted run still prints the summary, writes the audit log and names the
    events not delivered (here: both wait a minute for their retry after a 503).
    SIGTERM had killed the process silently: no summary, no audit log."""
    url, app = status_server
    marker = f"n-int-{len(app.requests)}"
    events = write_events(
        tmp_path / "events.jsonl",
        {"eventName": "note.created", "data": {"id": f"{marker}-1"}},
        {"eventName": "note.created", "data": {"id": f"{marker}-2"}},
    )
    audit = tmp_path / "audit.json"
    arguments = [
        *("deliver", "--url", f"{url}/status/503", "--secret", SECRET),
        *("--allow-private-destinations", "--events", str(events), "--audit-log", str(audit)),
    ]
    process = subprocess.Popen(
        [COMMAND, *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def attempts() -> int:
        return sum(marker in request["body"].decode() for request in app.requests)

    deadline = time.monotonic() + 30
    while attempts() < 2 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert attempts() == 2, "both first attempts were made"
    time.sleep(1.0)  # their 503s reach the emulator (an attempt in flight is abandoned)
    process.send_signal(stop)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == code, stderr
    assert re.search(r"attempts\s+2", stdout), stdout
    assert "interrupted" in stderr
    assert "2 of 2 event(s) not delivered" in stderr
    assert "Aborted" not in stderr + stdout
    rows = json.loads(audit.read_text(encoding="utf-8"))
    assert [row["status"] for row in rows] == [503, 503]


@STOPS
def test_ctrl_c_stops_trigger_with_exit_code_130(
    status_server: Any, stop: signal.Signals, code: int
) -> None:
    url, app = status_server
    marker = f"n-int-trigger-{len(app.requests)}"
    arguments = [
        *("trigger", "note.created", "--url", f"{url}/status/503", "--secret", SECRET),
        *("--allow-private-destinations", "--data", json.dumps({"id": marker})),
    ]
    process = subprocess.Popen(
        [COMMAND, *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 30
    while process.poll() is None and time.monotonic() < deadline:
        if any(marker in request["body"].decode() for request in app.requests):
            break
        time.sleep(0.05)
    time.sleep(1.0)  # its 503 reaches trigger, which then waits a minute for the retry
    process.send_signal(stop)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == code, stderr
    assert "503" in stdout
    assert "interrupted: not delivered" in stderr
    assert "Aborted" not in stderr + stdout


def test_deliver_stopped_with_a_request_in_flight_counts_and_names_it(
    slow_receiver: tuple[str, list[str], list[str]], tmp_path: Path
) -> None:
    """The summary had said ``attempts 0`` and "queued: no attempt" for a request the
    receiver had got (its handler still ran to the end)."""
    url, seen, started = slow_receiver
    marker = f"n-in-flight-{len(seen)}-{time.monotonic_ns()}"
    events = write_events(
        tmp_path / "events.jsonl",
        {
            "eventName": "note.created",
            "data": {"id": marker, "author": "a@example.com", "text": "t"},
        },
    )
    audit = tmp_path / "audit.json"
    process = subprocess.Popen(
        [
            *(COMMAND, "deliver", "--url", url, "--secret", SECRET, "--events", str(events)),
            *("--allow-private-destinations", "--audit-log", str(audit)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30  # the request is out (a loaded machine: not 1 s)
    while marker not in started and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)  # the handler, 2 s long, is running
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert re.search(r"attempts\s+1", stdout), stdout
    assert "interrupted before an answer" in stderr
    assert "no attempt" not in stderr
    (row,) = json.loads(audit.read_text(encoding="utf-8"))
    assert (row["status"], row["attempt"]) == (None, 1)
    deadline = time.monotonic() + 10
    while marker not in seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker in seen  # the receiver had it: "may have received it" was true
