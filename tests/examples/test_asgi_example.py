"""``examples/asgi_app.py`` works as its docstring says: in-process and under real uvicorn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from sw_modules import load_file

from service_webhooks.testing import Signer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "asgi_app.py"
UVICORN = str(Path(sys.executable).with_name("uvicorn"))
SECRET = "whsec-example-test"
NOTE = {"id": "n-1", "author": "ana@example.com", "text": "hello"}


def load(name: str) -> ModuleType:
    """A fresh copy of the example module (its receiver and ``received`` list are new)."""
    return load_file(name, EXAMPLE)


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("SERVICE_WEBHOOKS_SECRET", SECRET)
    return load("asgi_app_example")


def test_in_process_with_starlette_testclient(
    example: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with warnings.catch_warnings():  # starlette asks for httpx2 when only httpx is installed
        warnings.simplefilter("ignore", DeprecationWarning)
        from starlette.testclient import TestClient

    signer = Signer(SECRET, organization_id="o-EX-1")
    with TestClient(example.app) as client:
        body, headers = signer.delivery("note.created", NOTE)
        response = client.post("/webhooks", content=body, headers=headers, follow_redirects=False)
        assert response.status_code == 200
        assert response.json() == {"status": 200, "reason": "processed"}

        body, headers = signer.delivery("segment.trend.alert", {"duration": "DAILY"})
        assert client.post("/webhooks", content=body, headers=headers).status_code == 200
        body, headers = signer.delivery("segment.trend.alert", {"duration": "HOURLY"})
        assert client.post("/webhooks", content=body, headers=headers).status_code == 200

        wrong = Signer("not-the-secret", organization_id="o-EX-1")
        body, headers = wrong.delivery("note.created", {**NOTE, "id": "n-2"})
        assert client.post("/webhooks", content=body, headers=headers).status_code == 401
        assert client.get("/webhooks").status_code == 405

        home = client.get("/")
        assert home.status_code == 200
        assert home.json() == {"service": "example", "webhooks": "/webhooks", "received": 3}

    [note, daily, hourly] = example.received
    assert (note.data.id, note.data.author) == ("n-1", NOTE["author"])
    assert note.organization_id == "o-EX-1"
    assert daily.data.duration == example.Duration.DAILY
    assert hourly.data.duration == "HOURLY"
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "[o-EX-1] note n-1 by ana@example.com: hello",
        "[o-EX-1] daily trend alert",
        "[o-EX-1] trend alert (HOURLY)",
    ]


def test_default_secret_is_for_development_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVICE_WEBHOOKS_SECRET", raising=False)
    assert load("asgi_app_default").SECRETS == ["whsec-development-only-0123456789abcdef0123"]


def test_a_rotation_in_the_variable_is_two_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    # "new old", as the service-webhooks command reads it: both verify, in that order
    monkeypatch.setenv("SERVICE_WEBHOOKS_SECRET", f"{SECRET}-new {SECRET}")
    module = load("asgi_app_rotation")
    for secret, note_id in ((f"{SECRET}-new", "n-new"), (SECRET, "n-old")):
        body, headers = Signer(secret, organization_id="o-EX-1").delivery(
            "note.created", {**NOTE, "id": note_id}
        )
        outcome = module.receiver.process(body, headers["Service-Signature"])
        assert outcome.reason == "processed", secret


@pytest.mark.e2e
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(  # the docstring's command: the console script, as a user runs it
            [UVICORN, "--app-dir", "examples", "asgi_app:app", "--port", "{port}"], id="uvicorn"
        ),
        pytest.param([sys.executable, "examples/asgi_app.py"], id="python-script"),
    ],
)
def test_under_real_uvicorn(command: list[str], free_port: int, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SERVICE_WEBHOOKS_SECRET": SECRET,
        "PORT": str(free_port),
        "PYTHONUNBUFFERED": "1",
    }
    out = tmp_path / "out"
    with out.open("wb") as sink:
        process = subprocess.Popen(
            [part.format(port=free_port) for part in command],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{free_port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                home = httpx.get(base + "/", timeout=2)
                break
            except httpx.TransportError:
                assert process.poll() is None, out.read_text()
                assert time.monotonic() < deadline, out.read_text()
                time.sleep(0.05)
        assert home.json()["received"] == 0

        body, headers = Signer(SECRET, organization_id="o-EX-2").delivery("note.created", NOTE)
        response = httpx.post(base + "/webhooks", content=body, headers=headers, timeout=10)
        assert response.status_code == 200
        assert json.loads(response.content)["reason"] == "processed"
        again = httpx.post(base + "/webhooks", content=body, headers=headers, timeout=10)
        assert again.json()["reason"] == "duplicate"
        slash = httpx.post(base + "/webhooks/", content=body, headers=headers, timeout=10)
        assert (slash.status_code, slash.json()["reason"]) == (200, "duplicate")  # no 307
        assert httpx.get(base + "/", timeout=10).json()["received"] == 1
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(10)
    assert "[o-EX-2] note n-1 by ana@example.com: hello" in out.read_text()
