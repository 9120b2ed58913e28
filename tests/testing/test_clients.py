"""The test kit through each framework's own test client: Starlette, FastAPI, httpx
(async, ASGI transport), Flask and Django (sync and async)."""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from service_webhooks import Event, MemoryStore, Secret, WebhookReceiver, generate_secret
from service_webhooks._signing import parse_signature_header
from service_webhooks.testing import (
    AsyncDeliverer,
    Deliverer,
    Signer,
    UnsupportedClientError,
    envelope,
)

NOTE = {"id": "n-1", "author": "ana@example.com", "text": "hi"}


@pytest.fixture
def receiver(webhook_secret: str) -> WebhookReceiver:
    receiver = WebhookReceiver(secrets=webhook_secret, store=MemoryStore())
    receiver.seen = []  # type: ignore[attr-defined]
    receiver.on("note.created", receiver.seen.append)  # type: ignore[attr-defined]
    return receiver


def starlette_client(receiver: WebhookReceiver) -> Any:
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from service_webhooks.adapters.asgi import WebhookApp

    return TestClient(Starlette(routes=[Route("/webhooks", WebhookApp(receiver))]))


def fastapi_client(receiver: WebhookReceiver) -> Any:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from service_webhooks.adapters.asgi import WebhookApp

    app = FastAPI()
    app.add_route("/webhooks", WebhookApp(receiver), methods=["POST"])
    return TestClient(app)


def flask_client(receiver: WebhookReceiver) -> Any:
    from flask import Flask

    from service_webhooks.adapters.flask import webhook_blueprint

    app = Flask("kit")
    app.register_blueprint(webhook_blueprint(receiver, url="/webhooks"))
    return app.test_client()


@pytest.fixture
def django_urls() -> Iterator[Callable[[Any], None]]:
    """``route(view)``: serve ``view`` on ``/webhooks/`` for Django's test clients."""
    django = pytest.importorskip("django")
    from django.conf import settings
    from django.test.utils import override_settings
    from django.urls import clear_url_caches, path

    if not settings.configured:  # alone; the adapter suite configures its own project
        settings.configure(  # the adapter app too: a later test may import its models
            SECRET_KEY="test-only",
            ALLOWED_HOSTS=["testserver"],
            INSTALLED_APPS=["service_webhooks.adapters.django"],
        )
        django.setup()
    urls = types.ModuleType("sw_test_kit_urls")
    overriding: list[Any] = []

    def route(view: Any) -> None:
        urls.urlpatterns = [path("webhooks/", view)]  # type: ignore[attr-defined]
        override = override_settings(ROOT_URLCONF=urls, ALLOWED_HOSTS=["testserver"])
        override.enable()
        overriding.append(override)
        clear_url_caches()

    yield route
    for override in overriding:
        override.disable()
    clear_url_caches()


SYNC = {"starlette": starlette_client, "fastapi": fastapi_client, "flask": flask_client}


@pytest.fixture(params=[*SYNC, "django"])
def client_and_url(
    request: pytest.FixtureRequest, receiver: WebhookReceiver, django_urls: Any
) -> tuple[Any, str]:
    if request.param == "django":
        from django.test import Client

        from service_webhooks.adapters.django.views import webhook_view

        django_urls(webhook_view(receiver, asynchronous=False))
        return Client(), "/webhooks/"
    return SYNC[request.param](receiver), "/webhooks"


def status_and_reason(response: Any) -> tuple[int, str]:
    body = response.content if hasattr(response, "content") else response.data
    return response.status_code, json.loads(body)["reason"]


def test_one_line_delivery_through_each_framework(
    client_and_url: tuple[Any, str], deliver_webhook: Deliverer, receiver: WebhookReceiver
) -> None:
    client, url = client_and_url
    response = deliver_webhook(client, url, "note.created", NOTE)
    assert status_and_reason(response) == (200, "processed")
    [event] = receiver.seen  # type: ignore[attr-defined]
    assert (event.data.id, event.organization_id) == ("n-1", "o-TEST-na1")


def test_retry_of_the_same_body_is_a_duplicate(
    client_and_url: tuple[Any, str], deliver_webhook: Deliverer
) -> None:
    client, url = client_and_url
    body = envelope("note.created", NOTE)
    assert status_and_reason(deliver_webhook.post(client, url, body))[1] == "processed"
    assert status_and_reason(deliver_webhook.post(client, url, body))[1] == "duplicate"


def test_each_call_sends_a_fresh_body_unless_unique_is_false(
    client_and_url: tuple[Any, str], deliver_webhook: Deliverer, receiver: WebhookReceiver
) -> None:
    client, url = client_and_url
    for _ in range(2):
        assert status_and_reason(deliver_webhook(client, url, "note.created", NOTE)) == (
            200,
            "processed",
        )
    fixed = [deliver_webhook(client, url, "note.created", NOTE, unique=False) for _ in range(2)]
    assert [status_and_reason(r)[1] for r in fixed] == ["processed", "duplicate"]
    assert [event.data.id for event in receiver.seen] == ["n-1"] * 3  # type: ignore[attr-defined]


