"""The library's exceptions: one root, each class carrying its HTTP status and reason.

Every failure path in the core ends in one of these; no ``ValueError``,
``binascii.Error`` or ``UnicodeDecodeError`` escapes. The status lives on the class
and :mod:`service_webhooks._outcome` is the one place that maps an error to a response.
No exception message ever contains a secret.

::

    WebhookError                       (status 500, reason "error")
    ├── ConfigurationError             bad arguments at set-up time; never a request's fault
    ├── SignatureError                 401: the delivery is not authentic (spec §5.2)
    │   ├── SignatureFormatError       reason "format": header missing or malformed
    │   ├── SignatureMismatchError     reason "signature": no accepted secret gives this v
    │   ├── TimestampError             reason "timestamp": |floor(now) - t| > tolerance
    │   └── UnknownOrganizationError   reason "unknown_organization": no secret for o
    ├── EnvelopeError                  400, reason "malformed_envelope" (spec §2.7)
    │   └── PayloadTooLargeError       413, reason "payload_too_large" (spec §6.1, 1 MiB)
    ├── MethodNotAllowedError          405, reason "method_not_allowed" (spec §6.1: POST)
    ├── StoreError                     503, reason "store_unavailable": fail closed
    ├── SecretsUnavailableError        503, reason "secrets_unavailable": the secrets
    │                                  callable raised; the service retries
    ├── RetryLater                     503, reason "retry_later": raised by a handler (or a
    │                                  hand-off) to have the service retry the event later
    └── Unprocessable                  422 by default: raised by a handler for an event it
                                       can never process; the service will not retry it
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "EnvelopeError",
    "MethodNotAllowedError",
    "PayloadTooLargeError",
    "RetryLater",
    "SecretsUnavailableError",
    "SignatureError",
    "SignatureFormatError",
    "SignatureMismatchError",
    "StoreError",
    "TimestampError",
    "UnknownOrganizationError",
    "Unprocessable",
    "WebhookError",
]


class WebhookError(Exception):
    """Root of every error this library raises.

    Attributes:
        status: The HTTP status a receiver answers with for this error.
        reason: A stable snake_case code, safe to log and to show to the sender.
    """

    status: int = 500
    reason: str = "error"


class ConfigurationError(WebhookError, ValueError):
    """Invalid configuration given to a constructor (never caused by a request)."""

    reason = "configuration"


class SignatureError(WebhookError):
    """The delivery is not authentic; answered with 401 (spec §5.2, §7)."""

    status = 401
    reason = "signature"


class SignatureFormatError(SignatureError):
    """``Service-Signature`` is missing or not exactly the pairs ``o``, ``t``, ``v``."""

    reason = "format"


class SignatureMismatchError(SignatureError):
    """No accepted secret produces the signature ``v`` over ``{body}:{o}:{t}``."""

    reason = "signature"


class TimestampError(SignatureError):
    """The signed time ``t`` differs from now by more than the tolerance (replay guard)."""

    reason = "timestamp"


class UnknownOrganizationError(SignatureError):
    """No secret is configured for the organization ``o`` named in the header."""

    reason = "unknown_organization"


class EnvelopeError(WebhookError):
    """The authenticated body is not a valid envelope (spec §2.7); answered with 400.

    Attributes:
        event_name: ``eventName`` when the envelope itself decoded and only ``data``
            could not be decoded, else ``None``.
        version: ``version`` in that case, else ``None``.
        model_mismatch: ``data`` is JSON this library reads but does not fit the typed
            model of a known event (a schema drift), rather than JSON it cannot read (a
            number out of range, say).
    """

    status = 400
    reason = "malformed_envelope"

    def __init__(
        self,
        message: str = "",
        *,
        event_name: str | None = None,
        version: int | None = None,
        model_mismatch: bool = False,
    ) -> None:
        super().__init__(message)
        self.event_name = event_name
        self.version = version
        self.model_mismatch = model_mismatch


class PayloadTooLargeError(EnvelopeError):
    """The body exceeds the size limit (spec §2.7: at most 1 MiB); answered with 413."""

    status = 413
    reason = "payload_too_large"


class MethodNotAllowedError(WebhookError):
    """Deliveries are POSTs (spec §6.1); any other method is answered with 405."""

    status = 405
    reason = "method_not_allowed"


class StoreError(WebhookError):
    """The idempotency store failed or is unreachable; answered with 503 so the
    service retries (fail closed: an event is never acknowledged without a record)."""

    status = 503
    reason = "store_unavailable"


class SecretsUnavailableError(WebhookError):
    """The ``secrets=`` callable raised: the delivery cannot be authenticated now.

    Answered 503 with ``Retry-After`` so the service retries (spec §3.3, §7): a
    failing secrets lookup is an outage of the receiver, not a forged request.
    """

    status = 503
    reason = "secrets_unavailable"


class RetryLater(WebhookError):
    """Raised by a handler to have the service deliver the event again later.

    The receiver releases the claim and answers 503 with ``Retry-After`` (spec §3.3,
    §7: 5xx is a temporary failure), without logging a traceback: use it for an
    expected, temporary condition (a downstream system is busy, a task queue refused
    the event). Any other exception a handler raises is answered 500, also retried.
    """

    status = 503
    reason = "retry_later"


class Unprocessable(WebhookError):
    """Raised by a handler for an event it can never process.

    The receiver answers with ``status`` (422 by default, any 4xx but 429 allowed),
    which the service treats as a permanent failure and does not retry (spec §7).
    Raise it only when a retry cannot succeed; for anything transient, let the
    exception propagate (answered 500, retried).

    Args:
        message: Shown in logs; keep secrets and personal data out of it.
        status: A 4xx status other than 429 (the service retries 429, spec §7), as an
            ``int`` (an :class:`http.HTTPStatus` too).

    Raises:
        ConfigurationError: ``status`` is not an ``int`` (a ``float`` such as ``422.0``,
            a ``bool``, a ``str``), not 4xx, or 429.
    """

    status = 422
    reason = "unprocessable"

    def __init__(self, message: str = "event cannot be processed", *, status: int = 422) -> None:
        if isinstance(status, bool) or not isinstance(status, int):
            raise ConfigurationError(
                f"Unprocessable status must be an int, a 4xx but 429, not {type(status).__name__}"
            )
        if not 400 <= status <= 499 or status == 429:
            raise ConfigurationError(f"Unprocessable status must be a 4xx but 429, got {status}")
        super().__init__(message)
        self.status = int(status)  # an HTTPStatus member: the plain number
