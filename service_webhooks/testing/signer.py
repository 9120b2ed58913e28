"""Sign deliveries in your tests exactly as the service does (spec §5.2, §6.1).

::

    signer = Signer("whsec-...", organization_id="o-1")
    body, headers = signer.delivery("note.created", {"id": "n-1", "author": "a@b.c", "text": "hi"})
    response = client.post("/webhooks", content=body, headers=headers)

The signature comes from :func:`service_webhooks._signing.sign`, the function the
delivery emulator's sender (:mod:`service_webhooks.delivery.sender`) signs with, so a
test delivery and an emulated one are byte-for-byte alike for the same ``t``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from .._credentials import Secret, SecretLike, check_organization_id
from .._envelope import CONTENT_TYPE
from .._signing import SIGNATURE_HEADER, sign

__all__ = ["CONTENT_TYPE", "Signer"]

"""The delivery ``Content-Type`` (spec §6.1)."""


@dataclass(frozen=True)
class Signer:
    """Builds signed delivery requests.

    Attributes:
        secret: The endpoint secret the receiver under test is configured with; a
            ``str`` or ``bytes`` is held as a :class:`~service_webhooks.Secret` (bytes,
            redacted ``repr``). Pass it to ``WebhookReceiver(secrets=...)`` as is.
        organization_id: The ``o`` value to sign as.

    Raises:
        ConfigurationError: An empty secret, or an ``organization_id`` no header can
            carry (empty, not printable ASCII, or holding ``,``).
    """

    secret: Secret | SecretLike
    organization_id: str = "o-TEST-na1"

    def __post_init__(self) -> None:
        check_organization_id(self.organization_id)  # sign() would refuse it later
        if not isinstance(self.secret, Secret):
            object.__setattr__(self, "secret", Secret(self.secret))

    def __repr__(self) -> str:
        return f"Signer(secret=<redacted>, organization_id={self.organization_id!r})"

    def headers(self, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
        """``Content-Type`` and ``Service-Signature`` headers for ``body`` (signed now
        unless ``timestamp``, Unix seconds, is given).

        Raises:
            TypeError: ``body`` is not ``bytes`` (a ``str`` must be encoded first: the
                signature covers the exact bytes sent).
        """
        signature = sign(body, self.secret, self.organization_id, timestamp=timestamp)
        return {"Content-Type": CONTENT_TYPE, SIGNATURE_HEADER: signature}

    def delivery(
        self, event_name: str, data: Any, *, version: int = 1, timestamp: int | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """Encode an envelope (spec §2.7) and sign it: returns ``(body, headers)``."""
        return self.sign_body(envelope(event_name, data, version=version), timestamp=timestamp)

    def sign_body(
        self, body: bytes, *, timestamp: int | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """``(body, headers)`` for raw ``body`` bytes (a retry, or a malformed body).

        Raises:
            TypeError: ``body`` is not ``bytes``.
        """
        return body, self.headers(body, timestamp=timestamp)


DELIVERY_ID_FIELD = "testDeliveryId"
"""The extra top-level envelope field the test kit's deliverers add: a random value per
call, so that each delivery has its own body and so its own idempotency key. Receivers
ignore unknown fields (spec §9); the service never sends it."""


def envelope(
    event_name: str, data: Any, *, version: int = 1, delivery_id: str | None = None
) -> bytes:
    """The compact JSON envelope ``{"eventName", "version", "data"}`` (spec §2.7).

    Encoded as the delivery emulator encodes it
    (:func:`service_webhooks.delivery.encode_envelope`): compact UTF-8 JSON, non-ASCII
    text as raw UTF-8 bytes (not ``\\u`` escapes), so the same arguments give the same
    bytes. Unlike it, nothing is checked: an empty ``eventName``, a non-``int``
    ``version`` or an oversized body are sent as given, to test the receiver's refusals.

    ``delivery_id``, when given, is added as the top-level :data:`DELIVERY_ID_FIELD`.

    Raises:
        TypeError: ``data`` holds a value JSON cannot encode.
    """
    fields: dict[str, Any] = {"eventName": event_name, "version": version, "data": data}
    if delivery_id is not None:
        fields[DELIVERY_ID_FIELD] = delivery_id
    try:
        return msgspec.json.encode(fields)
    except (TypeError, msgspec.EncodeError) as error:
        raise TypeError(f"event data is not JSON-encodable: {error}") from None
