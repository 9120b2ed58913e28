"""service-webhooks: receive the service's webhooks safely.

Verify ``Service-Signature`` (spec §5.2), decode the versioned envelope (spec §2.7,
§9), deduplicate through an idempotency store (spec §6.1) and dispatch to your
handlers, answering with the status the service expects (spec §3.3, §7)::

    from service_webhooks import WebhookReceiver

    receiver = WebhookReceiver(secrets="whsec-...", store="sqlite:webhooks.sqlite3")

    @receiver.on("note.created")
    def note_created(event):
        print(event.data.author, event.data.text)

Mount it with :mod:`service_webhooks.adapters.asgi`, ``.flask`` or ``.django``.
"""

from importlib.metadata import PackageNotFoundError, version

from .credentials import Secret, SecretResolver, SecretsConfig, as_resolver, generate_secret
from .dispatch import ErrorHook, Handler, Router
from .envelope import MAX_BODY_SIZE, Envelope, decode_envelope
from .events import EVENT_MODELS, Duration, Event, NoteCreated, SegmentTrendAlert
from .exceptions import (
    ConfigurationError,
    EnvelopeError,
    MethodNotAllowedError,
    PayloadTooLargeError,
    SignatureError,
    SignatureFormatError,
    SignatureMismatchError,
    StoreError,
    TimestampError,
    UnknownOrganizationError,
    Unprocessable,
    WebhookError,
)
from .outcome import Outcome
from .receiver import WebhookReceiver, default_idempotency_key
from .signing import (
    DEFAULT_TOLERANCE,
    SIGNATURE_HEADER,
    SignatureHeader,
    parse_signature_header,
    sign,
    verify,
)
from .stores import ClaimState, IdempotencyStore, MemoryStore, SQLiteStore, SyncStore

try:
    __version__ = version("service-webhooks")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "DEFAULT_TOLERANCE",
    "EVENT_MODELS",
    "MAX_BODY_SIZE",
    "SIGNATURE_HEADER",
    "ClaimState",
    "ConfigurationError",
    "Duration",
    "Envelope",
    "EnvelopeError",
    "ErrorHook",
    "Event",
    "Handler",
    "IdempotencyStore",
    "MemoryStore",
    "MethodNotAllowedError",
    "NoteCreated",
    "Outcome",
    "PayloadTooLargeError",
    "Router",
    "SQLiteStore",
    "Secret",
    "SecretResolver",
    "SecretsConfig",
    "SegmentTrendAlert",
    "SignatureError",
    "SignatureFormatError",
    "SignatureHeader",
    "SignatureMismatchError",
    "StoreError",
    "SyncStore",
    "TimestampError",
    "UnknownOrganizationError",
    "Unprocessable",
    "WebhookError",
    "WebhookReceiver",
    "__version__",
    "as_resolver",
    "decode_envelope",
    "default_idempotency_key",
    "generate_secret",
    "parse_signature_header",
    "sign",
    "verify",
]
