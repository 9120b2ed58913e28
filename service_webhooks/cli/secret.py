"""``service-webhooks secret new``: a random signing secret for an endpoint.

Spec §5.2 recommends a random secret of 256 to 512 bits, different per endpoint and per
account. The secret alone goes to stdout (``export SERVICE_WEBHOOKS_SECRET=$(...)``);
on a terminal, a reminder of where it goes follows on stderr.
"""

from __future__ import annotations

import sys

import click

from service_webhooks import generate_secret

from ._secret import SECRET_ENVVAR

__all__ = ["secret"]


def _multiple_of_8(ctx: click.Context, param: click.Parameter, bits: int) -> int:
    """Callback of ``--bits``: whole bytes only, refused as click refuses the range.

    Raises:
        click.BadParameter: ``bits`` is not a multiple of 8.
    """
    if bits % 8:
        raise click.BadParameter(f"{bits} is not a multiple of 8.", ctx=ctx, param=param)
    return bits


@click.group()
def secret() -> None:
    """Make signing secrets."""


@secret.command()
@click.option(
    "--bits",
    type=click.IntRange(256, 512),
    default=256,
    show_default=True,
    callback=_multiple_of_8,
    help="Random bits in the secret: 256 to 512, a multiple of 8 (spec §5.2).",
)
@click.option(
    "--count",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="How many secrets to print, one per line (one per endpoint or account).",
)
def new(bits: int, count: int) -> None:
    """Print a new random signing secret (URL-safe base64) on stdout.

    Paste it into the endpoint's webhook settings at the service and into the
    receiver's configuration; use a different one per endpoint and per account.
    """
    for _ in range(count):
        click.echo(generate_secret(bits))
    if sys.stdout.isatty():
        click.echo(
            "Set it in the service's webhook settings and in the receiver "
            f"(for the commands: {SECRET_ENVVAR}); never commit it.",
            err=True,
        )
