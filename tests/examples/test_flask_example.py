"""``examples/flask_app.py`` shows what its docstring says, in-process and under ``flask run``
(its deliveries and a rotation: ``tests/frameworks/flask/test_flask.py``)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from sw_modules import load_file

from service_webhooks.testing import Signer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "flask_app.py"
FLASK = str(Path(sys.executable).with_name("flask"))
DEVELOPMENT_SECRET = "whsec-development-only-0123456789abcdef0123"
NOTE = {"id": "n-1", "author": "ana@example.com", "text": "hello"}


def load(name: str, monkeypatch: pytest.MonkeyPatch, secret: str | None) -> ModuleType:
    """A fresh copy of the example module over a memory store, with ``secret`` (``None``:
    the variable unset) in ``SERVICE_WEBHOOKS_SECRET``."""
    monkeypatch.setenv("SERVICE_WEBHOOKS_STORE", "memory")
    if secret is None:
        monkeypatch.delenv("SERVICE_WEBHOOKS_SECRET", raising=False)
    else:
        monkeypatch.setenv("SERVICE_WEBHOOKS_SECRET", secret)
    return load_file(name, EXAMPLE)


def post(module: ModuleType, secret: str, note_id: str) -> tuple[int, str]:
    body, headers = Signer(secret, organization_id="o-1").delivery(
        "note.created", {**NOTE, "id": note_id}
    )
    response = module.app.test_client().post("/webhooks", data=body, headers=headers)
    return response.status_code, response.get_json()["reason"]


def test_the_handlers_log_lines_are_shown(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Flask's logger passes only warnings by default: the example's info lines, the
    only sign its handlers ran, would not appear."""
    module = load("flask_app_logs", monkeypatch, None)
    assert module.app.logger.isEnabledFor(logging.INFO)
    with caplog.at_level(logging.INFO, logger=module.app.logger.name):
        assert post(module, DEVELOPMENT_SECRET, "n-1") == (200, "processed")
        assert post(module, DEVELOPMENT_SECRET, "n-1") == (200, "duplicate")
    assert [record.getMessage() for record in caplog.records] == [
        "note n-1 by ana@example.com",
        "event note.created v1 from o-1",
    ]


@pytest.mark.e2e
def test_under_flask_run_as_the_docstring_says(free_port: int, tmp_path: Path) -> None:
    env = {**os.environ, "SERVICE_WEBHOOKS_SECRET": DEVELOPMENT_SECRET, "PYTHONUNBUFFERED": "1"}
    env["SERVICE_WEBHOOKS_STORE"] = f"sqlite:{tmp_path / 'webhooks.sqlite3'}"
    out = tmp_path / "out"
    command = [FLASK, "--app", "examples/flask_app.py", "run", "--port", str(free_port)]
    with out.open("wb") as sink:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{free_port}/webhooks"
    body, headers = Signer(DEVELOPMENT_SECRET, organization_id="o-1").delivery("note.created", NOTE)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                response = httpx.post(url, content=body, headers=headers, timeout=10)
                break
            except httpx.TransportError:
                assert process.poll() is None, out.read_text()
                assert time.monotonic() < deadline, out.read_text()
                time.sleep(0.05)
        assert response.json() == {"status": 200, "reason": "processed"}
        again = httpx.post(url, content=body, headers=headers, timeout=10)
        assert again.json() == {"status": 200, "reason": "duplicate"}
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(10)
    printed = out.read_text()
    assert "INFO in flask_app: note n-1 by ana@example.com" in printed
    assert printed.count("INFO in flask_app: event note.created v1 from o-1") == 1
