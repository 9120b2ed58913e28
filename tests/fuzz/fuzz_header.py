"""Fuzz target (atheris): the ``Service-Signature`` parser and ``verify``.

Run: ``python tests/fuzz/fuzz_header.py -max_total_time=60 WORK_DIR tests/fuzz/corpus/header``
(libFuzzer writes new inputs into the first directory; ``tests/fuzz/run.sh`` passes a
scratch one so the committed seed corpus stays as it is).

The property: for any bytes, ``parse_signature_header`` (given ``bytes`` and the same
value as a latin-1 ``str``, as WSGI servers pass it) returns a header whose fields
check out or raises :class:`SignatureFormatError`; ``verify`` of the fuzz input as the
header raises nothing but a :class:`SignatureError`; and a correctly signed header
whose ``o`` is the input verifies unless ``sign`` refused that ``o``. Any other
exception is a crash.
"""

from __future__ import annotations

import contextlib
import sys

import atheris

with atheris.instrument_imports():
    from service_webhooks._credentials import Secret
    from service_webhooks._exceptions import SignatureError, SignatureFormatError
    from service_webhooks._signing import parse_signature_header, sign, verify

SECRETS = [Secret("whsec-fuzz-0123456789abcdef")]
NOW = 1_760_000_000


def check(data: bytes) -> None:
    for value in (data, data.decode("latin-1")):
        try:
            parsed = parse_signature_header(value)
        except SignatureFormatError:
            continue
        assert parsed.organization_id, parsed
        assert parsed.organization_id.isprintable(), parsed
        assert "," not in parsed.organization_id, parsed
        assert parsed.timestamp == int(parsed.timestamp_text), parsed
        assert len(parsed.timestamp_text) <= 12, parsed
    with contextlib.suppress(SignatureError):
        verify(b"{}", data, SECRETS, now=NOW)
    organization = data[:64].decode("latin-1")
    try:
        header = sign(data, SECRETS[0], organization, timestamp=NOW)
    except SignatureFormatError:
        return
    assert verify(data, header, SECRETS, now=NOW).organization_id == organization


def main() -> None:
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
