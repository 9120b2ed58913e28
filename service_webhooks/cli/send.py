"""``service-webhooks send``: sign and POST one delivery, then classify the answer.

It behaves like one delivery attempt of the service (spec §6.1): ``POST`` with
``Content-Type: application/json; charset=utf-8`` and a fresh ``Service-Signature``
(spec §5.2), a 10 s deadline for the whole exchange (spec §8), redirects not followed,
no proxy from the environment. The answer is classified as the service would (spec §7):

=====================================  =============================  =========
receiver's answer                      printed                        exit code
=====================================  =============================  =========
200-299                                success                        0
500-599, 302, 303, 307, 429            temporary failure (retried)    1
any other status                       permanent failure              1
no answer within 10 s, not transmitted temporary failure              1
=====================================  =============================  =========

The attempt is the delivery emulator's own (:class:`~service_webhooks.delivery.Sender`),
so every rule is the same: like the service (spec §3.3), it refuses reserved
destinations (a host that resolves to a loopback, private, link-local or otherwise
reserved address is not contacted, and the request goes to the address that was
checked), unless ``--allow-private-destinations`` is given to reach a receiver on this
machine or network; a 1xx with no final response is a permanent failure; a status
received in time is the answer however late its body.

The body is either an envelope built from ``--event``/``--version``/``--data`` (compact
JSON, so sending the same arguments twice sends the same bytes: a duplicate), or the
bytes of ``--body-file`` exactly as they are.
"""

from __future__ import annotations

import asyncio
import http
import ssl
from typing import IO

import click
import httpx

from service_webhooks import ConfigurationError
from service_webhooks._reporting import printable
from service_webhooks.delivery import AttemptResult, Failure, Result, Sender
from service_webhooks.delivery.endpoint import check_organization_id, check_url
from service_webhooks.stores import redact_url
from service_webhooks.testing.signer import envelope

from ._json import json_option
from ._secret import signing_secret_option
from ._tls import ca_file_option

__all__ = ["DEADLINE", "send"]

DEADLINE = 10.0
"""Seconds the whole attempt may take, connect to last byte (spec §8 "response wait")."""

_HINT = (
    "hint: the service never delivers to loopback or private addresses; "
    "pass --allow-private-destinations to reach a receiver on this machine"
)

_REDIRECT_HINT = (
    "hint: the service never follows redirects, and its retries get the same answer: "
    "the receiver's configuration redirects (a Mount at the webhook path, a "
    "trailing-slash or HTTPS redirect)"
)


def _redirect_hint(location: str | None) -> str:
    """:data:`_REDIRECT_HINT`, naming where the answer pointed when it said."""
    if not location:
        return _REDIRECT_HINT
    return f"{_REDIRECT_HINT}; it points to {printable(location[:_SHOWN_RESPONSE])}"


_SHOWN_RESPONSE = 200  # characters of the response body echoed for information
_READ_LIMIT = 1024  # bytes of the response body read at most (the emulator's snippet_size)
USER_AGENT = "service-webhooks-send"

_LABELS = {
    Result.SUCCESS: "success",
    Result.TEMPORARY_FAILURE: "temporary failure (the service would retry)",
    Result.PERMANENT_FAILURE: "permanent failure (the service would not retry)",
}


