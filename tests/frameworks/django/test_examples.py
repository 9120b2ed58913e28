"""``examples/django_project`` runs as its README says: migrate, check, runserver; in a
copy, since ``migrate`` writes ``db.sqlite3`` beside ``manage.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

EXAMPLE = Path(__file__).parents[3] / "examples" / "django_project"


@pytest.mark.e2e
def test_the_example_project_migrates_checks_and_serves(kit: ModuleType, tmp_path: Path) -> None:
    secret = "whsec-example-test-0123456789abcdef0123456789"
    project = tmp_path / "django_project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("db.sqlite3", "__pycache__"))
    env = {"SERVICE_WEBHOOKS_SECRET": secret}
    env.update(DJANGO_SETTINGS_MODULE="mysite.settings", PYTHONPATH=str(project))
    manage = [sys.executable, "manage.py"]
    full_env = {**os.environ, **env}
    for command in (["migrate", "-v0"], ["check", "--fail-level", "WARNING"]):
        done = subprocess.run([*manage, *command], cwd=project, env=full_env, capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
    assert (project / "db.sqlite3").is_file()  # the settings' database: in the copy
    port = kit.free_port()
    server = kit.start_server(
        [*manage, "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=project, env=env, log=tmp_path / "runserver.log", port=port,
    )  # fmt: skip
    try:
        body = kit.envelope()
        header = kit.sign(body, secret, "o-EXAMPLE")
        answers = [
            httpx.post(
                f"{server.url}/webhooks/", content=body, headers={kit.SIGNATURE_HEADER: header}
            )
            for _ in range(2)
        ]
    finally:
        kit.stop_server(server)
    assert [(a.status_code, a.json()["reason"]) for a in answers] == [
        (200, "processed"),
        (200, "duplicate"),
    ]
