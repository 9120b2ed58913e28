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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    __version__: str
    from ._credentials import (
        Secret,
        SecretResolver,
        SecretsConfig,
        as_resolver,
        generate_secret,
    )
    from ._dispatch import (
        ErrorHook,
        Handler,
        Router,
    )
    from ._envelope import (
        CONTENT_TYPE,
        MAX_BODY_SIZE,
        Envelope,
        decode_envelope,
        encode_envelope,
    )
    from ._events import (
        EVENT_MODELS,
        Duration,
        Event,
        NoteCreated,
        SegmentTrendAlert,
    )
    from ._exceptions import (
        ConfigurationError,
        EnvelopeError,
        MethodNotAllowedError,
        PayloadTooLargeError,
        RetryLater,
        SecretsUnavailableError,
        SignatureError,
        SignatureFormatError,
        SignatureMismatchError,
        StoreError,
        TimestampError,
        UnknownOrganizationError,
        Unprocessable,
        WebhookError,
    )
    from ._idempotency import (
        default_idempotency_key,
    )
    from ._outcome import (
        DeliveryRecord,
        Outcome,
    )
    from ._receiver import (
        SETTINGS,
        AsyncBodyReader,
        BodyReader,
        Headers,
        UnitOfWork,
        WebhookReceiver,
    )
    from ._reporting import (
        LOG_FIELDS,
        DeliveryTracer,
        OutcomeObserver,
    )
    from ._signing import (
        DEFAULT_TOLERANCE,
        SIGNATURE_HEADER,
        SignatureHeader,
        parse_signature_header,
        sign,
        verify,
    )
    from .stores import (
        ClaimState,
        IdempotencyStore,
        MemoryStore,
        SQLiteStore,
        SyncStore,
    )

# Public name -> the module defining it. Loaded on first use (PEP 562), so importing
# the package (or its pytest plugin) stays cheap and imports no optional dependency.
_EXPORTS: dict[str, str] = {
    "DEFAULT_TOLERANCE": "._signing",
    "EVENT_MODELS": "._events",
    "MAX_BODY_SIZE": "._envelope",
    "SIGNATURE_HEADER": "._signing",
    "ClaimState": ".stores",
    "ConfigurationError": "._exceptions",
    "Duration": "._events",
    "Envelope": "._envelope",
    "EnvelopeError": "._exceptions",
    "ErrorHook": "._dispatch",
    "Event": "._events",
    "Handler": "._dispatch",
    "IdempotencyStore": ".stores",
    "MemoryStore": ".stores",
    "MethodNotAllowedError": "._exceptions",
    "NoteCreated": "._events",
    "Outcome": "._outcome",
    "DeliveryRecord": "._outcome",
    "LOG_FIELDS": "._reporting",
    "DeliveryTracer": "._reporting",
    "OutcomeObserver": "._reporting",
    "PayloadTooLargeError": "._exceptions",
    "RetryLater": "._exceptions",
    "SecretsUnavailableError": "._exceptions",
    "AsyncBodyReader": "._receiver",
    "BodyReader": "._receiver",
    "Headers": "._receiver",
    "UnitOfWork": "._receiver",
    "SETTINGS": "._receiver",
    "CONTENT_TYPE": "._envelope",
    "encode_envelope": "._envelope",
    "Router": "._dispatch",
    "SQLiteStore": ".stores",
    "Secret": "._credentials",
    "SecretResolver": "._credentials",
    "SecretsConfig": "._credentials",
    "SegmentTrendAlert": "._events",
    "SignatureError": "._exceptions",
    "SignatureFormatError": "._exceptions",
    "SignatureHeader": "._signing",
    "SignatureMismatchError": "._exceptions",
    "StoreError": "._exceptions",
    "SyncStore": ".stores",
    "TimestampError": "._exceptions",
    "UnknownOrganizationError": "._exceptions",
    "Unprocessable": "._exceptions",
    "WebhookError": "._exceptions",
    "WebhookReceiver": "._receiver",
    "as_resolver": "._credentials",
    "decode_envelope": "._envelope",
    "default_idempotency_key": "._idempotency",
    "generate_secret": "._credentials",
    "parse_signature_header": "._signing",
    "sign": "._signing",
    "verify": "._signing",
}

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_TOLERANCE",
    "EVENT_MODELS",
    "LOG_FIELDS",
    "MAX_BODY_SIZE",
    "SETTINGS",
    "SIGNATURE_HEADER",
    "AsyncBodyReader",
    "BodyReader",
    "ClaimState",
    "ConfigurationError",
    "DeliveryRecord",
    "DeliveryTracer",
    "Duration",
    "Envelope",
    "EnvelopeError",
    "ErrorHook",
    "Event",
    "Handler",
    "Headers",
    "IdempotencyStore",
    "MemoryStore",
    "MethodNotAllowedError",
    "NoteCreated",
    "Outcome",
    "OutcomeObserver",
    "PayloadTooLargeError",
    "RetryLater",
    "Router",
    "SQLiteStore",
    "Secret",
    "SecretResolver",
    "SecretsConfig",
    "SecretsUnavailableError",
    "SegmentTrendAlert",
    "SignatureError",
    "SignatureFormatError",
    "SignatureHeader",
    "SignatureMismatchError",
    "StoreError",
    "SyncStore",
    "TimestampError",
    "UnitOfWork",
    "UnknownOrganizationError",
    "Unprocessable",
    "WebhookError",
    "WebhookReceiver",
    "__version__",
    "as_resolver",
    "decode_envelope",
    "default_idempotency_key",
    "encode_envelope",
    "generate_secret",
    "parse_signature_header",
    "sign",
    "verify",
]


def _version() -> str:
    """The installed distribution's version, read on first use: ``importlib.metadata``
    costs tens of milliseconds to import, more than the rest of the package."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("service-webhooks")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
        globals()[name] = value
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
