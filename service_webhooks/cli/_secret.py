"""The ``--secret`` option, read and checked the same way by every command.

``SERVICE_WEBHOOKS_SECRET`` holds one secret or several separated by whitespace, newest
first (rotation, spec §5.2): ``listen`` verifies with each of them, and the commands
that sign (``send``, ``trigger``, ``deliver``) sign with the first one, the newest, as
the service does. A ``--secret`` given on the command line is used whole. An empty
secret, one of whitespace only or one with whitespace around it is a usage error (exit
2) that names the option and the variable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from service_webhooks import ConfigurationError
from service_webhooks._credentials import configured_secret

__all__ = ["SECRET_ENVVAR", "checked_secrets", "signing_secret_option"]

SECRET_ENVVAR = "SERVICE_WEBHOOKS_SECRET"  # noqa: S105 - a variable name, not a secret
"""Environment variable read when no ``--secret`` is given (whitespace-separated list)."""

F = TypeVar("F", bound=Callable[..., Any])


def _check(secret: str, ctx: click.Context, param: click.Parameter) -> None:
    """Raises :class:`click.BadParameter` for a secret a receiver's configuration refuses
    (empty, whitespace only, whitespace around it), as the receiver would refuse it."""
    try:
        configured_secret(secret)
    except ConfigurationError as error:
        raise click.BadParameter(str(error), ctx=ctx, param=param) from None


def _newest_secret(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The secret to sign with: the first word of the environment variable, or the
    whole ``--secret`` value."""
    if value is None:  # not given, and not required (--help, completion)
        return None
    if param.name and ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT:
        value = next(iter(value.split()), "")
    _check(value, ctx, param)
    return value


def checked_secrets(
    ctx: click.Context, param: click.Parameter, value: Sequence[str]
) -> Sequence[str]:
    """Callback of a ``multiple`` ``--secret`` option: each secret is checked."""
    for secret in value:
        _check(secret, ctx, param)
    return value


def signing_secret_option(command: F) -> F:
    """The required ``--secret`` of a command that signs (see the module docstring)."""
    option = click.option(
        "--secret",
        required=True,
        envvar=SECRET_ENVVAR,
        show_envvar=True,
        callback=_newest_secret,
        help="The endpoint's signing secret. The environment variable may hold several, "
        "separated by spaces, newest first (as for listen): the first one signs.",
    )
    return option(command)
