"""``service-webhooks trigger`` and ``deliver`` against a local server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from service_webhooks.cli import main


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.e2e
def test_trigger_success(status_server: Any) -> None:
    url, app = status_server
    before = len(app.requests)
    result = run(
        "trigger",
        "note.created",
        "--url",
        f"{url}/status/200",
        "--secret",
        "s",
        "--allow-private-destinations",
        "--org",
        "o-CLI",
    )
    assert result.exit_code == 0, result.output
    assert "delivered after 1 attempt(s)" in result.output
    (request,) = app.requests[before:]
    assert json.loads(request["body"])["eventName"] == "note.created"
    assert request["headers"]["service-signature"].startswith("o:o-CLI,t:")


@pytest.mark.e2e
def test_trigger_fast_full_retry_life(status_server: Any) -> None:
    url, app = status_server
    before = len(app.requests)
    result = run(
        "trigger",
        "note.created",
        "--url",
        f"{url}/status/503",
        "--secret",
        "s",
        "--allow-private-destinations",
        "--fast",
        "--data",
        '{"id": "n-9"}',
    )
    assert result.exit_code == 1
    assert "dead: no success within 24 hours" in result.output
    assert "#1   +00:00:00" in result.output
    assert len(app.requests) - before >= 147
    assert {json.loads(r["body"])["data"]["id"] for r in app.requests[before:]} == {"n-9"}


def test_trigger_refuses_loopback_by_default(status_server: Any) -> None:
    url, app = status_server
    before = len(app.requests)
    result = run("trigger", "note.created", "--url", f"{url}/status/200", "--secret", "s")
    assert result.exit_code == 1
    assert "permanent failure" in result.output
    assert "--allow-private-destinations" in result.output
    assert len(app.requests) == before


def test_trigger_rejects_bad_configuration() -> None:
    result = CliRunner().invoke(
        main, ["trigger", "note.created", "--url", "ftp://h.example/", "--secret", "s"]
    )
    assert result.exit_code == 2
    assert "http or https" in result.output


@pytest.mark.e2e
def test_deliver_summary_and_audit_log(status_server: Any, tmp_path: Path) -> None:
    url, app = status_server
    events = tmp_path / "events.jsonl"
    lines = [
        json.dumps({"eventName": "note.created", "version": 1, "data": {"id": f"n-{n}"}})
        for n in range(30)
    ]
    events.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    audit = tmp_path / "audit.json"
    before = len(app.requests)
    result = run(
        "deliver",
        "--url",
        f"{url}/status/200",
        "--secret",
        "s",
        "--events",
        str(events),
        "--allow-private-destinations",
        "--duplicates",
        "0.5",
        "--shuffle",
        "--seed",
        "4",
        "--audit-log",
        str(audit),
        "--rate",
        "1000",
        "--fast",
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(audit.read_text(encoding="utf-8"))
    sent = len(app.requests) - before
    assert len(rows) == sent > 30
    assert {row["result"] for row in rows} == {"success"}
    assert "metric\tvalue" in result.output  # plain lines when piped
    assert re.search(rf"^deliveries succeeded\t{sent}$", result.output, re.M)
    assert re.search(r"^deliveries dead\t0$", result.output, re.M)
    assert "p99 latency" in result.output


def test_deliver_reports_a_bad_line(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text('{"eventName": "note.created"}\n[1, 2]\n', encoding="utf-8")
    result = CliRunner().invoke(
        main, ["deliver", "--url", "http://h.example/", "--secret", "s", "--events", str(events)]
    )
    assert result.exit_code == 2
    assert "line 2" in result.output
