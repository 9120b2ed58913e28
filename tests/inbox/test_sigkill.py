"""Killing the server (SIGKILL) right after it answered loses no record of an answered delivery."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from service_webhooks import SIGNATURE_HEADER, sign
from service_webhooks.inbox import Inbox

pytestmark = pytest.mark.e2e

SECRET = "whsec-sigkill-0123456789abcdef"
ORG = "o-KILL"


def serve(port: int, store: str, inbox: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, SW_SECRET=SECRET, SW_STORE=store, SW_INBOX=inbox)
    command = [
        sys.executable, "-m", "uvicorn", "inbox_app:app", "--app-dir", str(Path(__file__).parent),
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError("uvicorn did not start") from None
            time.sleep(0.05)


def _sqlite(request: pytest.FixtureRequest) -> tuple[str, str, Callable[[], Inbox]]:
    from service_webhooks.inbox import SQLiteInbox

    path = request.getfixturevalue("tmp_path") / "app.sqlite3"
    return f"sqlite:{path}", f"sqlite:{path}", lambda: SQLiteInbox(path)


def _postgres(request: pytest.FixtureRequest) -> tuple[str, str, Callable[[], Inbox]]:
    from service_webhooks.inbox import PostgresInbox

    url: str = request.getfixturevalue("postgres_url")
    table = f"service_webhooks_kill_{uuid.uuid4().hex[:12]}"
    inbox = PostgresInbox(url, table=table)
    inbox.create_schema()

    def clean() -> None:
        inbox.drop_schema()
        inbox.close()

    request.addfinalizer(clean)
    return "memory", f"{url}?inbox_table={table}", lambda: inbox


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_sigkill_right_after_the_answers_loses_no_record(
    backend: str, request: pytest.FixtureRequest, free_port: int
) -> None:
    store, inbox_url, open_inbox = {"sqlite": _sqlite, "postgres": _postgres}[backend](request)
    process = serve(free_port, store, inbox_url)
    answered: dict[bytes, int] = {}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{free_port}", timeout=10) as client:
            for i in range(20):
                text = "fail" if i % 5 == 4 else "ok"
                data = {"id": f"n-{i}", "author": "a@b.c", "text": text}
                body = json.dumps({"eventName": "note.created", "version": 1, "data": data})
                raw = body.encode()
                headers = {SIGNATURE_HEADER: sign(raw, SECRET, ORG), "User-Agent": "kill/1"}
                answered[raw] = client.post("/webhooks", content=raw, headers=headers).status_code
    finally:
        os.kill(process.pid, signal.SIGKILL)  # no shutdown, no flush: the answers are out
        process.wait(10)
    assert process.returncode == -signal.SIGKILL
    assert sorted(answered.values()) == [200] * 16 + [500] * 4
    records = open_inbox().search(limit=100).items
    assert {record.body: record.status for record in records} == answered
    assert all(record.user_agent == "kill/1" for record in records)
