"""Test kit: sign deliveries like the service, and a pytest plugin (``webhook_signer``)."""

from .signer import CONTENT_TYPE, Signer

__all__ = ["CONTENT_TYPE", "Signer"]
