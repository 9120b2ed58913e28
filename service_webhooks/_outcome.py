"""The result of handling one delivery, and the one table from result to HTTP status.

What the service does with each status is fixed by spec §3.3 and §7: 2xx is success;
500-599, 302, 303, 307 and 429 are retried; every other status is a permanent failure.
The receiver therefore answers (docs/status-codes.md holds the same table):

====================================================  ======  ===========================
situation                                             status  reason
====================================================  ======  ===========================
processed                                             200     ``processed``
already processed (a duplicate)                       200     ``duplicate``
no handler for this event (default policy)            200     ``unhandled``
header missing or malformed                           401     ``format``
signature wrong                                       401     ``signature``
timestamp beyond the tolerance                        401     ``timestamp``
no secret for the organization                        401     ``unknown_organization``
body not a valid envelope                             400     ``malformed_envelope``
body over the size limit                              413     ``payload_too_large``
method other than POST                                405     ``method_not_allowed``
same delivery in flight elsewhere                     503     ``in_flight`` + Retry-After
idempotency store or inbox unreachable                503     ``store_unavailable`` + R-A
the ``secrets=`` callable raised                      503     ``secrets_unavailable`` + R-A
the ``secrets=`` callable returned no valid secret    500     ``configuration``
a handler raised                                      500     ``handler_failed``
a handler raised :class:`RetryLater`                  503     ``retry_later`` + R-A
the Celery broker refused the event (hand-off)        503     ``handoff_failed`` + R-A
a handler raised :class:`Unprocessable`               422*    ``unprocessable``
the ``idempotency_key=`` function failed (a bug)      500     ``configuration``
====================================================  ======  ===========================

(*) or the 4xx the handler chose. Never 3xx: a redirect is always a bug here. Every 503
carries ``Retry-After: 60`` (R-A), and a 405 carries ``Allow: POST``.
Every answer carries ``{"status": …, "reason": …}`` as a JSON body, except the 200s of a
receiver built with ``success_body=False``, which carry none.
Adapters write an :class:`Outcome` as it is; they never branch on its status.

Every answer is also described by a :class:`DeliveryRecord` (outcome, event, timings)
handed to the receiver's log line and to its observers (``WebhookReceiver.on_outcome``).
"""

from __future__ import annotations

import msgspec

from ._exceptions import MethodNotAllowedError, WebhookError

__all__ = ["RETRY_AFTER_SECONDS", "DeliveryRecord", "Outcome", "outcome_for_error"]

RETRY_AFTER_SECONDS = 60
"""``Retry-After`` sent with 503 answers: the service's shortest retry delay (spec §3.3).

The service does not shorten its backoff for it; it is there for humans and proxies.
"""


class Outcome(msgspec.Struct, frozen=True):
    """How a receiver answers one delivery.

    Attributes:
        status: The HTTP status code.
        reason: A stable snake_case code (see the table in this module).
        headers: Extra response headers as ``(name, value)`` pairs of ``str``, to
            write as they are after ``Content-Type`` (:attr:`content_type`) and the
            ``Content-Length`` of :attr:`body`: ``("Retry-After", "60")`` (seconds) on
            every 503, ``("Allow", "POST")`` on the 405, none otherwise.
        event_name: ``eventName`` when the envelope was decoded (on a 400 too, when
            only ``data`` did not fit the event's model), else ``None``.
        organization_id: ``o`` when the signature was verified, else ``None``.
        empty_body: Answer with no body (``Content-Length: 0``): a success of a
            receiver built with ``success_body=False``. Never set on a refusal.
    """

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...] = ()
    event_name: str | None = None
    organization_id: str | None = None
    empty_body: bool = False

    @property
    def ok(self) -> bool:
        """Whether the service will count this answer as a success (2xx)."""
        return 200 <= self.status <= 299

    @property
    def body(self) -> bytes:
        """A small JSON body for humans, ``b""`` when :attr:`empty_body`; the service
        ignores it (spec §6.1) and shows it in its audit log (spec §6.3)."""
        if self.empty_body:
            return b""
        key = (self.status, self.reason)
        body = _BODIES.get(key)
        if body is None:
            if self.reason.isascii() and self.reason.isidentifier():  # every reason of ours
                body = b'{"status":%d,"reason":"%s"}' % (self.status, self.reason.encode())
            else:  # a subclass's own reason (a quote, an accent): escaped, still JSON
                body = msgspec.json.encode({"status": self.status, "reason": self.reason})
            if len(_BODIES) < 256:
                _BODIES[key] = body
        return body

    @property
    def content_type(self) -> str:
        """The ``Content-Type`` of :attr:`body`."""
        return "application/json"


class DeliveryRecord(msgspec.Struct, frozen=True):
    """What happened to one delivery, for logs and metrics; immutable.

    Built only when someone listens (an observer, or the ``service_webhooks`` logger
    enabled at INFO). It never holds the body, the signature or a secret.

    Attributes:
        outcome: The answer sent (status, reason, headers, event name, organization).
        duration: Seconds from the start of ``process``/``aprocess`` (or ``precheck``)
            to the answer, measured with :func:`time.perf_counter`.
        event_version: The envelope's ``version`` once decoded, else ``None``.
        key_prefix: The first 12 characters of the idempotency key once computed
            (enough to find the delivery in the store, too short to be the key),
            else ``None``.
        handler_duration: Seconds spent in the handlers, ``None`` when none ran
            (rejected, duplicate, in flight, unhandled, store down before the claim).
        detail: Why a request was refused (the library's own error message, never a
            secret), else ``""``.
        error_type: The class name of the exception behind an answer that was not the
            request's fault: a handler's exception, or the store's failure, else ``None``.
    """

    outcome: Outcome
    duration: float
    event_version: int | None = None
    key_prefix: str | None = None
    handler_duration: float | None = None
    detail: str = ""
    error_type: str | None = None

    @property
    def status(self) -> int:
        """The HTTP status answered (``outcome.status``)."""
        return self.outcome.status

    @property
    def reason(self) -> str:
        """The stable snake_case reason (``outcome.reason``, see the module's table)."""
        return self.outcome.reason

    @property
    def event_name(self) -> str | None:
        """``eventName`` when the envelope was decoded, else ``None``."""
        return self.outcome.event_name

    @property
    def organization_id(self) -> str | None:
        """``o`` when the signature was verified, else ``None``."""
        return self.outcome.organization_id


_BODIES: dict[tuple[int, str], bytes] = {}
_RETRY_AFTER = (("Retry-After", str(RETRY_AFTER_SECONDS)),)
_ALLOW_POST = (("Allow", "POST"),)


def outcome_for_error(error: WebhookError) -> Outcome:
    """Map one of the library's errors to the answer (status from the error's class)."""
    headers: tuple[tuple[str, str], ...] = ()
    if error.status == 503:
        headers = _RETRY_AFTER
    elif isinstance(error, MethodNotAllowedError):
        headers = _ALLOW_POST
    return Outcome(error.status, error.reason, headers)


PROCESSED = Outcome(200, "processed")
IN_FLIGHT = Outcome(503, "in_flight", _RETRY_AFTER)
HANDLER_FAILED = Outcome(500, "handler_failed")