@click.command()
@click.argument("url")
@signing_secret_option
@click.option("--org", required=True, help="Organization ID to sign as (the o of spec §5.2).")
@click.option("--event", "event_name", metavar="NAME", help="eventName, e.g. note.created.")
@click.option(
    "--version",
    "event_version",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Payload version of the envelope (spec §9).",
)
@click.option("--data", metavar="JSON", help="The envelope's data, as JSON text.")
@click.option(
    "--body-file",
    type=click.File("rb"),
    help="Send this file's bytes as the body, unchanged ('-' reads stdin).",
)
@click.option(
    "--timestamp",
    # At most 12 digits, as sign() requires: a larger one is this option's error, not --org's.
    type=click.IntRange(min=0, max=10**12 - 1),
    help="Sign as of this Unix time in seconds (default: now), e.g. to see a replay refused.",
)
@click.option(
    "--allow-private-destinations",
    is_flag=True,
    help="Allow loopback/private targets (the service refuses them).",
)
@ca_file_option
def send(
    url: str,
    secret: str,
    org: str,
    event_name: str | None,
    event_version: int,
    data: str | None,
    body_file: IO[bytes] | None,
    timestamp: int | None,
    allow_private_destinations: bool,
    verify: ssl.SSLContext | bool,
) -> None:
    """Sign and POST one delivery to URL and print how the service would classify the answer.

    Give either --event and --data, or --body-file. Exit code 0 on success (2xx),
    1 on any failure (spec §7), 2 on a usage error. Loopback and private addresses
    are refused, as the service does, unless --allow-private-destinations is given.

    \b
    Example:
      service-webhooks send http://127.0.0.1:8000/webhooks --secret S --org o-1 \\
        --allow-private-destinations \\
        --event note.created --data '{"id": "n-1", "author": "a@b.c", "text": "hi"}'
    """
    _check_url(url)
    try:  # refused here, before anything is sent, rather than by the signature
        check_organization_id(org)
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--org") from error
    if body_file is not None:
        if event_name is not None or data is not None:
            raise click.UsageError("give either --body-file or --event/--data, not both")
        body = body_file.read()
    else:
        if event_name is None or data is None:
            raise click.UsageError("give --event NAME and --data JSON, or --body-file FILE")
        if not event_name:
            raise click.BadParameter(
                "an event needs a non-empty eventName (spec §2.7); send a malformed "
                "body with --body-file",
                param_hint="--event",
            )
        body = envelope(event_name, json_option(data, "--data"), version=event_version)
    what = f"{printable(event_name)} v{event_version}" if event_name is not None else "body file"
    click.echo(f"POST {printable(redact_url(url))}  {what}  org {org}  ({len(body)} bytes)")
    attempt = asyncio.run(
        _attempt(_sender(allow_private_destinations, verify), url, body, secret, org, timestamp)
    )
    click.echo(_answer_line(attempt))
    if attempt.failure is Failure.RESERVED_ADDRESS:
        click.echo(_HINT, err=True)
    if attempt.status is not None and 300 <= attempt.status < 400:
        click.echo(_redirect_hint(attempt.location), err=True)
    text = attempt.response_snippet[:_SHOWN_RESPONSE].strip()
    if text:  # the receiver's bytes: no line breaks or terminal escapes of its own
        click.echo(f"response: {printable(text)}")
    raise SystemExit(0 if attempt.result is Result.SUCCESS else 1)


def _sender(allow_private_destinations: bool, verify: ssl.SSLContext | bool = True) -> Sender:
    """The delivery emulator's sender, as one attempt of the service makes it."""
    return Sender(
        deadline=DEADLINE,
        allow_private_destinations=allow_private_destinations,
        verify=verify,
        snippet_size=_READ_LIMIT,
        user_agent=USER_AGENT,
    )


async def _attempt(
    sender: Sender, url: str, body: bytes, secret: str, org: str, timestamp: int | None
) -> AttemptResult:
    async with sender:
        return await sender.send(url, body, secret=secret, organization_id=org, timestamp=timestamp)


def _answer_line(attempt: AttemptResult) -> str:
    """``HTTP 200 OK: success``, ``not sent: …`` or ``no response (…)``, then the class."""
    label = _LABELS[attempt.result]
    if attempt.status is not None:
        try:
            phrase = http.HTTPStatus(attempt.status).phrase
        except ValueError:  # a status the standard does not name
            phrase = ""
        return f"HTTP {attempt.status} {phrase}".rstrip() + f": {label}"
    description = attempt.description
    if description.startswith(("not sent", "no response")):
        return f"{description}: {label}"
    return f"no response ({description}): {label}"


def _check_url(url: str) -> None:
    """Refuse (exit 2) a URL ``trigger`` refuses (an endpoint's URL rules, with the same
    message), then one httpx cannot send to."""
    try:
        check_url(url)
    except ConfigurationError as error:
        raise click.UsageError(str(error)) from None
    try:
        httpx.URL(url)
    except httpx.InvalidURL as error:
        raise click.BadParameter(str(error), param_hint="URL") from error
