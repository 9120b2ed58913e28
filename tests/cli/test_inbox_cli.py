"""``service-webhooks inbox``: through the real console script, fed by a real ``listen``."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import textwrap
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from sw_modules import load_file

from service_webhooks import SIGNATURE_HEADER, sign
from service_webhooks.inbox import SQLiteInbox

from .test_listen import COMMAND, ORG, start, stop

pytestmark = pytest.mark.e2e

SECRET = "whsec-inbox-cli"


def cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    done = subprocess.run(
        [COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    return done.returncode, done.stdout, done.stderr


def post(url: str, body: bytes, secret: str = SECRET) -> httpx.Response:
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "inbox-test/1",
        SIGNATURE_HEADER: sign(body, secret, ORG),
    }
    return httpx.post(url, content=body, headers=headers, timeout=10)


def test_listen_records_what_arrived_and_inbox_list_and_show_read_it(tmp_path: Path) -> None:
    database = tmp_path / "hooks.sqlite3"
    store = f"sqlite:{database}"
    listener = start(tmp_path, "--secret", SECRET, "--store", store, "--json")
    try:
        note = (
            b'{"eventName":"note.created","version":1,'
            b'"data":{"id":"n-1","author":"a@b.c","text":"hi"}}'
        )
        assert post(listener.url, note).status_code == 200
        assert post(listener.url, note).status_code == 200  # duplicate
        bad = b'{"eventName": 7}'
        assert post(listener.url, bad).status_code == 400
        assert post(listener.url, note, secret="wrong").status_code == 401  # never stored
    finally:
        stop(listener)

    code, out, err = cli("inbox", "list", "--store", store, "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["reason"], r["status"], r["seen"]) for r in rows] == [
        ("malformed_envelope", 400, 1),
        ("duplicate", 200, 2),
        ("processed", 200, 1),
    ]
    assert {r["organizationId"] for r in rows} == {ORG}

    code, out, err = cli(
        "inbox", "list", "--json", "--status", "2xx", env={"SERVICE_WEBHOOKS_STORE": store}
    )
    assert code == 0, err
    assert [json.loads(line)["reason"] for line in out.splitlines()] == ["duplicate", "processed"]

    code, out, _ = cli(
        "inbox", "list", "--store", store, "--event", "note.created", "--since", "1h"
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split("\t")[:2] == ["ID", "RECEIVED (UTC)"]
    assert len(lines) == 3

    processed = rows[2]["id"]
    code, out, err = cli("inbox", "show", processed[:20], "--store", store, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert base64.b64decode(shown["bodyBase64"]) == note
    assert shown["payload"]["data"]["id"] == "n-1"
    assert (shown["contentType"], shown["userAgent"]) == ("application/json", "inbox-test/1")

    code, out, _ = cli("inbox", "show", processed, "--store", store)
    assert code == 0
    assert "reason: processed" in out
    assert '"author": "a@b.c"' in out

    code, _, err = cli("inbox", "show", "abcdef0123", "--store", store)
    assert code == 1
    assert "no delivery" in err

    code, out, _ = cli("inbox", "prune", "--store", store)
    assert (code, out.strip()) == (0, "deleted 0 deliveries")
    code, out, _ = cli("inbox", "prune", "--store", store, "--max-bytes", str(len(note)))
    assert (code, out.strip()) == (0, "deleted 2 deliveries")
    code, out, _ = cli("inbox", "prune", "--store", store, "--all")
    assert (code, out.strip()) == (0, "deleted 1 deliveries")


HOOKS = """
from pathlib import Path
from service_webhooks import WebhookReceiver

HERE = Path(__file__).parent
receiver = WebhookReceiver("{secret}", store="sqlite:" + str(HERE / "app.sqlite3"))

@receiver.on("note.created")
def handle(event):
    with open(HERE / "runs.txt", "a") as runs:
        runs.write(event.data.id + "\\n")
    if not (HERE / "fixed").exists():
        raise RuntimeError("bug in the handler")
"""


def load(path: Path) -> ModuleType:
    return load_file(f"hooks_{path.parent.name}", path)


def test_a_failed_delivery_is_replayed_from_the_cli_once_fixed(tmp_path: Path) -> None:
    (tmp_path / "hooks.py").write_text(textwrap.dedent(HOOKS.format(secret=SECRET)))
    hooks = load(tmp_path / "hooks.py")
    store = f"sqlite:{tmp_path / 'app.sqlite3'}"
    body = (
        b'{"eventName":"note.created","version":1,"data":{"id":"n-7","author":"a@b.c","text":"x"}}'
    )
    assert hooks.receiver.process(body, sign(body, SECRET, ORG)).status == 500
    runs = tmp_path / "runs.txt"
    assert runs.read_text().split() == ["n-7"]

    code, out, err = cli(
        "inbox", "replay", "--status", "handler_failed", "--since", "1h",
        "--receiver", "hooks:receiver", "--store", store, "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    assert out.count("would replay") == 1
    assert runs.read_text().split() == ["n-7"]

    (tmp_path / "fixed").touch()
    [record] = SQLiteInbox(tmp_path / "app.sqlite3").search().items
    code, out, err = cli(
        "inbox", "replay", record.id[:12], "--receiver", "hooks:receiver", "--store", store,
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    assert "handler_failed -> 200 processed" in out
    assert runs.read_text().split() == ["n-7", "n-7"]  # exactly once more

    code, out, err = cli(
        "inbox", "replay", record.id, "--receiver", "hooks:receiver", "--store", store,
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    assert "-> 200 duplicate" in out
    assert runs.read_text().split() == ["n-7", "n-7"]

    code, out, err = cli(
        "inbox", "replay", record.id, "--force", "--receiver", "hooks:receiver",
        "--store", store, cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    assert runs.read_text().split() == ["n-7", "n-7", "n-7"]

    code, out, _ = cli("inbox", "show", record.id, "--store", store, "--json")
    shown = json.loads(out)
    assert shown["reason"] == "handler_failed"
    assert "RuntimeError: bug in the handler" in shown["traceback"]
    assert [(r["reason"], r["forced"]) for r in shown["replays"]] == [
        ("processed", False),
        ("duplicate", False),
        ("processed", True),
    ]


def test_replay_usage_errors(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'x.sqlite3'}"
    code, _, err = cli("inbox", "replay", "--receiver", "m:r", "--store", store)
    assert code == 2
    assert "Error: nothing to replay: give delivery IDs, or select them with --status" in err
    assert "not both" not in err
    code, _, err = cli("inbox", "list", "--store", "redis://127.0.0.1:6379/0")
    assert code == 2
    assert "no inbox for URL scheme 'redis'" in err
