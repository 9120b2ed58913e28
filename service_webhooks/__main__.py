"""The ``service-webhooks`` command: the console script's entry point (``main``) and
``python -m service_webhooks``.

Both are installed with the package whatever its extras, so the ``cli`` extra is checked
here first: without it, one line names the extra to install (exit 1), never a traceback
from the command's imports.

Whatever the environment, the command ends with a message and an exit code, never a
traceback: text the output's encoding cannot hold (``PYTHONIOENCODING=latin-1``, an
ASCII locale) is written as Python escapes; output that cannot be written (stdout on
``/dev/full``, or closed) is one line on stderr and exit code 1; a value that holds
bytes that are not UTF-8 (an argument or environment variable typed in another
encoding) is a usage error (exit code 2). A closed pipe is click's: a quiet exit 1.
"""

from __future__ import annotations

import errno
import os
import sys
from contextlib import suppress
from typing import TextIO

from service_webhooks import _extras

__all__ = ["main"]


def main() -> None:
    """Run the command, or say which extra it needs (on stderr, exit 1)."""
    try:
        _extras.require_extra("cli", *_extras.CLI_MODULES, what=_extras.CLI_COMMAND)
    except ImportError as error:
        sys.exit(f"Error: {error}")
    from service_webhooks.cli import main as command

    if sys.stdout is None:  # started with stdout closed (>&-): nothing could be printed
        sys.exit("Error: stdout is closed: nothing can be printed")
    if sys.stdin is None:  # started with stdin closed (<&-): read as empty, as /dev/null
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - for the whole run
    for stream in (sys.stdout, sys.stderr):
        _escape_unencodable(stream)
    try:
        command(prog_name="service-webhooks")
    except OSError as error:  # a write failed: /dev/full (ENOSPC), a terminal gone (EIO)
        if error.errno not in _WRITE_FAILURES:  # not the output's: a bug, with its traceback
            raise
        _discard_stdout()
        sys.exit(f"Error: cannot write the output: {error.strerror or error}")
    except UnicodeError as error:
        if not _undecodable(error):
            raise
        sys.stderr.write(
            "Error: a value holds bytes that are not UTF-8 (an argument or environment "
            f"variable in another encoding, or a lone surrogate escape): {error}\n"
        )
        sys.exit(2)


_WRITE_FAILURES = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG})
"""The ``errno`` values of a write that cannot succeed (a full disk or quota, a file too
large, a terminal gone); a closed pipe (``EPIPE``) is click's, a quiet exit 1."""


def _escape_unencodable(stream: TextIO | None) -> None:
    """Write what ``stream``'s encoding cannot hold as Python escapes (``\\u2026``)
    instead of raising ``UnicodeEncodeError`` in the middle of the output."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        with suppress(ValueError, OSError):  # a stream already closed or detached
            reconfigure(errors="backslashreplace")


def _undecodable(error: UnicodeError) -> bool:
    """``error`` comes from a surrogate: a byte Python could not decode as UTF-8
    (``\\udcff``), or a lone ``\\ud83d`` from a JSON escape."""
    text = getattr(error, "object", None)
    if isinstance(text, str):
        return any("\ud800" <= char <= "\udfff" for char in text)
    return "surrogate" in str(error) or "\\udc" in repr(error)


def _discard_stdout() -> None:
    """Point stdout at ``os.devnull``, so that the interpreter's last flush of what it
    still buffers cannot fail again (``Exception ignored ... OSError`` and exit 120)."""
    with suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":
    main()
