"""``scripts/demo.sh``, the README's demo, runs green against the installed package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
def test_demo_script() -> None:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("PORT", None)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "demo OK"
    assert (
        '{"eventName":"note.created","version":1,"organizationId":"o-DEMO-na1",'
        '"data":{"id":"n-1","author":"ana@example.com","text":"Hello from the demo"}}'
    ) in lines
    assert lines.count("HTTP 200 OK: success") == 2
    assert 'response: {"status":200,"reason":"duplicate"}' in lines
    assert "HTTP 401 Unauthorized: permanent failure (the service would not retry)" in lines


@pytest.mark.e2e
def test_demo_fails_without_the_command() -> None:
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if Path("/usr/bin/service-webhooks").exists():  # pragma: no cover - installed system-wide
        pytest.skip("service-webhooks is installed system-wide")
    assert done.returncode == 1
    assert "demo FAILED: service-webhooks is not on PATH" in done.stderr


@pytest.mark.e2e
def test_demo_fails_when_a_wrong_secret_is_accepted(tmp_path: Path) -> None:
    real = Path(sys.executable).with_name("service-webhooks")
    fake = tmp_path / "service-webhooks"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'if [[ " $* " == *" not-the-secret "* ]]; then echo "HTTP 200 OK: success"; exit 0; fi\n'
        f'exec "{real}" "$@"\n'
    )
    fake.chmod(0o755)
    path = os.pathsep.join([str(tmp_path), str(real.parent), os.environ.get("PATH", "")])
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo.sh")],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "demo FAILED: a wrong secret was accepted" in done.stderr
