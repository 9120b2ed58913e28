"""``service_webhooks.cli._output``: a rich table on a terminal, tab-separated lines
otherwise."""

from __future__ import annotations

import io
import sys

import pytest
from rich.table import Column

from service_webhooks.cli._output import console, print_table

ROWS = [["abc123", "a long cell\twith a tab", "1"], ["def456", "x", "22"]]


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "dumb")


def test_on_a_terminal_a_rich_table_with_its_title(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stdout", tty)
    out = console()
    assert out.is_terminal
    rows = [["abc123", "a long cell", "1"], ["def456", "x", "22"]]
    print_table(out, ["ID", Column("TEXT", no_wrap=True), "N"], rows, title="Some rows")
    lines = tty.getvalue().splitlines()
    assert "Some rows" in lines[0]
    assert "\t" not in tty.getvalue()
    header = next(line for line in lines if "ID" in line)
    assert header.split() == ["┃", "ID", "┃", "TEXT", "┃", "N", "┃"]
    body = [line for line in lines if "abc123" in line or "def456" in line]
    cells = [[cell.strip() for cell in line.split("│")[1:4]] for line in body]
    assert cells == rows


def test_on_stderr_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    print_table(console(stderr=True), ["A"], [["b"]])
    assert "┃ A ┃" in tty.getvalue()


def test_piped_tab_separated_lines_without_wrapping(monkeypatch: pytest.MonkeyPatch) -> None:
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)
    out = console()
    assert not out.is_terminal
    long = "y" * 300
    print_table(out, ["ID", Column("TEXT"), "N"], [*ROWS, ["z", long, "3"]], title="Not shown")
    assert piped.getvalue().splitlines() == [
        "ID\tTEXT\tN",
        "abc123\ta long cell with a tab\t1",
        "def456\tx\t22",
        f"z\t{long}\t3",
    ]


HOSTILE = ["[/bold] unmatched", "[red]x[/red]", "two\nlines", "cr\r\nlf", "tab\there"]


def test_cells_are_never_read_as_markup_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cell from a delivery (an event name) or the API holding ``[/bold]`` made rich
    raise MarkupError, and ``[red]x[/red]`` lost its brackets."""
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stdout", tty)
    print_table(console(), ["CELL"], [[cell] for cell in HOSTILE[:2]])
    shown = tty.getvalue()
    assert "[/bold] unmatched" in shown
    assert "[red]x[/red]" in shown


def test_piped_cells_stay_on_their_row_and_column(monkeypatch: pytest.MonkeyPatch) -> None:
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)
    print_table(console(), ["CELL", "N"], [[cell, str(n)] for n, cell in enumerate(HOSTILE)])
    lines = piped.getvalue().splitlines()
    assert lines[0] == "CELL\tN"
    assert [line.split("\t") for line in lines[1:]] == [
        ["[/bold] unmatched", "0"],
        ["[red]x[/red]", "1"],
        ["two lines", "2"],
        ["cr lf", "3"],
        ["tab here", "4"],
    ]
