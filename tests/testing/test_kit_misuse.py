"""The test kit against a user's mistakes and its own promises: header overrides in any
case, the emulator's envelope bytes, clear errors for a ``str`` body or a non-Signer."""

from __future__ import annotations

from typing import Any

import pytest

from service_webhooks import Secret, WebhookReceiver, sign, verify
from service_webhooks.delivery import encode_envelope
from service_webhooks.testing import AsyncDeliverer, Deliverer, Signer, envelope

NOTE = {"id": "n-\u00e9", "author": "ana@example.com", "text": "h\u00e9llo \u2713"}


def starlette_client(receiver: WebhookReceiver) -> Any:
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from service_webhooks.adapters.asgi import WebhookApp  # type: ignore[import-not-found,unused-ignore]

    return TestClient(Starlette(routes=[Route("/webhooks", WebhookApp(receiver))]))


def flask_client(receiver: WebhookReceiver) -> Any:
    from flask import Flask

    from service_webhooks.adapters.flask import webhook_blueprint  # type: ignore[import-not-found,unused-ignore]

    app = Flask("kit")
    app.register_blueprint(webhook_blueprint(receiver, url="/webhooks"))
    return app.test_client()


@pytest.mark.parametrize("name", ["service-signature", "SERVICE-SIGNATURE"])
@pytest.mark.parametrize("make_client", [starlette_client, flask_client])
def test_a_header_override_replaces_the_signed_header_in_any_case(
    name: str,
    make_client: Any,
    webhook_receiver: WebhookReceiver,
    webhook_signer: Signer,
    deliver_webhook: Deliverer,
) -> None:
    """Before, ``{**signed, **headers}`` kept both spellings: two ``Service-Signature``
    headers were sent (refused 401, or the override silently lost), not the override."""
    webhook_receiver.on("note.created", lambda event: None)
    body = envelope("note.created", NOTE)
    good = webhook_signer.headers(body)["Service-Signature"]
    # signed far in the past by the deliverer, overridden by a current signature
    response = deliver_webhook.post(
        make_client(webhook_receiver), "/webhooks", body, timestamp=1, headers={name: good}
    )
    assert response.status_code == 200


def test_a_lowercase_content_type_override_is_the_only_content_type(
    webhook_signer: Signer, deliver_webhook: Deliverer
) -> None:
    headers = deliver_webhook._sign(b"{}", None, None, {"content-type": "text/plain"})
    assert [k for k in headers if k.lower() == "content-type"] == ["content-type"]
    assert headers["content-type"] == "text/plain"
    assert "Service-Signature" in headers


def test_the_envelope_is_the_emulators_bytes() -> None:
    """Non-ASCII text as raw UTF-8, as ``delivery.encode_envelope`` sends it (before:
    ``json.dumps`` escaped it, ``\\u00e9``, and the docstring promised the same bytes)."""
    assert envelope("note.created", NOTE) == encode_envelope("note.created", NOTE)
    assert "h\u00e9llo \u2713".encode() in envelope("note.created", NOTE)
    body, _ = Signer("s").delivery("segment.trend.alert", {"duration": "DAILY"}, version=1)
    assert body == encode_envelope("segment.trend.alert", {"duration": "DAILY"})


def test_a_non_ascii_delivery_is_processed(
    webhook_receiver: WebhookReceiver, deliver_webhook: Deliverer
) -> None:
    seen: list[str] = []
    webhook_receiver.on("note.created", lambda event: seen.append(event.data.text))
    response = deliver_webhook(
        starlette_client(webhook_receiver), "/webhooks", "note.created", NOTE
    )
    assert response.status_code == 200
    assert seen == ["h\u00e9llo \u2713"]


def test_data_json_cannot_encode_is_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match="event data is not JSON-encodable"):
        envelope("note.created", {"id": object()})


@pytest.mark.parametrize("body", ["{}", bytearray(b"{}"), None])
def test_a_body_that_is_not_bytes_is_refused_clearly(
    body: Any, webhook_signer: Signer, deliver_webhook: Deliverer
) -> None:
    """Before: hashlib's "Strings must be encoded before hashing" from deep inside."""
    match = r"body must be the exact request body as bytes, not " + type(body).__name__
    with pytest.raises(TypeError, match=match):
        webhook_signer.sign_body(body)
    with pytest.raises(TypeError, match=match):
        deliver_webhook.post(object(), "/webhooks", body)


def test_a_str_body_gets_a_hint(webhook_signer: Signer) -> None:
    with pytest.raises(TypeError, match=r"a body you build: its \.encode\(\)"):
        webhook_signer.headers("{}")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"as bytes, not str: pass the raw bytes"):
        sign("{}", "s", "o-1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"as bytes, not str: pass the raw bytes"):
        verify("{}", sign(b"{}", "s", "o-1"), [Secret("s")])  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", [Deliverer, AsyncDeliverer])
@pytest.mark.parametrize("signer", ["whsec-secret", None])
def test_a_deliverer_needs_a_signer(cls: type[Deliverer | AsyncDeliverer], signer: Any) -> None:
    """Before: built anyway, then ``'str' object has no attribute 'headers'`` on use."""
    with pytest.raises(TypeError, match=rf"{cls.__name__} needs a Signer, not"):
        cls(signer)


@pytest.mark.parametrize("headers", [[("X-Trace", "1")], "X-Trace: 1"])
def test_headers_that_are_not_a_mapping_are_refused_clearly(
    headers: Any, deliver_webhook: Deliverer
) -> None:
    """Before: ``'tuple' object has no attribute 'lower'`` (or a ``str``'s letters)."""
    match = r"headers must be a mapping of header name to value, not " + type(headers).__name__
    with pytest.raises(TypeError, match=match):
        deliver_webhook.post(object(), "/webhooks", b"{}", headers=headers)
