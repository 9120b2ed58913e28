"""The ``service-webhooks`` command line (``cli`` extra).

Each command lives in its own module of this package and is registered on
:func:`main` below.
"""

from __future__ import annotations

from .. import _extras

# every module of the extra, by name only (the console script checks them first too)
_extras.require_extra("cli", *_extras.CLI_MODULES, what=_extras.CLI_COMMAND)

import click  # noqa: E402

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="service-webhooks")
def main() -> None:
    """Receive, send and inspect the service's webhooks."""


# Command registrations: one import and one add_command per module.
from .api import api  # noqa: E402
from .deliver import deliver, trigger  # noqa: E402
from .inbox import inbox  # noqa: E402
from .listen import listen  # noqa: E402
from .secret import secret  # noqa: E402
from .send import send  # noqa: E402

for command in (listen, send, trigger, deliver, api, inbox, secret):
    main.add_command(command)
