"""How the commands print: rich on a terminal, plain lines when piped.

On a terminal a table is drawn with rich. When stdout is not a terminal (a pipe, a
file, ``watch``, CI logs) rich would draw it 80 columns wide and wrap every long cell,
so tables become plain tab-separated lines instead (a header line, then one line per
row) and no line is ever wrapped.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

from service_webhooks._reporting import printable
from service_webhooks.stores import redact_url
from service_webhooks.stores._url import redact_message

__all__ = ["cannot_open", "console", "echo_json", "literal", "print_table"]


def literal(value: object) -> str:
    """``value`` as text to put inside a rich markup string and print as it is.

    Data from a delivery, a file or a receiver's answer (an event name, a reason, a
    path) is neither markup (``[/bold]`` would raise ``MarkupError``, ``[red]`` would
    vanish) nor a way to end the line or send terminal escapes: control characters
    are written as Python escapes.
    """
    return escape(printable(str(value)))


def cannot_open(what: str, url: str, error: Exception) -> click.ClickException:
    """``cannot open the <what> at <url>: <Type>: <first line>`` (exit 1), passwords
    masked in both the URL and the driver's message."""
    lines = str(error).strip().splitlines()
    reason = f": {redact_message(lines[0], url)}" if lines else ""
    return click.ClickException(
        f"cannot open the {what} at {redact_url(url)}: {type(error).__name__}{reason}"
    )


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def echo_json(line: str) -> None:
    """Print one JSON line on stdout, still valid JSON that decodes to the same values
    when stdout's encoding cannot hold its text (``PYTHONIOENCODING=latin-1``, an ASCII
    locale): then every non-ASCII character (all inside strings) is written as its
    ``\\uXXXX`` escape, not as a Python escape (``\\U0001f600`` is no JSON)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        line.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        line = _NON_ASCII.sub(lambda match: json.dumps(match.group())[1:-1], line)
    click.echo(line)


def console(*, stderr: bool = False) -> Console:
    """A console that never wraps a line it prints (markup is dropped when piped)."""
    return Console(highlight=False, soft_wrap=True, stderr=stderr)


def print_table(
    out: Console,
    columns: Sequence[Column | str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
) -> None:
    """Print ``rows`` under ``columns``: a rich table on a terminal, else TSV lines.

    Cells print as they are, whatever they hold (data from a delivery or the API): on a
    terminal ``[bold]`` is not markup, and piped, a line break or a tab cannot start a
    new row or column.

    Args:
        out: Where to print.
        columns: Column headers (a rich :class:`~rich.table.Column` keeps its options
            on a terminal).
        rows: One sequence of cell texts per row, as many cells as columns.
        title: Shown above the table on a terminal only.
    """
    if out.is_terminal:
        table = Table(*columns, title=title)
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))  # as written: never read as markup
        out.print(table)
        return
    headers = [column.header if isinstance(column, Column) else column for column in columns]
    for line in (headers, *rows):
        out.file.write("\t".join(_one_line(str(cell)) for cell in line) + "\n")
    out.file.flush()


def _one_line(cell: str) -> str:
    """A cell on one line of one column: tabs and line breaks become spaces."""
    return " ".join(cell.splitlines()).replace("\t", " ") if cell else cell
