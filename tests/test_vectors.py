"""Every case of the spec-derived vectors, loaded from tests/vectors/ (never restated here).

tests/vectors/ is a byte-identical copy of ../shared/vectors/, so a clone without
../shared passes on its own; when ../shared/vectors exists, the copy must equal it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from service_webhooks import (
    EnvelopeError,
    MemoryStore,
    PayloadTooLargeError,
    Secret,
    SignatureError,
    WebhookReceiver,
    decode_envelope,
    sign,
    verify,
)

HERE = Path(__file__).parent / "vectors"
SHARED = Path(__file__).parents[2] / "shared" / "vectors"


def _cases(name: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((HERE / name).read_text())["cases"]
    return cases


def _body(case: dict[str, Any]) -> bytes:
    if "body_b64" in case:
        return base64.b64decode(case["body_b64"])
    parts = case["body_parts"]
    return (
        base64.b64decode(parts["prefix_b64"])
        + parts["fill"].encode() * parts["count"]
        + base64.b64decode(parts["suffix_b64"])
    )


@pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/vectors beside this clone")
@pytest.mark.parametrize("name", ["signatures.json", "envelopes.json"])
def test_copy_equals_shared_vectors(name: str) -> None:
    assert (HERE / name).read_bytes() == (SHARED / name).read_bytes()


SIGNATURES = _cases("signatures.json")


@pytest.mark.parametrize("case", SIGNATURES, ids=[c["name"] for c in SIGNATURES])
def test_signature_vector(case: dict[str, Any]) -> None:
    secrets = [Secret(s) for s in case["secrets"]]
    body = _body(case)
    call = lambda: verify(  # noqa: E731
        body, case["header"], secrets, tolerance=case["tolerance_s"], now=case["now"]
    )
    if case["expect"] == "accept":
        assert call().timestamp_text in case["header"]
    else:
        with pytest.raises(SignatureError) as caught:
            call()
        assert caught.value.status == 401
        assert caught.value.reason == case["reason"]


@pytest.mark.parametrize("case", SIGNATURES, ids=[c["name"] for c in SIGNATURES])
def test_signature_vector_through_the_receiver(case: dict[str, Any]) -> None:
    receiver = WebhookReceiver(
        secrets=case["secrets"],
        tolerance=case["tolerance_s"],
        store=MemoryStore(),
        clock=lambda: case["now"],
    )
    receiver.on_any(lambda event: None)
    outcome = receiver.process(_body(case), case["header"])
    if case["expect"] == "reject":
        assert (outcome.status, outcome.reason) == (401, case["reason"])
    else:  # authentic; the envelope step then decides (non-UTF-8 and empty bodies: 400)
        assert outcome.status in (200, 400)
        assert outcome.reason in ("processed", "malformed_envelope")


ENVELOPES = _cases("envelopes.json")


@pytest.mark.parametrize("case", ENVELOPES, ids=[c["name"] for c in ENVELOPES])
def test_envelope_vector(case: dict[str, Any]) -> None:
    body = _body(case)
    if "size" in case:
        assert len(body) == case["size"]
    if case["expect"] == "ok":
        envelope = decode_envelope(body)
        assert (envelope.event_name, envelope.version) == (case["eventName"], case["version"])
    elif case["expect"] == "too_large":
        with pytest.raises(PayloadTooLargeError) as caught:
            decode_envelope(body)
        assert caught.value.status == 413
    else:
        with pytest.raises(EnvelopeError) as caught:
            decode_envelope(body)
        assert (caught.value.status, caught.value.reason) == (400, "malformed_envelope")


@pytest.mark.parametrize("case", ENVELOPES, ids=[c["name"] for c in ENVELOPES])
def test_envelope_vector_through_the_receiver(case: dict[str, Any]) -> None:
    receiver = WebhookReceiver(secrets="k" * 32, store=MemoryStore())
    seen: list[tuple[str, int]] = []
    receiver.on_any(lambda event: seen.append((event.name, event.version)))
    body = _body(case)
    outcome = receiver.process(body, sign(body, "k" * 32, "o-1"))
    expected = {"ok": 200, "malformed": 400, "too_large": 413}[case["expect"]]
    assert outcome.status == expected
    if expected == 200:
        assert seen == [(case["eventName"], case["version"])]
    else:
        assert seen == []
