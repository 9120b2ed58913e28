"""The Flask and Django (WSGI) views hand the receiver the header lines it reads, taken
from the ``environ`` by key rather than through the framework's header view."""

from __future__ import annotations

import pytest

from service_webhooks._receiver import _SLOTS
from service_webhooks.adapters._wsgi import environ_headers

ENVIRON = {
    "REQUEST_METHOD": "POST",
    "HTTP_HOST": "example.com",
    "HTTP_SERVICE_SIGNATURE": "o:o-1,t:1,v:AAAA",
    "HTTP_TRANSFER_ENCODING": "chunked",
    "HTTP_USER_AGENT": "Service-Webhooks/2.0",
    "HTTP_X_FORWARDED_FOR": "10.0.0.1",
    "CONTENT_LENGTH": "12",
    "CONTENT_TYPE": "application/json",
    "wsgi.input": None,
}


def test_every_header_the_receiver_reads_is_taken_and_no_other() -> None:
    lines = environ_headers(ENVIRON)
    assert {name.lower() for name, _ in lines} == {k for k in _SLOTS if isinstance(k, str)}
    assert dict(lines) == {
        "Service-Signature": "o:o-1,t:1,v:AAAA",
        "Transfer-Encoding": "chunked",
        "User-Agent": "Service-Webhooks/2.0",
        "Content-Length": "12",
        "Content-Type": "application/json",
    }


def test_an_empty_cgi_variable_is_an_absent_header_an_empty_http_one_was_sent() -> None:
    # PEP 3333: CONTENT_TYPE and CONTENT_LENGTH may be empty when the header is absent
    environ = {"CONTENT_TYPE": "", "CONTENT_LENGTH": "", "HTTP_SERVICE_SIGNATURE": ""}
    assert environ_headers(environ) == [("Service-Signature", "")]
    assert environ_headers({}) == []


def test_whitespace_around_a_value_is_not_part_of_it() -> None:
    # RFC 9110 §5.5; werkzeug's development server keeps the trailing whitespace, which
    # made a correctly signed delivery a 401 signature under `flask run`
    environ = {"HTTP_SERVICE_SIGNATURE": " \to:o-1,t:1,v:AAAA \t", "CONTENT_LENGTH": "12 "}
    assert environ_headers(environ) == [
        ("Service-Signature", "o:o-1,t:1,v:AAAA"),
        ("Content-Length", "12"),
    ]


@pytest.mark.parametrize(
    ("sent", "reason"),
    [
        ("9" * 5000, "payload_too_large"),  # past the 4,300 digits int() converts
        (b"9" * 5000, "payload_too_large"),  # raw ASGI header bytes
        ("1" * 19, "payload_too_large"),
        ("0" * 5000 + "12", "format"),  # 12 bytes: read, then refused for its header
        ("1" * 40 + "x", "format"),  # not a number: ignored
    ],
)
def test_a_content_length_of_any_length_is_read_without_raising(
    sent: str | bytes, reason: str
) -> None:
    """Django's runserver (wsgiref) and direct ``handle`` calls pass the value on as
    sent; 5,000 digits made the receiver raise ``ValueError`` (a 500)."""
    from service_webhooks import WebhookReceiver

    receiver = WebhookReceiver("whsec-wsgi-0123456789abcdef0123456789", store="memory")
    headers = [("Content-Length", sent), ("Service-Signature", "x")]
    assert receiver.handle("POST", headers, lambda size: b"").reason == reason  # type: ignore[arg-type]


def test_a_5000_digit_content_length_is_413_through_flask_not_a_500() -> None:
    from flask import Flask

    from service_webhooks import WebhookReceiver
    from service_webhooks.adapters.flask import webhook_blueprint

    app = Flask(__name__)
    receiver = WebhookReceiver("whsec-wsgi-0123456789abcdef0123456789", store="memory")
    app.register_blueprint(webhook_blueprint(receiver))
    client = app.test_client()
    for length, status in [("9" * 5000, 413), ("0" * 5000 + "2", 401)]:
        response = client.post(
            "/webhooks",
            data=b"{}",
            headers={"Service-Signature": "o:o-1,t:1,v:AAAA"},
            environ_overrides={"CONTENT_LENGTH": length},
        )
        assert response.status_code == status  # not 500: nothing raised
