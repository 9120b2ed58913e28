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

Like the service (spec §3.3), it refuses reserved destinations: a host that resolves to
a loopback, private, link-local or otherwise reserved address is not contacted (the
same classification as the delivery emulator, :mod:`service_webhooks.delivery.addresses`)
and the command exits 1, unless ``--allow-private-destinations`` is given to reach a
receiver on this machine or network.

The body is either an envelope built from ``--event``/``--version``/``--data`` (compact
JSON, so sending the same arguments twice sends the same bytes: a duplicate), or the
bytes of ``--body-file`` exactly as they are.
"""

from __future__ import annotations

import asyncio
from typing import IO, Any

import click
import httpx

from service_webhooks import ConfigurationError, SignatureFormatError
from service_webhooks.delivery import (
    Failure,
    ReservedAddressError,
    Result,
    SystemResolver,
    UnresolvableHostError,
    check_addresses,
    classify_failure,
    classify_status,
)
from service_webhooks.delivery.endpoint import check_url
from service_webhooks.stores import redact_url
from service_webhooks.testing.signer import Signer

from ._json import strict_loads
from ._secret import signing_secret_option

__all__ = ["DEADLINE", "send"]

DEADLINE = 10.0
"""Seconds the whole attempt may take, connect to last byte (spec §8 "response wait")."""

_HINT = (
    "hint: the service never delivers to loopback or private addresses; "
    "pass --allow-private-destinations to reach a receiver on this machine"
)

_SHOWN_RESPONSE = 200  # characters of the response body echoed for information
_READ_LIMIT = 1024  # bytes of the response body read at most (the emulator's snippet_size)

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
    try:  # the secret passed its option's check: what Signer can refuse here is --org
        signer = Signer(secret, organization_id=org)
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--org") from error
    try:
        if body_file is not None:
            if event_name is not None or data is not None:
                raise click.UsageError("give either --body-file or --event/--data, not both")
            body = body_file.read()
            headers = signer.headers(body, timestamp=timestamp)
        else:
            if event_name is None or data is None:
                raise click.UsageError("give --event NAME and --data JSON, or --body-file FILE")
            if not event_name:
                raise click.BadParameter(
                    "an event needs a non-empty eventName (spec §2.7); send a malformed "
                    "body with --body-file",
                    param_hint="--event",
                )
            body, headers = signer.delivery(
                event_name, _parse_json(data), version=event_version, timestamp=timestamp
            )
    except SignatureFormatError as error:
        raise click.BadParameter(str(error), param_hint="--org") from error
    headers["User-Agent"] = "service-webhooks-send"

    what = f"{event_name} v{event_version}" if event_name is not None else "body file"
    click.echo(f"POST {redact_url(url)}  {what}  org {org}  ({len(body)} bytes)")
    if not allow_private_destinations:
        refused = asyncio.run(_reserved(url))
        if refused is not None:
            click.echo(f"not sent: {refused}: {_LABELS[Result.PERMANENT_FAILURE]}")
            click.echo(_HINT, err=True)
            raise SystemExit(1)
    try:
        status, reason, text = asyncio.run(_post(url, body, headers))
    except httpx.HTTPError as error:
        result = classify_failure(_failure_of(error))
        detail = str(error) or type(error).__name__
        click.echo(f"no response ({type(error).__name__}: {detail}): {_LABELS[result]}")
        raise SystemExit(1) from None
    result = classify_status(status)
    click.echo(f"HTTP {status} {reason}: {_LABELS[result]}".replace("  ", " "))
    if text:
        click.echo(f"response: {text}")
    raise SystemExit(0 if result is Result.SUCCESS else 1)


async def _reserved(url: str) -> str | None:
    """Why the service would refuse ``url``'s host (spec §3.3), or ``None``.

    Every address the host resolves to is checked with the delivery emulator's rules;
    a host that does not resolve is left to the POST, which reports it.
    """
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        addresses = await SystemResolver().resolve(parsed.host, port)
        check_addresses(addresses)
    except UnresolvableHostError:
        return None
    except ReservedAddressError as error:
        return str(error)
    return None


def _parse_json(text: str) -> Any:
    """``--data`` as strict JSON: ``NaN`` and ``Infinity`` are refused (RFC 8259), as
    they would be sent as is and make the body invalid JSON."""
    try:
        return strict_loads(text)
    except ValueError as error:
        raise click.BadParameter(f"not valid JSON: {error}", param_hint="--data") from error


async def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str, str]:
    """POST within :data:`DEADLINE`; returns ``(status, reason phrase, body excerpt)``.

    A status received within the deadline is the answer even when its body is still
    coming at the deadline (the excerpt then holds what arrived), as for the service.

    Raises:
        httpx.HTTPError: Not transmitted, or no complete answer (the overall
            deadline is raised as :class:`httpx.TimeoutException`).
    """
    received = bytearray()
    answered: list[httpx.Response] = []  # once the status line and headers arrived
    async with httpx.AsyncClient(
        timeout=DEADLINE, follow_redirects=False, trust_env=False
    ) as client:
        try:
            async with (
                asyncio.timeout(DEADLINE),
                client.stream("POST", url, content=body, headers=headers) as response,
            ):
                answered.append(response)
                # Only the status counts (spec §6.1): read at most _READ_LIMIT bytes of
                # the body, as the delivery emulator does, never wait for the rest.
                try:
                    async for chunk in response.aiter_bytes():
                        received += chunk
                        if len(received) >= _READ_LIMIT:
                            break
                except httpx.HTTPError:
                    pass  # the status arrived; only the excerpt is incomplete
        except TimeoutError as error:
            if not answered:  # a status in time is the answer, however late its body
                message = f"no complete answer within {DEADLINE:g} s"
                raise httpx.TimeoutException(message) from error
    response = answered[0]
    text = bytes(received[:_READ_LIMIT]).decode(response.encoding or "utf-8", "replace")
    excerpt = text[:_SHOWN_RESPONSE].strip()
    return response.status_code, response.reason_phrase, excerpt


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


def _failure_of(error: httpx.HTTPError) -> Failure:
    if isinstance(error, httpx.TimeoutException):
        return Failure.TIMEOUT
    if isinstance(error, httpx.ConnectError):
        return Failure.REFUSED
    if isinstance(error, httpx.ProtocolError):
        return Failure.PROTOCOL
    return Failure.TRANSPORT
