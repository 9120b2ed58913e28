"""A self-signed certificate made with the ``openssl`` command, for the https tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["self_signed"]


def self_signed(folder: Path, common_name: str, alt_name: str) -> tuple[Path, Path]:
    """``(key, cert)`` PEM files in ``folder``: a certificate (its own CA) for
    ``common_name`` with the subjectAltName ``alt_name`` (``DNS:host`` or ``IP:addr``),
    valid for a day."""
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", f"/CN={common_name}"),
            *("-addext", f"subjectAltName={alt_name}"),
        ],
        check=True,
        capture_output=True,
    )
    return key, cert
