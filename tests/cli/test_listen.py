"""``service-webhooks listen`` as a real subprocess, fed by ``service-webhooks send`` and httpx."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from service_webhooks import SIGNATURE_HEADER, sign
from service_webhooks.cli import main
from service_webhooks.stores import redact_url

pytestmark = pytest.mark.e2e

COMMAND = str(Path(sys.executable).with_name("service-webhooks"))
NEW, OLD = "whsec-listen-new", "whsec-listen-old"
ORG = "o-LISTEN-us1"
CONTENT_TYPE = "application/json; charset=utf-8"


@dataclass
class Listener:
    process: subprocess.Popen[bytes]
    url: str
    stdout: Path
    stderr: Path

    def lines(self) -> list[str]:
        return self.stdout.read_text("utf-8").splitlines()


def start(tmp: Path, *args: str, env: dict[str, str] | None = None) -> Listener:
    stdout, stderr = tmp / "stdout", tmp / "stderr"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [COMMAND, "listen", "--port", "0", *args],
            stdout=out,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
    return Listener(process, listening_url(process, stderr), stdout, stderr)


def listening_url(process: subprocess.Popen[bytes], stderr: Path) -> str:
    """The URL ``listen`` prints on stderr once it listens."""
    deadline = time.monotonic() + 15
    while True:
        match = re.search(r"listening on (http://\S+)", stderr.read_text())
        if match:
            break
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"listen did not start:\n{stderr.read_text()}")
        time.sleep(0.05)
    return match.group(1)


def stop(listener: Listener) -> None:
    listener.process.send_signal(signal.SIGINT)
    try:
        listener.process.wait(10)
    except subprocess.TimeoutExpired:
        listener.process.kill()
        listener.process.wait()


@pytest.fixture(scope="module")
def listener(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listener]:
    running = start(tmp_path_factory.mktemp("listen"), "--secret", NEW, "--secret", OLD, "--json")
    yield running
    stop(running)


def send_cli(url: str, secret: str, data: str, event: str = "note.created") -> tuple[int, str]:
    done = subprocess.run(
        [
            COMMAND,
            "send",
            "--allow-private-destinations",
            url,
            "--secret",
            secret,
            "--org",
            ORG,
            "--event",
            event,
            "--data",
            data,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.returncode, done.stdout


def post(url: str, body: bytes, secret: str) -> httpx.Response:
    headers = {"Content-Type": CONTENT_TYPE, SIGNATURE_HEADER: sign(body, secret, ORG)}
    return httpx.post(url, content=body, headers=headers, timeout=10)


def test_stderr_tells_where_and_how(listener: Listener) -> None:
    log = listener.stderr.read_text()
    assert re.search(r"listening on http://127\.0\.0\.1:\d+/webhooks \(store: memory\)", log)
    assert f"service-webhooks send {listener.url} --secret ... --org" in log


def test_send_prints_one_json_line_then_duplicate_prints_nothing(listener: Listener) -> None:
    data = '{"id": "n-cli", "author": "ana@example.com", "text": "h\\u00e9llo", "extra": 1}'
    code, output = send_cli(listener.url, NEW, data)
    assert code == 0
    assert "HTTP 200 OK: success" in output.splitlines()
    matching = [line for line in listener.lines() if "n-cli" in line]
    assert len(matching) == 1
    assert json.loads(matching[0]) == {
        "eventName": "note.created",
        "version": 1,
        "organizationId": ORG,
        "data": {"id": "n-cli", "author": "ana@example.com", "text": "héllo"},
    }
    # every line of stdout is one JSON object (no log line leaked into it)
    for line in listener.lines():
        assert set(json.loads(line)) == {"eventName", "version", "organizationId", "data"}

    code, output = send_cli(listener.url, NEW, data)  # same bytes: a duplicate
    assert code == 0
    assert "HTTP 200 OK: success" in output.splitlines()
    assert "duplicate" in output
    assert len([line for line in listener.lines() if "n-cli" in line]) == 1


def test_wrong_secret_is_401_permanent_failure(listener: Listener) -> None:
    code, output = send_cli(listener.url, "not-the-secret", '{"id": "n-bad"}')
    assert code == 1
    assert "HTTP 401 Unauthorized: permanent failure (the service would not retry)" in (
        output.splitlines()
    )
    assert not [line for line in listener.lines() if "n-bad" in line]


def test_httpx_delivery_with_the_old_secret_and_an_unknown_event(listener: Listener) -> None:
    body = b'{"eventName": "segment.trend.alert", "version": 1, "data": {"duration": "WEEKLY"}}'
    assert post(listener.url, body, OLD).status_code == 200
    body = b'{"eventName": "thing.new", "version": 2, "data": {"k": [1, null, "x"], "id": "u-1"}}'
    assert post(listener.url, body, NEW).status_code == 200
    assert post(listener.url, b'{"eventName": "x", "id": "u-2"}', "wrong").status_code == 401

    lines = [json.loads(line) for line in listener.lines()]
    assert {
        "eventName": "segment.trend.alert",
        "version": 1,
        "organizationId": ORG,
        "data": {"duration": "WEEKLY"},
    } in lines
    assert {
        "eventName": "thing.new",
        "version": 2,
        "organizationId": ORG,
        "data": {"k": [1, None, "x"], "id": "u-1"},
    } in lines
    assert not [line for line in listener.lines() if "u-2" in line]


def test_other_paths_answer_404(listener: Listener) -> None:
    other = listener.url.removesuffix("/webhooks") + "/other"
    assert httpx.get(other, timeout=10).status_code == 404


def test_readable_output_sqlite_store_and_secret_from_environment(tmp_path: Path) -> None:
    store = tmp_path / "events.sqlite3"
    running = start(
        tmp_path, "--store", f"sqlite:{store}", env={"SERVICE_WEBHOOKS_SECRET": "env-secret"}
    )
    try:
        data = '{"id": "n-r", "author": "a@b.c", "text": "t"}'
        code, output = send_cli(running.url, "env-secret", data)
        assert code == 0, output
        [line] = running.lines()
        assert re.fullmatch(
            rf"\d\d:\d\d:\d\d  {ORG}  note\.created v1  "
            r'\{"id":"n-r","author":"a@b\.c","text":"t"\}',
            line,
        )
        assert store.exists()
    finally:
        stop(running)
    assert "Shutting down" in running.stderr.read_text()


@pytest.mark.parametrize("output", [[], ["--json"]], ids=["readable", "json"])
def test_listen_stops_when_nothing_reads_stdout_any_more(tmp_path: Path, output: list[str]) -> None:
    """``listen | head -1``: once the reader is gone, an event that cannot be printed is
    answered 500 (the service retries it) and listen stops with status 1, rather than
    answering every later delivery 500 with a traceback, or 200 without printing it."""
    stderr = tmp_path / "stderr"
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            [COMMAND, "listen", "--port", "0", "--secret", NEW, *output],
            stdout=subprocess.PIPE,
            stderr=err,
        )
    try:
        url = listening_url(process, stderr)
        body = b'{"eventName": "thing.new", "version": 1, "data": {"id": "n-%d"}}'
        assert post(url, body % 1, NEW).status_code == 200
        assert process.stdout is not None
        assert b"n-1" in process.stdout.readline()
        process.stdout.close()  # the reader exits

        answer = post(url, body % 2, NEW)
        assert (answer.status_code, answer.json()["reason"]) == (500, "handler_failed")
        assert process.wait(15) == 1
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = stderr.read_text()
    assert "stdout was closed (nothing reads the events any more): stopping" in log
    assert "SystemExit" not in log
    assert "Exception ignored" not in log


def test_missing_secret_is_a_usage_error() -> None:
    result = CliRunner(env={"SERVICE_WEBHOOKS_SECRET": None}).invoke(main, ["listen"])
    assert result.exit_code == 2
    assert "no signing secret: pass --secret S or set SERVICE_WEBHOOKS_SECRET" in result.output


@pytest.mark.parametrize("args", [["--secret", ""], ["--secret", "s", "--secret", ""]])
def test_an_empty_secret_is_a_usage_error_naming_the_secret(args: list[str]) -> None:
    result = CliRunner().invoke(main, ["listen", *args])
    assert result.exit_code == 2
    assert (
        "Error: Invalid value for '--secret' (env var: 'SERVICE_WEBHOOKS_SECRET'): "
        "a secret must be a non-empty str or bytes"
    ) in result.output
    assert "--store" not in result.output


def test_senders_sign_with_the_newest_secret_of_the_environment_list(tmp_path: Path) -> None:
    rotation = {"SERVICE_WEBHOOKS_SECRET": f"{NEW} {OLD}"}  # newest first
    running = start(tmp_path, "--json", env=rotation)
    try:
        commands = [
            ["send", running.url, "--org", ORG, "--event", "note.created", "--data",
             '{"id": "n-rot", "author": "a@b.c", "text": "t"}'],
            ["trigger", "note.created", "--url", running.url, "--org", ORG, "--data",
             '{"id": "n-rot2", "author": "a@b.c", "text": "t"}'],
        ]  # fmt: skip
        for command in commands:
            done = subprocess.run(
                [COMMAND, *command, "--allow-private-destinations"],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, **rotation},
            )
            assert done.returncode == 0, (done.stdout, done.stderr)
        assert [json.loads(line)["data"]["id"] for line in running.lines()] == ["n-rot", "n-rot2"]
    finally:
        stop(running)


def test_bad_store_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["listen", "--secret", "s", "--store", "ftp://x"])
    assert result.exit_code == 2
    assert "unknown store URL scheme 'ftp'" in result.output


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("postgresql://app:PW-never@127.0.0.1:1/x", "OperationalError: connection failed"),
        ("redis://:PW-never@127.0.0.1:1/0", "ConnectionError: "),
        ("sqlite:/no-such-directory/keys.sqlite3", "OperationalError: unable to open"),
    ],
)
def test_an_unreachable_store_stops_listen_at_once_with_the_reason(url: str, reason: str) -> None:
    """Not a 503 on every delivery, nor a PoolTimeout traceback after 5 s."""
    result = CliRunner().invoke(main, ["listen", "--secret", "s", "--store", url])
    assert result.exit_code == 1, result.output
    assert f"Error: cannot open the store at {redact_url(url)}: {reason}" in result.output
    assert "PW-never" not in result.output
    assert "Traceback" not in result.output


def test_listen_never_prints_the_store_password(tmp_path: Path) -> None:
    listener = start(
        tmp_path,
        "--secret",
        NEW,
        "--store",
        "redis://:PASSWORD-do-not-print@127.0.0.1:6379/0?prefix=t",
    )
    try:
        stderr = listener.stderr.read_text()
    finally:
        stop(listener)
    stderr += listener.stderr.read_text()
    assert "PASSWORD-do-not-print" not in stderr
    assert "store: redis://:***@127.0.0.1:6379/0?prefix=t" in stderr
