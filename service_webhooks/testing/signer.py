"""Sign deliveries in your tests exactly as the service does (spec §5.2, §6.1).

::

    signer = Signer("whsec-...", organization_id="o-1")
    body, headers = signer.delivery("note.created", {"id": "n-1", "author": "a@b.c", "text": "hi"})
    response = client.post("/webhooks", content=body, headers=headers)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..credentials import Secret, SecretLike
from ..signing import SIGNATURE_HEADER, sign

__all__ = ["CONTENT_TYPE", "Signer"]

CONTENT_TYPE = "application/json; charset=utf-8"
"""The delivery ``Content-Type`` (spec §6.1)."""


@dataclass(frozen=True)
class Signer:
    """Builds signed delivery requests.

    Attributes:
        secret: The endpoint secret the receiver under test is configured with.
        organization_id: The ``o`` value to sign as.
    """

    secret: Secret | SecretLike
    organization_id: str = "o-TEST-na1"

    def __repr__(self) -> str:
        return f"Signer(secret=<redacted>, organization_id={self.organization_id!r})"

    def headers(self, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
        """``Content-Type`` and ``Service-Signature`` headers for ``body`` (signed now
        unless ``timestamp``, Unix seconds, is given)."""
        signature = sign(body, self.secret, self.organization_id, timestamp=timestamp)
        return {"Content-Type": CONTENT_TYPE, SIGNATURE_HEADER: signature}

    def delivery(
        self, event_name: str, data: Any, *, version: int = 1, timestamp: int | None = None
    ) -> tuple[bytes, dict[str, str]]:
        """Encode an envelope (spec §2.7) and sign it: returns ``(body, headers)``."""
        body = json.dumps(
            {"eventName": event_name, "version": version, "data": data}, separators=(",", ":")
        ).encode()
        return body, self.headers(body, timestamp=timestamp)
