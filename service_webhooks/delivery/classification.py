"""Classify one delivery attempt: success, temporary failure or permanent failure.

The rule, from spec §3.3 and the table of spec §7:

=====================================================  ===========================
receiver response / what happened                      result
=====================================================  ===========================
status 200-299                                         success
status 500-599, 302, 303, 307, 429                     temporary failure (retried)
any other status (1xx, other 3xx, 4xx, >= 600)         permanent failure
no response within the 10 s deadline                   temporary failure
not transmitted: unresolvable or unreachable host,     temporary failure
refused connection, TLS not trusted, HTTP/HTTPS
mismatch, other transport problem
destination resolves to a reserved address             permanent failure (never
                                                       contacted)
=====================================================  ===========================

Redirects are never followed: a 302 is retried *at the same URL*, a 301 fails for good.
Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from enum import StrEnum

__all__ = [
    "RETRIED_STATUSES",
    "Failure",
    "Result",
    "classify_failure",
    "classify_status",
    "describe_status",
    "receiver_reason",
]

RETRIED_STATUSES = frozenset({302, 303, 307, 429})
"""Statuses outside 500-599 that the service retries (spec §7)."""


class Result(StrEnum):
    """The class of one attempt, as shown and filtered in the audit log (spec §6.3)."""

    SUCCESS = "success"
    TEMPORARY_FAILURE = "temporary_failure"
    PERMANENT_FAILURE = "permanent_failure"

    @property
    def failed(self) -> bool:
        """``True`` for both failure classes (what the notification rule counts)."""
        return self is not Result.SUCCESS


class Failure(StrEnum):
    """Why an attempt got no HTTP status (the "not transmitted" rows of spec §3.3)."""

    TIMEOUT = "timeout"
    """No complete response within the deadline (10 s, spec §8)."""
    REFUSED = "connection_refused"
    UNRESOLVABLE = "unresolvable_host"
    UNREACHABLE = "unreachable_host"
    TLS = "tls_error"
    """Untrusted or self-signed certificate, or a TLS handshake that failed."""
    PROTOCOL = "protocol_error"
    """The peer did not speak HTTP as expected, e.g. an HTTP/HTTPS mismatch."""
    TRANSPORT = "transport_error"
    """Any other problem sending the request or reading the response."""
    RESERVED_ADDRESS = "reserved_address"
    """The host resolves to a reserved address; nothing was sent (permanent)."""


def classify_status(status: int) -> Result:
    """Classify a receiver's HTTP status (spec §7).

    Args:
        status: The response status code (any integer; out-of-range values are
            permanent failures like any "other status").

    Returns:
        :attr:`Result.SUCCESS` for 200-299, :attr:`Result.TEMPORARY_FAILURE` for
        500-599 and 302, 303, 307, 429, otherwise :attr:`Result.PERMANENT_FAILURE`.
    """
    if 200 <= status <= 299:
        return Result.SUCCESS
    if 500 <= status <= 599 or status in RETRIED_STATUSES:
        return Result.TEMPORARY_FAILURE
    return Result.PERMANENT_FAILURE


def classify_failure(failure: Failure) -> Result:
    """Classify an attempt that produced no status (spec §3.3, §7 last row).

    Returns:
        :attr:`Result.PERMANENT_FAILURE` for :attr:`Failure.RESERVED_ADDRESS`,
        :attr:`Result.TEMPORARY_FAILURE` for every other failure.
    """
    if failure is Failure.RESERVED_ADDRESS:
        return Result.PERMANENT_FAILURE
    return Result.TEMPORARY_FAILURE


def describe_status(status: int) -> str:
    """A one-line description of a status for the audit log, e.g. ``"HTTP 429: retried"``."""
    result = classify_status(status)
    if result is Result.SUCCESS:
        return f"HTTP {status}: delivered"
    if result is Result.TEMPORARY_FAILURE:
        return f"HTTP {status}: temporary failure (retried within 24 h of the first attempt)"
    if 300 <= status <= 399:
        return f"HTTP {status}: permanent failure (redirects are not followed)"
    return f"HTTP {status}: permanent failure, not retried"


def receiver_reason(response: str) -> str | None:
    """The ``reason`` of a service-webhooks receiver's JSON answer (``processed``,
    ``duplicate``, ``in_flight``, ``signature``...), or ``None`` for another body. Never
    part of the classification (the service reads only the status): for what the
    emulator and the CLI say and wait for."""
    try:
        answer = json.loads(response)
    except ValueError:
        return None
    reason = answer.get("reason") if isinstance(answer, dict) else None
    return reason if isinstance(reason, str) and reason else None
