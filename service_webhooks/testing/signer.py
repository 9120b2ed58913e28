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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from .._credentials import Secret, SecretsConfig, as_resolver, check_organization_id
from .._envelope import CONTENT_TYPE, encode_json
from .._exceptions import ConfigurationError
from .._signing import SIGNATURE_HEADER, sign

__all__ = ["CONTENT_TYPE", "DEFAULT_ORGANIZATION_ID", "Signer"]

"""The delivery ``Content-Type`` (spec §6.1)."""

DEFAULT_ORGANIZATION_ID = "o-TEST-na1"
"""The organization ID (``o``) a :class:`Signer` and the pytest plugin sign as by default."""


@dataclass(frozen=True)
class Signer:
    """Builds signed delivery requests.

    Attributes:
        secret: What the receiver under test is configured with, in any form
            ``WebhookReceiver(secrets=...)`` accepts (spec §5.2): a ``str`` or
            ``bytes`` secret, a rotation list (newest first), a mapping
            ``{organization ID: secret(s)}`` or a callable ``organization_id ->
            secret(s) or None``. The signer signs as the service does, with one secret:
            the newest (first) one for ``organization_id``, held as a
            :class:`~service_webhooks.Secret` (bytes, redacted ``repr``).
        organization_id: The ``o`` value to sign as.

    Raises:
        ConfigurationError: No secret (``None``, empty), a configuration the receiver
            would refuse too, one that holds no secret for ``organization_id`` (the
            message names it), or an ``organization_id`` no header can carry (empty,
            not printable ASCII, or holding ``,``).
    """

    secret: Secret  # given as any SecretsConfig; __post_init__ resolves it
    organization_id: str = DEFAULT_ORGANIZATION_ID
    _secrets: SecretsConfig = field(init=False, repr=False, compare=False)

    if TYPE_CHECKING:  # what checkers see: the field is given in any form, read as a Secret

        def __init__(
            self, secret: SecretsConfig, organization_id: str = DEFAULT_ORGANIZATION_ID
        ) -> None: ...

    def __post_init__(self) -> None:
        check_organization_id(self.organization_id)  # sign() would refuse it later
        secret = _newest_secret(self.secret, self.organization_id)  # still as given
        if secret is None:
            raise ConfigurationError(
                f"the secrets hold no secret for organization {self.organization_id!r}: sign "
                "as one of their organizations (Signer(..., organization_id=...), or override "
                "the webhook_organization_id fixture)"
            )
        object.__setattr__(self, "_secrets", self.secret)
        object.__setattr__(self, "secret", secret)

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

    def for_organization(self, organization_id: str) -> Signer:
        """The signer of the same secrets configuration signing as ``organization_id``:
        with a mapping or a callable, that organization's newest secret; for an
        organization they hold none for, this signer's secret (the receiver answers such
        a delivery 401 ``unknown_organization``, as one from the service).

        Raises:
            ConfigurationError: ``organization_id`` is one no header can carry.
        """
        check_organization_id(organization_id)
        found = _newest_secret(self._secrets, organization_id)
        signer = Signer(self.secret if found is None else found, organization_id=organization_id)
        object.__setattr__(signer, "_secrets", self._secrets)
        return signer

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


_FORMS = (
    "a str or bytes secret, a rotation list (newest first), an {organization ID: "
    "secret(s)} mapping or a callable, as WebhookReceiver(secrets=...) takes"
)


def _newest_secret(secrets: object, organization_id: str) -> Secret | None:
    """The secret the service signs with for ``organization_id``: the first (newest) of
    those ``secrets`` holds for it (spec §5.2); ``None`` when they hold none for it.

    Raises:
        ConfigurationError: ``secrets`` is missing or empty, or a form a receiver refuses.
    """
    if isinstance(secrets, Secret):
        return secrets
    if isinstance(secrets, (str, bytes)) and secrets:
        return Secret(secrets)
    shaped = isinstance(secrets, (Sequence, Mapping)) or callable(secrets)
    if not shaped or not secrets:  # None (an unset setting), "", [], {}, a number
        what = type(secrets).__name__ if secrets is not None else "None"
        empty = "an empty " if shaped else ""
        raise ConfigurationError(f"Signer needs {_FORMS}, not {empty}{what}")
    found = as_resolver(cast("SecretsConfig", secrets))(organization_id)
    return found[0] if found else None


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
        return encode_json(fields)
    except TypeError as error:
        raise TypeError(f"event data is not JSON-encodable: {error}") from None
