"""``service-webhooks inbox serve``: refuses to listen beyond loopback without credentials."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from service_webhooks.cli import main
from service_webhooks.dashboard import Dashboard

CLI = str(Path(sys.executable).parent / "service-webhooks")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com"])
def test_a_public_host_without_credentials_is_refused(
    host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SERVICE_WEBHOOKS_DASHBOARD_AUTH", raising=False)
    result = CliRunner().invoke(
        main, ["inbox", "serve", "--store", f"sqlite:{tmp_path / 'x.sqlite3'}", "--host", host]
    )
    assert result.exit_code == 2
    assert "--basic-auth USER:PASSWORD" in result.output
    assert "reachable from other machines" in result.output


def test_the_real_command_exits_non_zero_with_a_clear_error(tmp_path: Path) -> None:
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)}
    result = subprocess.run(
        [CLI, "inbox", "serve", "--store", f"sqlite:{tmp_path / 'x.sqlite3'}", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--host 0.0.0.0 is reachable from other machines" in result.stderr
    assert not (tmp_path / "x.sqlite3").exists()  # refused before opening anything


def test_credentials_from_the_option_or_the_environment(
    tmp_path: Path, served: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:{tmp_path / 'x.sqlite3'}"
    result = CliRunner().invoke(
        main, ["inbox", "serve", "--store", store, "--host", "0.0.0.0", "--basic-auth", "u:p"]
    )
    assert result.exit_code == 0, result.output
    app, options = served[-1]
    assert isinstance(app, Dashboard)
    assert options["host"] == "0.0.0.0"
    assert options["port"] == 8001
    assert "u:p" not in result.output  # never echoed back
    monkeypatch.setenv("SERVICE_WEBHOOKS_DASHBOARD_AUTH", "env:pw")
    result = CliRunner().invoke(main, ["inbox", "serve", "--store", store, "--host", "::"])
    assert result.exit_code == 0, result.output
    assert served[-1][1]["host"] == "::"


def test_loopback_without_credentials_makes_a_random_password(
    tmp_path: Path, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    store = f"sqlite:{tmp_path / 'x.sqlite3'}"
    passwords = set()
    for host in ("127.0.0.1", "localhost", "::1"):
        result = CliRunner().invoke(
            main, ["inbox", "serve", "--store", store, "--host", host, "--port", "9"]
        )
        assert result.exit_code == 0, result.output
        assert "log in as admin:" in result.output
        passwords.add(result.output.split("log in as admin:")[1].split()[0])
    assert len(passwords) == 3
    assert served[-1][1]["port"] == 9  # asked for; the fixture binds a free port instead
    assert f"http://[::1]:{served[-1][1]['bound_port']}/" in result.output


@pytest.mark.parametrize("value", ["nocolon", ":pw", "user:"])
def test_malformed_credentials_are_a_usage_error(
    value: str, tmp_path: Path, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    store = f"sqlite:{tmp_path / 'x.sqlite3'}"
    result = CliRunner().invoke(main, ["inbox", "serve", "--store", store, "--basic-auth", value])
    assert result.exit_code == 2
    assert "USER:PASSWORD" in result.output
    assert served == []


def test_a_receiver_gives_the_replay_button(
    tmp_path: Path, served: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:{tmp_path / 'hooks.sqlite3'}"
    monkeypatch.setenv("SW_SECRET", "whsec-cli-0123456789abcdef")
    monkeypatch.setenv("SW_STORE", store)
    monkeypatch.setenv("SW_INBOX", store)
    monkeypatch.setenv("SW_FLAG", str(tmp_path / "flag"))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    result = CliRunner().invoke(
        main,
        ["inbox", "serve", "--store", store, "--receiver", "dash_receiver:receiver"],
    )
    assert result.exit_code == 0, result.output
    app = served[-1][0]
    assert app.receiver is not None
