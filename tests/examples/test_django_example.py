"""``examples/django_project`` works as its README says, under ``runserver``, with the
README's own delivery snippet: the secret set, a rotation in it, and it unset."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from service_webhooks.testing import Signer

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "examples" / "django_project"
README = (PROJECT / "README.md").read_text(encoding="utf-8")
DEVELOPMENT_SECRET = "whsec-development-only-0123456789abcdef0123"


def snippet(port: int) -> str:
    """The README's ``python - <<'PY'`` delivery, aimed at ``port``."""
    [code] = re.findall(r"<<'PY'\n(.*?)^PY$", README, re.M | re.S)
    assert "127.0.0.1:8000/webhooks/" in code
    return code.replace("127.0.0.1:8000", f"127.0.0.1:{port}")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("variable", "other"),
    [
        pytest.param("whsec-set-0123456789abcdef", None, id="set"),
        pytest.param(
            "whsec-new-0123456789 whsec-old-0123456789", "whsec-old-0123456789", id="rotation"
        ),
        pytest.param(None, DEVELOPMENT_SECRET, id="unset"),
    ],
)
def test_the_readme_delivery_under_runserver(
    variable: str | None, other: str | None, free_port: int, tmp_path: Path
) -> None:
    project = tmp_path / "django_project"  # migrate writes db.sqlite3 beside manage.py
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("db.sqlite3", "__pycache__"))
    env = {key: value for key, value in os.environ.items() if key != "SERVICE_WEBHOOKS_SECRET"}
    env["PYTHONUNBUFFERED"] = "1"
    if variable is not None:
        env["SERVICE_WEBHOOKS_SECRET"] = variable
    manage = [sys.executable, "manage.py"]
    for command in (["migrate", "-v", "0"], ["check"]):
        subprocess.run([*manage, *command], cwd=project, env=env, check=True, timeout=60)
    out = tmp_path / "out"
    with out.open("wb") as sink:
        server = subprocess.Popen(
            [*manage, "runserver", "--noreload", f"127.0.0.1:{free_port}"],
            cwd=project,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{free_port}/webhooks/", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, out.read_text()
                assert time.monotonic() < deadline, out.read_text()
                time.sleep(0.1)
        printed = []
        for _ in range(2):
            sent = subprocess.run(
                [sys.executable, "-"],
                input=snippet(free_port),
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert sent.returncode == 0, sent.stderr
            printed.append(sent.stdout.strip())
        assert printed == [
            """b'{"status":200,"reason":"processed"}'""",
            """b'{"status":200,"reason":"duplicate"}'""",
        ]
        if other is not None:  # the older secret of a rotation, or the default, verifies
            body, headers = Signer(other, organization_id="o-EXAMPLE").delivery(
                "note.created", {"id": "n-2", "author": "ana@example.com", "text": "hi"}
            )
            url = f"http://127.0.0.1:{free_port}/webhooks/"
            assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == 200
        wrong = Signer("not-the-secret", organization_id="o-EXAMPLE")
        body, headers = wrong.delivery("note.created", {"id": "n-3", "author": "a@b.c", "text": ""})
        url = f"http://127.0.0.1:{free_port}/webhooks/"
        assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == 401
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(10)
    with closing(sqlite3.connect(project / "db.sqlite3")) as database:
        notes = database.execute("SELECT note_id FROM notes_note ORDER BY id").fetchall()
    assert notes == [("n-1",), ("n-2",)] if other else [("n-1",)]
