"""Fuzz target (atheris): the envelope decoder, alone and behind the receiver.

Run: ``python tests/fuzz/fuzz_envelope.py -max_total_time=60 WORK_DIR tests/fuzz/corpus/envelope``
(libFuzzer writes new inputs into the first directory; ``tests/fuzz/run.sh`` passes a
scratch one so the committed seed corpus stays as it is).

The property: for any bytes, ``decode_envelope`` returns an envelope with a non-empty
``str`` event name and an ``int`` (not ``bool``) version, or raises
:class:`EnvelopeError` (:class:`PayloadTooLargeError` exactly when the body is over the
limit); and an authentic delivery of those bytes through ``WebhookReceiver.process``
answers 200, 400 or 413, never raises, never 5xx. Any other exception is a crash.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from service_webhooks import MemoryStore, WebhookReceiver, sign
    from service_webhooks._envelope import decode_envelope
    from service_webhooks._exceptions import EnvelopeError, PayloadTooLargeError

SECRET = "whsec-fuzz-0123456789abcdef"
NOW = 1_760_000_000
LIMIT = 4096  # a small cap so the fuzzer reaches the 413 path too

receiver = WebhookReceiver(SECRET, store=MemoryStore(), clock=lambda: NOW, max_body_size=LIMIT)
receiver.on("note.created", lambda event: None)
receiver.on("segment.trend.alert", lambda event: None)


def check(data: bytes) -> None:
    try:
        envelope = decode_envelope(data, max_size=LIMIT)
    except PayloadTooLargeError:
        assert len(data) > LIMIT
    except EnvelopeError:
        assert len(data) <= LIMIT
    else:
        assert isinstance(envelope.event_name, str), envelope
        assert envelope.event_name, envelope
        assert type(envelope.version) is int, envelope
    outcome = receiver.process(data, sign(data, SECRET, "o-fuzz", timestamp=NOW))
    assert outcome.status in (200, 400, 413), outcome


def main() -> None:
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
