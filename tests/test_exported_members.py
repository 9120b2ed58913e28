"""The public surface: each public module's ``__all__`` (docs/architecture.md, "Public surface").

Everything a user may import is named in the ``__all__`` of ``service_webhooks`` or of one
of the documented sub-packages; ``_``-prefixed modules and names are private. The names of
the two most used modules are pinned below, so adding, renaming or dropping one is a
deliberate change of this file (and a CHANGELOG line), never an accident.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

PUBLIC_MODULES = [
    "service_webhooks",
    "service_webhooks.stores",
    "service_webhooks.inbox",
    "service_webhooks.dashboard",
    "service_webhooks.adapters.asgi",
    "service_webhooks.adapters.flask",
    "service_webhooks.adapters.flask_cli",
    "service_webhooks.adapters.django",
    "service_webhooks.testing",
    "service_webhooks.api",
    "service_webhooks.delivery",
    "service_webhooks.handoff",
    "service_webhooks.observability",
]

TOP_LEVEL = [
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

STORES = [
    "MIN_RETENTION",
    "ClaimState",
    "IdempotencyStore",
    "MemoryStore",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "SyncStore",
    "redact_url",
    "store_from_env",
    "store_from_url",
]


def _ruff_order(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps ``__all__`` in: CONSTANTS, then Classes, then the rest."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _public(name: str) -> ModuleType:
    return importlib.import_module(name)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_without_duplicates(name: str) -> None:
    exported = list(_public(name).__all__)
    assert exported, f"{name}.__all__ is empty"
    assert exported == sorted(exported, key=_ruff_order)
    assert len(set(exported)) == len(exported)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_exported_name_resolves(name: str) -> None:
    module = _public(name)
    missing = [member for member in module.__all__ if not hasattr(module, member)]
    assert missing == []


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_dir_lists_every_exported_name(name: str) -> None:
    module = _public(name)
    assert [member for member in module.__all__ if member not in dir(module)] == []


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_no_private_name_is_exported(name: str) -> None:
    exported = _public(name).__all__
    assert [member for member in exported if member.startswith("_") and member[:2] != "__"] == []


def test_the_top_level_names_are_pinned() -> None:
    import service_webhooks

    assert service_webhooks.__all__ == TOP_LEVEL


def test_the_store_names_are_pinned() -> None:
    from service_webhooks import stores

    assert stores.__all__ == STORES


INBOX = [
    "DEFAULT_INBOX_RETENTION",
    "Inbox",
    "InboxPage",
    "InboxQuery",
    "MemoryInbox",
    "PostgresInbox",
    "ReceivedDelivery",
    "Replay",
    "SQLiteInbox",
    "SyncInbox",
    "inbox_from_url",
]


def test_the_inbox_names_are_pinned() -> None:
    from service_webhooks import inbox

    assert inbox.__all__ == INBOX


def test_every_top_level_store_name_is_the_stores_one() -> None:
    import service_webhooks
    from service_webhooks import stores

    shared = set(TOP_LEVEL) & set(STORES)
    assert shared == {"ClaimState", "IdempotencyStore", "MemoryStore", "SQLiteStore", "SyncStore"}
    for member in shared:
        assert getattr(service_webhooks, member) is getattr(stores, member)
