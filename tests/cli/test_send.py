"""``service-webhooks send`` against a small real server: status -> classification (spec §7)."""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner

from service_webhooks import SIGNATURE_HEADER, Secret, verify
from service_webhooks.cli import main

pytestmark = pytest.mark.e2e

SECRET = "whsec-send-test"
ORG = "o-SEND-eu1"
DATA = '{"id": "n-1", "author": "ana@example.com", "text": "hi"}'


class Recorder:
    """An ASGI app answering ``/status/<code>``; ``/slow`` sleeps; it records each request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.requests.append({"path": scope["path"], "headers": headers, "body": body})
        if scope["path"] == "/slow":
            await asyncio.sleep(1.5)
            status = 200
        else:
            status = int(scope["path"].rsplit("/", 1)[-1])
        extra = [(b"location", b"/elsewhere")] if 300 <= status < 400 else []
        await send({"type": "http.response.start", "status": status, "headers": extra})
        await send({"type": "http.response.body", "body": b"answer"})


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()
    config = uvicorn.Config(
        recorder, host="127.0.0.1", port=0, lifespan="off", log_level="warning", ws="none"
    )
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not instance.started:
        assert time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.02)
    port = instance.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", recorder
    instance.should_exit = True
    thread.join(10)


def run_send(*args: str) -> Any:
    return CliRunner().invoke(
        main, ["send", "--allow-private-destinations", *args], catch_exceptions=False
    )


@pytest.mark.parametrize(
    ("status", "expected", "exit_code"),
    [
        (200, "HTTP 200 OK: success", 0),
        (204, "HTTP 204 No Content: success", 0),
        (302, "HTTP 302 Found: temporary failure (the service would retry)", 1),
        (404, "HTTP 404 Not Found: permanent failure (the service would not retry)", 1),
        (429, "HTTP 429 Too Many Requests: temporary failure (the service would retry)", 1),
        (500, "HTTP 500 Internal Server Error: temporary failure (the service would retry)", 1),
        (503, "HTTP 503 Service Unavailable: temporary failure (the service would retry)", 1),
        (301, "HTTP 301 Moved Permanently: permanent failure (the service would not retry)", 1),
    ],
)
def test_status_is_classified(
    server: tuple[str, Recorder], status: int, expected: str, exit_code: int
) -> None:
    url, recorder = server
    before = len(recorder.requests)
    result = run_send(
        f"{url}/status/{status}", "--secret", SECRET, "--org", ORG, "--event", "note.created",
        "--data", DATA,
    )  # fmt: skip
    assert expected in result.output.splitlines()
    assert result.exit_code == exit_code
    assert len(recorder.requests) == before + 1  # redirects are not followed

    request = recorder.requests[-1]
    assert request["headers"]["content-type"] == "application/json; charset=utf-8"
    body = request["body"]
    assert json.loads(body) == {
        "eventName": "note.created",
        "version": 1,
        "data": json.loads(DATA),
    }
    header = verify(body, request["headers"][SIGNATURE_HEADER.lower()], [Secret(SECRET)])
    assert header.organization_id == ORG
    assert abs(header.timestamp - time.time()) < 60


@pytest.mark.parametrize("status", [301, 307, 308])
def test_a_redirect_gets_a_hint(server: tuple[str, Recorder], status: int) -> None:
    """A 3xx is a set-up that redirects (a Mount at the webhook path, an HTTPS redirect):
    every retry gets it too, whatever its class."""
    url, _ = server
    result = run_send(
        f"{url}/status/{status}", "--secret", SECRET, "--org", ORG, "--event", "note.created",
        "--data", DATA,
    )  # fmt: skip
    assert result.exit_code == 1
    assert "hint: the service never follows redirects" in result.stderr
    assert "it points to /elsewhere" in result.stderr  # the answer's Location, not followed


@pytest.mark.parametrize("status", [200, 404, 503])
def test_other_statuses_get_no_redirect_hint(server: tuple[str, Recorder], status: int) -> None:
    url, _ = server
    result = run_send(
        f"{url}/status/{status}", "--secret", SECRET, "--org", ORG, "--event", "note.created",
        "--data", DATA,
    )  # fmt: skip
    assert "redirect" not in result.output


def test_version_and_timestamp(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    result = run_send(
        f"{url}/status/200", "--secret", SECRET, "--org", ORG, "--event", "x.y",
        "--version", "3", "--data", "[1, 2]", "--timestamp", "1700000000",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    request = recorder.requests[-1]
    assert json.loads(request["body"]) == {"eventName": "x.y", "version": 3, "data": [1, 2]}
    header = verify(
        request["body"], request["headers"]["service-signature"], [Secret(SECRET)],
        now=1700000000,
    )  # fmt: skip
    assert header.timestamp == 1700000000


def test_body_file_is_sent_byte_for_byte(server: tuple[str, Recorder], tmp_path: Path) -> None:
    url, recorder = server
    raw = b'{ "eventName" : "note.created",\r\n "version": 1, "data": {"text": "\xc3\xa9"} }\n'
    path = tmp_path / "body.json"
    path.write_bytes(raw)
    result = run_send(
        f"{url}/status/200", "--secret", SECRET, "--org", ORG, "--body-file", str(path)
    )
    assert result.exit_code == 0, result.output
    request = recorder.requests[-1]
    assert request["body"] == raw
    verify(raw, request["headers"]["service-signature"], [Secret(SECRET)])
    with pytest.raises(Exception, match="signature"):
        verify(raw, request["headers"]["service-signature"], [Secret("another")])


def test_invalid_data_is_a_usage_error(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    before = len(recorder.requests)
    result = CliRunner().invoke(
        main,
        [
            "send",
            "--allow-private-destinations",
            url,
            "--secret",
            SECRET,
            "--org",
            ORG,
            "--event",
            "e",
            "--data",
            "{oops",
        ],
    )
    assert result.exit_code == 2
    assert "Invalid value for --data: not valid JSON" in result.output
    assert len(recorder.requests) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--event", "e"], "give --event NAME and --data JSON, or --body-file FILE"),
        (["--data", "{}"], "give --event NAME and --data JSON, or --body-file FILE"),
        (["--event", "e", "--data", "{}", "--body-file", "-"], "not both"),
    ],
)
def test_body_options_are_exclusive(args: list[str], message: str) -> None:
    result = CliRunner().invoke(
        main,
        [
            "send",
            "--allow-private-destinations",
            "http://127.0.0.1:9/",
            "--secret",
            SECRET,
            "--org",
            ORG,
            *args,
        ],
    )
    assert result.exit_code == 2
    assert message in result.output


def test_bad_url_is_a_usage_error() -> None:
    result = CliRunner().invoke(
        main, ["send", "ftp://example.invalid/", "--secret", SECRET, "--org", ORG, "--event", "e",
               "--data", "{}"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "Error: endpoint URL scheme must be http or https, got 'ftp'" in result.output


def test_connection_refused_is_a_temporary_failure(free_port: int) -> None:
    result = run_send(
        f"http://127.0.0.1:{free_port}/", "--secret", SECRET, "--org", ORG, "--event", "e",
        "--data", "{}",
    )  # fmt: skip
    assert result.exit_code == 1
    last = result.output.splitlines()[-1]
    assert last.startswith("no response (connection refused)")
    assert last.endswith(": temporary failure (the service would retry)")


def test_deadline_is_a_temporary_failure(
    server: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = server
    monkeypatch.setattr(importlib.import_module("service_webhooks.cli.send"), "DEADLINE", 0.3)
    started = time.monotonic()
    result = run_send(
        f"{url}/slow", "--secret", SECRET, "--org", ORG, "--event", "e", "--data", "{}"
    )
    assert time.monotonic() - started < 1.2
    assert result.exit_code == 1
    last = result.output.splitlines()[-1]
    assert last.startswith(("no response (timeout", "no response within"))
    assert last.endswith(": temporary failure (the service would retry)")


def test_secret_from_environment(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    result = CliRunner(env={"SERVICE_WEBHOOKS_SECRET": "from-env"}).invoke(
        main,
        [
            "send",
            "--allow-private-destinations",
            f"{url}/status/200",
            "--org",
            ORG,
            "--event",
            "e",
            "--data",
            "{}",
        ],
    )
    assert result.exit_code == 0, result.output
    request = recorder.requests[-1]
    verify(request["body"], request["headers"]["service-signature"], [Secret("from-env")])


SCRIPT = str(Path(sys.executable).with_name("service-webhooks"))


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_send_refuses_loopback_without_the_flag(server: tuple[str, Recorder], host: str) -> None:
    url, recorder = server
    before = len(recorder.requests)
    target = url.replace("127.0.0.1", host) + "/status/200"
    result = subprocess.run(
        [SCRIPT, "send", target, "--secret", SECRET, "--org", ORG, "--event", "e", "--data", "{}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "not sent" in result.stdout
    assert "loopback" in result.stdout
    assert "permanent failure" in result.stdout
    assert "--allow-private-destinations" in result.stderr
    assert len(recorder.requests) == before


@pytest.mark.parametrize(
    ("url", "secret", "message"),
    [
        (
            "http://127.0.0.1:99999/webhooks",
            SECRET,
            "Error: invalid endpoint URL: Port out of range 0-65535",
        ),
        (
            "http://127.0.0.1:9/webhooks",
            "",
            "Error: Invalid value for '--secret' (env var: 'SERVICE_WEBHOOKS_SECRET'): "
            "a secret must be a non-empty str or bytes",
        ),
    ],
)
def test_the_console_script_refuses_a_bad_url_or_secret_without_a_traceback(
    url: str, secret: str, message: str
) -> None:
    args = ["--org", ORG, "--event", "note.created", "--data", "{}", "--allow-private-destinations"]
    result = subprocess.run(
        [SCRIPT, "send", url, "--secret", secret, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == message
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_secret_argument_that_is_not_utf8_is_a_usage_error_that_does_not_quote_it() -> None:
    """A byte that is not UTF-8 (a Latin-1 terminal's ``é``) reaches Python as a lone
    surrogate; the secret's UTF-8 encoding raised ``UnicodeEncodeError`` with a traceback
    quoting that character and its position."""
    args = ["--org", ORG, "--event", "note.created", "--data", "{}", "--allow-private-destinations"]
    result = subprocess.run(
        [SCRIPT, "send", "http://127.0.0.1:9/webhooks", "--secret", b"caf\xe9-secret", *args],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "a str secret must be valid Unicode" in result.stderr
    assert "Traceback" not in result.stderr
    assert "caf" not in result.stderr
    assert "dce9" not in result.stderr
