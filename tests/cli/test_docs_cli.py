"""docs/cli.md documents every command and every option of ``service-webhooks``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from service_webhooks.cli import main

DOC = Path(__file__).parents[2] / "docs" / "cli.md"


def commands(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from commands(sub, f"{path} {name}")
    else:
        yield path, command


ALL = list(commands(main, "service-webhooks"))


def section(path: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^### `{re.escape(path)}`\n(.*?)(?=^#{{1,3}} |\Z)", text, re.M | re.S)
    assert match, f"docs/cli.md has no '### `{path}`' section"
    return match.group(1)


def test_every_command_is_covered() -> None:
    assert len(ALL) == 14


@pytest.mark.parametrize(("path", "command"), ALL, ids=[p for p, _ in ALL])
def test_every_option_and_argument_is_documented(path: str, command: click.Command) -> None:
    text = section(path)
    for param in command.params:
        if isinstance(param, click.Option):
            for name in (*param.opts, *param.secondary_opts):
                assert f"`{name}`" in text, f"{path}: {name} is not documented"
        else:
            metavar = (param.metavar or param.name or "").upper().strip("[].")  # [ID]... -> ID
            assert f"`{metavar}`" in text, f"{path}: argument {metavar} is not documented"
