"""The ``--ca-file`` option of the commands that deliver (``send``, ``trigger``,
``deliver``): a receiver on ``https://`` whose certificate a private or self-signed CA
issued (a staging server, a local TLS proxy, mkcert).

Without it they trust certifi's public CAs only, as the service trusts public ones and
refuses the rest; ``SSL_CERT_FILE`` is not read (the attempts take nothing from the
environment, as the service's do not). A file that is missing, a directory, or holds no
PEM certificate is a usage error (exit 2) naming the option.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import certifi
import click

__all__ = ["ca_file_option"]

F = TypeVar("F", bound=Callable[..., Any])


def _verify(ctx: click.Context, param: click.Parameter, path: Path | None) -> ssl.SSLContext | bool:
    """``True`` (certifi's CAs) without the option, else a context trusting certifi's CAs
    and those of ``path``.

    Raises:
        click.BadParameter: ``path`` cannot be read or holds no PEM certificate OpenSSL
            can load.
    """
    if path is None:
        return True
    context = ssl.create_default_context(cafile=certifi.where())
    try:
        context.load_verify_locations(cafile=path)
    except (ssl.SSLError, ValueError, OSError) as error:  # OSError: unreadable
        raise click.BadParameter(
            f"{path} holds no PEM CA certificate that can be read ({error})",
            ctx=ctx,
            param=param,
        ) from None
    return context


def ca_file_option(function: F) -> F:
    """``--ca-file PATH``, passed to the command as ``verify`` (``True`` or an
    :class:`ssl.SSLContext`), ready for :class:`~service_webhooks.delivery.Sender`."""
    option = click.option(
        "--ca-file",
        "verify",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        callback=_verify,
        help="Also trust the CA certificates in this PEM file (an https receiver whose "
        "certificate a private or self-signed CA issued).",
    )
    return option(function)
