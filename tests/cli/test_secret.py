"""``service-webhooks secret new``: random secrets in the spec's range, through the
installed console script too."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from service_webhooks import MemoryStore, WebhookReceiver, sign
from service_webhooks.cli import main


def decoded_size(secret: str) -> int:
    return len(base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4)))


def test_one_256_bit_secret_alone_on_stdout() -> None:
    result = CliRunner().invoke(main, ["secret", "new"])
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert decoded_size(line) == 32
    assert result.stderr == ""  # not a terminal: nothing but the secret


@pytest.mark.parametrize("bits", [256, 384, 512])
def test_count_and_bits(bits: int) -> None:
    result = CliRunner().invoke(main, ["secret", "new", "--bits", str(bits), "--count", "3"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == len(set(lines)) == 3
    assert {decoded_size(line) for line in lines} == {bits // 8}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--bits", "128"], "128 is not in the range 256<=x<=512"),
        (["--bits", "1024"], "1024 is not in the range 256<=x<=512"),
        (["--bits", "300"], "300 is not a multiple of 8"),
        (["--count", "0"], "0 is not in the range 1<=x<=100"),
    ],
)
def test_values_outside_the_range_are_usage_errors(arguments: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["secret", "new", *arguments])
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_a_printed_secret_verifies_a_delivery() -> None:
    secret = CliRunner().invoke(main, ["secret", "new"]).stdout.strip()
    receiver = WebhookReceiver(secret, store=MemoryStore(), inbox=False)
    body = b'{"eventName":"order.created","version":1,"data":{}}'
    assert receiver.process(body, sign(body, secret, "o-1")).status == 200


def test_the_console_script() -> None:
    script = shutil.which("service-webhooks", path=str(Path(sys.executable).parent))
    assert script is not None, "the service-webhooks console script is not installed"
    done = subprocess.run(
        [script, "secret", "new", "--bits", "512"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert decoded_size(done.stdout.strip()) == 64


def test_bits_not_a_multiple_of_8_is_named_as_click_names_the_range() -> None:
    result = CliRunner().invoke(main, ["secret", "new", "--bits", "300"])
    assert result.exit_code == 2
    assert "Invalid value for '--bits': 300 is not a multiple of 8." in result.stderr


def test_python_dash_m_runs_the_command() -> None:
    """``python -m service_webhooks`` where the console script is not on ``PATH``."""
    done = subprocess.run(
        [sys.executable, "-m", "service_webhooks", "secret", "new"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    secret = done.stdout.strip()
    assert len(base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4))) == 32
    usage = subprocess.run(
        [sys.executable, "-m", "service_webhooks", "nope"], capture_output=True, text=True
    )
    assert usage.returncode == 2
    assert "Usage: service-webhooks" in usage.stderr
