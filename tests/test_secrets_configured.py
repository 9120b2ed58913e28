"""Secrets that can never verify are refused when configured, in every way a user
configures a receiver (``secrets=``, a ``secrets=`` callable, Flask config, Django
settings, the CLI), never at the first delivery; and the refusal never shows the value.
``Secret``, ``sign`` and ``verify`` themselves keep any non-empty bytes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from click.testing import CliRunner

from service_webhooks import (
    ConfigurationError,
    MemoryStore,
    Secret,
    WebhookReceiver,
    as_resolver,
    sign,
    verify,
)
from service_webhooks.cli import main

VALUE = "whsec-trial-0123456789abcdef0123456789abcdef"
BODY = b'{"eventName":"order.created","version":1,"data":{}}'
BLANK = [" ", "   ", "\n", "\t \r\n", b" ", b"\n\n"]
PADDED = [VALUE + "\n", " " + VALUE, VALUE + " ", "\t" + VALUE + "\r\n"]


@pytest.mark.parametrize("blank", BLANK)
def test_a_whitespace_only_secret_is_refused(blank: str | bytes) -> None:
    with pytest.raises(ConfigurationError, match="whitespace only"):
        as_resolver(blank)
    with pytest.raises(ConfigurationError, match="whitespace only"):
        as_resolver({"o-1": [Secret(blank)]})


@pytest.mark.parametrize(
    "config",
    [
        "   ",
        ["\n"],
        [VALUE, "  "],
        {"o-1": " "},
        {"o-1": [VALUE, b"\t"]},
    ],
)
def test_a_receiver_with_a_whitespace_only_secret_is_refused_when_made(config: Any) -> None:
    with pytest.raises(ConfigurationError, match="whitespace only"):
        WebhookReceiver(config, store=MemoryStore(), inbox=False)


@pytest.mark.parametrize("padded", PADDED)
def test_a_str_secret_with_whitespace_around_is_refused(padded: str) -> None:
    """``open(path).read()`` or an env file keeps the newline: every signature would fail."""
    with pytest.raises(ConfigurationError, match="start or end with whitespace") as caught:
        WebhookReceiver([padded], store=MemoryStore(), inbox=False)
    assert VALUE not in str(caught.value)
    assert VALUE[:10] not in repr(caught.value)


@pytest.mark.parametrize("given", [VALUE.encode() + b"\n", Secret(VALUE + "\n")])
def test_whitespace_that_is_part_of_the_secret_goes_in_as_bytes_or_a_secret(
    given: bytes | Secret,
) -> None:
    receiver = WebhookReceiver([given], store=MemoryStore(), inbox=False)
    assert receiver.process(BODY, sign(BODY, VALUE + "\n", "o-1")).status == 200


def test_whitespace_inside_a_secret_is_kept() -> None:
    phrase = "correct horse battery staple"
    receiver = WebhookReceiver(phrase, store=MemoryStore(), inbox=False)
    assert receiver.process(BODY, sign(BODY, phrase, "o-1")).status == 200


@pytest.mark.parametrize("key", ["\r", " ", b"\n", "0\r"])
def test_sign_and_verify_take_any_non_empty_key(key: str | bytes) -> None:
    """The primitives are not the configuration: what a key is stays the caller's."""
    assert verify(BODY, sign(BODY, key, "o-1", timestamp=1), [Secret(key)], now=1)


@pytest.mark.parametrize("not_after", [10**400, -(10**400)], ids=["huge", "-huge"])
def test_a_stop_date_beyond_any_float_is_a_configuration_error(not_after: int) -> None:
    with pytest.raises(ConfigurationError, match="out of range"):
        Secret(VALUE, not_after=not_after)


def test_a_secrets_callable_returning_a_padded_secret_is_a_configuration_fault() -> None:
    """What a secret manager returns is checked too: 500 ``configuration``, retried."""
    receiver = WebhookReceiver(lambda org: VALUE + "\n", store=MemoryStore(), inbox=False)
    outcome = receiver.process(BODY, sign(BODY, VALUE, "o-1"))
    assert (outcome.status, outcome.reason) == (500, "configuration")


@pytest.mark.parametrize("value", ["   ", VALUE + " "])
def test_listen_refuses_a_blank_or_padded_secret(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)  # never serve
    result = CliRunner().invoke(main, ["listen", "--port", "0", "--secret", value])
    assert result.exit_code == 2, result.output
    assert "--secret" in result.stderr
    assert VALUE not in result.stderr


@pytest.mark.parametrize("value", ["   ", VALUE + " "])
def test_flask_refuses_a_blank_or_padded_secret_at_init_app(value: str) -> None:
    from flask import Flask

    from service_webhooks.adapters.flask import ServiceWebhooks

    app = Flask("trial-secrets")
    app.config.update(SERVICE_WEBHOOKS_SECRETS=value, SERVICE_WEBHOOKS_STORE="memory")
    with pytest.raises(ConfigurationError, match="whitespace"):
        ServiceWebhooks(app)


def test_django_refuses_a_blank_secret_when_the_receiver_is_built() -> None:
    django = pytest.importorskip("django")
    from django.conf import settings

    if not settings.configured:  # alone; the adapter suite configures its own project
        settings.configure(
            SECRET_KEY="test-only",
            ALLOWED_HOSTS=["testserver"],
            INSTALLED_APPS=["service_webhooks.adapters.django"],
        )
        django.setup()
    from service_webhooks.adapters.django.conf import build_receiver

    with pytest.raises(ConfigurationError, match="whitespace only"):
        build_receiver({"SECRETS": "  \n", "STORE": MemoryStore(), "INBOX": False})


def test_a_naive_stop_date_is_refused_with_the_way_to_write_it() -> None:
    from datetime import datetime

    with pytest.raises(ConfigurationError, match="tzinfo=UTC"):
        Secret(VALUE, not_after=datetime(2030, 1, 1))  # the mistake under test


def test_a_secret_past_its_stop_date_when_the_receiver_is_built_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # kept after the rotation ended: it verifies nothing, and the operator should know
    now = 1_800_000_000.0
    old = Secret("whsec-old-0123456789abcdef0123456789", not_after=now - 1)
    later = Secret("whsec-later-0123456789abcdef012345678", not_after=now + 3600)
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        WebhookReceiver(["whsec-new-0123456789abcdef0123456789", old, later], clock=lambda: now)
        WebhookReceiver({"o-A": [old], "o-B": [later]}, clock=lambda: now)
        WebhookReceiver(lambda organization_id: [old], clock=lambda: now)  # not known yet
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "service_webhooks: a secret stopped verifying at its stop date "
        "(2027-01-15T07:59:59+00:00): it accepts no delivery; remove it from secrets=",
        "service_webhooks: a secret of organization 'o-A' stopped verifying at its stop "
        "date (2027-01-15T07:59:59+00:00): it accepts no delivery; remove it from secrets=",
    ]
    assert all("whsec" not in message for message in messages)
