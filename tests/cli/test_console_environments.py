"""The command under unusual environments: an output encoding that cannot hold its
text, stdout on a full disk or closed, arguments that are not UTF-8. Each ends with a
message and an exit code, never a traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from service_webhooks.cli._json import strict_loads
from service_webhooks.cli._output import echo_json


def run(*arguments: str | bytes, **environment: str) -> subprocess.CompletedProcess[bytes]:
    """``python -m service_webhooks ARGUMENTS`` with ``environment`` added."""
    return subprocess.run(
        [sys.executable, "-m", "service_webhooks", *arguments],
        capture_output=True,
        env={**os.environ, **environment},
        check=False,
    )


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_help_in_an_encoding_without_its_characters(encoding: str) -> None:
    """``inbox list --help`` holds ``…``: escaped, not a ``UnicodeEncodeError``."""
    done = run("inbox", "list", "--help", PYTHONIOENCODING=encoding)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"--json" in done.stdout


def test_stdout_on_a_full_disk_is_one_line_and_exit_1() -> None:
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "service_webhooks", "secret", "new"],
            stdout=full,
            stderr=subprocess.PIPE,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        "Error: cannot write the output: No space left on device"
    ]


def test_stdout_closed_is_one_line_and_exit_1() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service_webhooks", "secret", "new"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.decode().strip() == "Error: stdout is closed: nothing can be printed"


def test_stdin_closed_reads_as_empty() -> None:
    # --body-file - with stdin closed (<&-) was click's RuntimeError traceback
    done = subprocess.run(
        [
            *(sys.executable, "-m", "service_webhooks", "send", "http://127.0.0.1:9/x"),
            *("--secret", "s", "--org", "o-1", "--body-file", "-"),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        preexec_fn=lambda: os.close(0),
        check=False,
    )
    assert b"Traceback" not in done.stderr
    assert b"body file  org o-1  (0 bytes)" in done.stdout
    assert done.returncode == 1  # a loopback address: not sent, as with an empty stdin


def test_an_argument_that_is_not_utf8_is_a_usage_error() -> None:
    done = run(
        "send",
        "http://127.0.0.1:9/webhooks",
        "--secret",
        "S",
        "--org",
        "o-1",
        "--allow-private-destinations",
        "--event",
        b"\xff",
        "--data",
        "{}",
    )
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr
    assert b"bytes that are not UTF-8" in done.stderr


def test_a_lone_surrogate_escape_is_not_json_text() -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        strict_loads('{"text": "\\ud83d"}')
    assert strict_loads('"\\ud83d\\ude00"') == "\U0001f600"


def test_json_lines_stay_json_in_an_encoding_without_their_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = io.BytesIO()
    stdout = io.TextIOWrapper(raw, encoding="latin-1", errors="backslashreplace")
    monkeypatch.setattr(sys, "stdout", stdout)
    line = json.dumps({"eventName": "évé.\U0001f600"}, ensure_ascii=False)
    echo_json(line)
    stdout.flush()
    assert json.loads(raw.getvalue().decode("latin-1")) == {"eventName": "évé.\U0001f600"}
