"""The ``service-webhooks`` command: the console script's entry point (``main``) and
``python -m service_webhooks``.

Both are installed with the package whatever its extras, so the ``cli`` extra is checked
here first: without it, one line names the extra to install (exit 1), never a traceback
from the command's imports.
"""

from __future__ import annotations

import sys

from service_webhooks import _extras

__all__ = ["main"]


def main() -> None:
    """Run the command, or say which extra it needs (on stderr, exit 1)."""
    try:
        _extras.require_extra("cli", *_extras.CLI_MODULES, what=_extras.CLI_COMMAND)
    except ImportError as error:
        sys.exit(f"Error: {error}")
    from service_webhooks.cli import main as command

    command(prog_name="service-webhooks")


if __name__ == "__main__":
    main()