def test_options_and_refusals(
    client_and_url: tuple[Any, str], deliver_webhook: Deliverer, receiver: WebhookReceiver
) -> None:
    client, url = client_and_url
    response = deliver_webhook(client, url, "note.created", NOTE, organization_id="o-OTHER")
    assert status_and_reason(response) == (200, "processed")
    assert receiver.seen[-1].organization_id == "o-OTHER"  # type: ignore[attr-defined]
    old = deliver_webhook(client, url, "note.created", NOTE, timestamp=1_000_000_000)
    assert status_and_reason(old) == (401, "timestamp")
    wrong = Deliverer(Signer(generate_secret()))
    assert status_and_reason(wrong(client, url, "note.created", NOTE)) == (401, "signature")
    extra = deliver_webhook(
        client, url, "note.created", {**NOTE, "id": "n-2"}, headers={"X-Trace": "1"}
    )
    assert status_and_reason(extra) == (200, "processed")


@pytest.fixture(params=["httpx", "django"])
def async_client_and_url(
    request: pytest.FixtureRequest, receiver: WebhookReceiver, django_urls: Any
) -> Iterator[tuple[Any, str]]:
    if request.param == "django":
        from django.test import AsyncClient

        from service_webhooks.adapters.django.views import webhook_view

        django_urls(webhook_view(receiver, asynchronous=True))
        yield AsyncClient(), "/webhooks/"
        return
    from starlette.applications import Starlette
    from starlette.routing import Route

    from service_webhooks.adapters.asgi import WebhookApp

    app = Starlette(routes=[Route("/webhooks", WebhookApp(receiver))])
    transport = httpx.ASGITransport(app=app)
    yield httpx.AsyncClient(transport=transport, base_url="http://testserver"), "/webhooks"


async def test_async_clients(
    async_client_and_url: tuple[Any, str],
    adeliver_webhook: AsyncDeliverer,
    receiver: WebhookReceiver,
) -> None:
    client, url = async_client_and_url
    response = await adeliver_webhook(client, url, "note.created", NOTE, unique=False)
    assert status_and_reason(response) == (200, "processed")
    again = await adeliver_webhook(client, url, "note.created", NOTE)  # a fresh body
    assert status_and_reason(again) == (200, "processed")
    body = envelope("note.created", NOTE)
    assert status_and_reason(await adeliver_webhook.post(client, url, body))[1] == "duplicate"
    with pytest.raises(UnsupportedClientError, match="is asynchronous"):
        Deliverer(adeliver_webhook.signer)(client, url, "note.created", NOTE)
    if isinstance(client, httpx.AsyncClient):
        await client.aclose()


async def test_a_sync_client_is_refused_by_the_async_deliverer(
    receiver: WebhookReceiver, adeliver_webhook: AsyncDeliverer
) -> None:
    with pytest.raises(UnsupportedClientError, match="is synchronous"):
        await adeliver_webhook(flask_client(receiver), "/webhooks", "note.created", NOTE)


def test_an_unknown_client_is_refused(deliver_webhook: Deliverer) -> None:
    with pytest.raises(UnsupportedClientError, match=r"cannot deliver with a builtins\.object"):
        deliver_webhook(object(), "/webhooks", "note.created", NOTE)


def test_fixtures_fit_together(
    webhook_secret: str,
    webhook_organization_id: str,
    webhook_signer: Signer,
    deliver_webhook: Deliverer,
    webhook_receiver: WebhookReceiver,
) -> None:
    assert webhook_signer.secret == Secret(webhook_secret)
    assert webhook_signer.organization_id == webhook_organization_id == "o-TEST-na1"
    assert deliver_webhook.signer is webhook_signer
    seen: list[Event[Any]] = []
    webhook_receiver.on("note.created", seen.append)
    body, headers = webhook_signer.delivery("note.created", NOTE)
    outcome = webhook_receiver.process(body, headers["Service-Signature"])
    assert (outcome.reason, len(seen)) == ("processed", 1)
    assert webhook_secret not in repr(webhook_signer) + repr(deliver_webhook)


def test_the_signer_signs_as_the_emulator_does(webhook_signer: Signer) -> None:
    """The emulator's sender signs with ``signing.sign`` at send time; so does Signer."""
    from service_webhooks._signing import sign
    from service_webhooks.delivery import sender

    assert getattr(sender, "sign") is sign  # noqa: B009  # not re-exported
    body = envelope("note.created", NOTE)
    headers = webhook_signer.headers(body, timestamp=1_700_000_000)
    assert headers["Service-Signature"] == sign(
        body, webhook_signer.secret, "o-TEST-na1", timestamp=1_700_000_000
    )
    header = parse_signature_header(headers["Service-Signature"])
    assert (header.organization_id, header.timestamp) == ("o-TEST-na1", 1_700_000_000)
    assert headers["Content-Type"] == "application/json; charset=utf-8"


@pytest.mark.parametrize("organization_id", ["", "o,1", "org\u00e9"])
def test_a_signer_for_an_organization_no_header_can_carry_is_refused(
    organization_id: str,
) -> None:
    """Made anyway, it failed only at its first delivery (``sign()`` refuses the ``o``)."""
    from service_webhooks import ConfigurationError

    with pytest.raises(ConfigurationError, match="organization_id must be non-empty printable"):
        Signer(generate_secret(), organization_id=organization_id)
