"""``send``, ``trigger`` and ``deliver`` against a real receiver on ``https://`` whose
certificate no public CA issued: refused as the service refuses it, delivered with
``--ca-file`` (run as the real console script)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sw_tls import self_signed

from service_webhooks import MemoryStore, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp

pytestmark = pytest.mark.e2e

COMMAND = str(Path(sys.executable).with_name("service-webhooks"))
SECRET = "whsec-tls-test"
DATA = '{"id": "n-1", "author": "a@b.c", "text": "hi"}'


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([COMMAND, *args], capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key."""
    return self_signed(tmp_path_factory.mktemp("tls"), "127.0.0.1", "IP:127.0.0.1")


@pytest.fixture(scope="module")
def https_receiver(
    certificate: tuple[Path, Path], serve: Callable[..., Any]
) -> Iterator[tuple[str, list[str]]]:
    """A real receiver on https://127.0.0.1:PORT/webhooks; yields it and the note ids
    its handler processed."""
    processed: list[str] = []
    receiver = WebhookReceiver(secrets=SECRET, store=MemoryStore())

    @receiver.on("note.created")
    def handle(event: Any) -> None:
        processed.append(event.data.id)

    key, cert = certificate
    with serve(WebhookApp(receiver), ssl_keyfile=str(key), ssl_certfile=str(cert)) as url:
        yield f"{url}/webhooks", processed


def send(url: str, note_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    data = json.dumps({"id": note_id, "author": "a@b.c", "text": "hi"})
    return run(
        "send", url, "--secret", SECRET, "--org", "o-1", "--allow-private-destinations",
        "--event", "note.created", "--data", data, *extra,
    )  # fmt: skip


def test_an_untrusted_certificate_is_refused_as_the_service_refuses_it(
    https_receiver: tuple[str, list[str]],
) -> None:
    url, processed = https_receiver
    result = send(url, "n-untrusted")
    assert result.returncode == 1
    assert "temporary failure" in result.stdout
    assert "n-untrusted" not in processed


def test_send_trusts_the_ca_file(
    https_receiver: tuple[str, list[str]], certificate: tuple[Path, Path]
) -> None:
    url, processed = https_receiver
    result = send(url, "n-send", "--ca-file", str(certificate[1]))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "HTTP 200" in result.stdout
    assert processed.count("n-send") == 1


def test_trigger_and_deliver_trust_the_ca_file(
    https_receiver: tuple[str, list[str]], certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    url, processed = https_receiver
    common = ("--url", url, "--secret", SECRET, "--allow-private-destinations", "--fast")
    ca = ("--ca-file", str(certificate[1]))
    result = run(
        "trigger", "note.created", "--data", DATA.replace("n-1", "n-trigger"), *common, *ca
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "delivered after 1 attempt(s)" in result.stdout

    events = tmp_path / "events.jsonl"
    lines = [
        {
            "eventName": "note.created",
            "version": 1,
            "data": {"id": f"n-d{n}", "author": "a@b.c", "text": "hi"},
        }
        for n in range(3)
    ]
    events.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    result = run("deliver", "--events", str(events), *common, *ca)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(i for i in processed if i.startswith("n-d")) == ["n-d0", "n-d1", "n-d2"]
    assert processed.count("n-trigger") == 1


@pytest.mark.parametrize("command", ["send", "trigger", "deliver"])
def test_a_ca_file_without_a_certificate_is_a_usage_error(command: str, tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate\n", encoding="utf-8")
    args = {
        "send": ("send", "https://127.0.0.1:9/webhooks", "--org", "o-1", "--event", "a.b",
                 "--data", "{}"),
        "trigger": ("trigger", "note.created", "--url", "https://127.0.0.1:9/webhooks"),
        "deliver": ("deliver", "--url", "https://127.0.0.1:9/webhooks", "--events", str(not_pem)),
    }[command]  # fmt: skip
    for ca_file, message in ((not_pem, "holds no PEM CA certificate"), (tmp_path, "directory")):
        result = run(*args, "--secret", SECRET, "--ca-file", str(ca_file))
        assert result.returncode == 2, result.stderr
        assert "--ca-file" in result.stderr
        assert message in result.stderr
