"""The public annotations as a user's type checker sees them: ``mypy --strict`` on
``user_code.py`` (a typed user module) must report exactly its ``# error: [code]`` lines.

That pins both sides: documented usage type-checks and keeps its types (a decorated
handler is not ``Any``, ``Event[NoteCreated].data`` is a ``NoteCreated``), and misuse a
signature can describe (a handler of the wrong shape, an ``async`` key function, a
``str`` secret for ``verify``) is refused instead of passing through an ``Any``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER_CODE = Path(__file__).with_name("user_code.py")
EXPECTED = re.compile(r"  # error: \[(?P<code>[a-z-]+)\]$")
REPORTED = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


def expected_errors() -> set[tuple[int, str]]:
    lines = USER_CODE.read_text(encoding="utf-8").splitlines()
    return {
        (number, match["code"])
        for number, line in enumerate(lines, start=1)
        if (match := EXPECTED.search(line))
    }


def test_user_code_marks_misuse() -> None:
    assert len(expected_errors()) >= 15


def test_mypy_strict_sees_the_documented_types(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (the 'lint' extra)")
    result = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
            "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "--show-error-codes",
            "--hide-error-context", "--no-pretty", str(USER_CODE.relative_to(ROOT)),
        ],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    reported = {
        (int(match["line"]), match["code"])
        for line in result.stdout.splitlines()
        if (match := REPORTED.match(line))
    }
    unparsed = [
        line
        for line in result.stdout.splitlines()
        if ": error:" in line and not REPORTED.match(line)
    ]
    assert not unparsed, result.stdout
    assert result.returncode in (0, 1), result.stderr
    assert reported == expected_errors(), result.stdout
