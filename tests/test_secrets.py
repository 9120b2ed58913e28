"""A secret never leaks: not in log output (every logger, at DEBUG, tracebacks and
``extra`` fields included), not in a ``repr``, an exception message or a formatted
traceback, across the core, the adapters, the delivery emulator and the API client.

Every secret here is random; the scan looks for it as text, as ``bytes`` repr, hex and
base64, and for any 10-character piece of it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from service_webhooks import (
    Event,
    MemoryStore,
    Secret,
    SQLiteStore,
    StoreError,
    Unprocessable,
    WebhookReceiver,
    as_resolver,
    generate_secret,
    sign,
    verify,
)
from service_webhooks._outcome import DeliveryRecord
from service_webhooks.testing import Deliverer, Signer, envelope

CURRENT, OLD, OTHER_ORG, API_KEY = (generate_secret() for _ in range(4))
SECRETS = {"current": CURRENT, "old": OLD, "other_org": OTHER_ORG, "api_key": API_KEY}
WRONG = generate_secret()  # what an attacker signs with: never known to the receiver
ORG, ORG_B = "o-SECRET-1", "o-SECRET-2"
NOTE = {"id": "n-1", "author": "ana@example.com", "text": "hi"}


def forms(secret: str) -> list[str]:
    raw = secret.encode()
    whole = [
        secret,
        repr(raw),
        raw.hex(),
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
    ]
    return whole + [secret[i : i + 10] for i in range(len(secret) - 9)]


def assert_clean(text: str, where: str) -> None:
    for name, secret in SECRETS.items():
        for form in forms(secret):
            assert form not in text, f"the {name} secret leaked in {where}: {form!r}"


class Capture(logging.Handler):
    """Keeps every record fully formatted (message, traceback, stack) plus its fields."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.texts: list[str] = []
        self.names: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.names.add(record.name)
        self.texts.append(self.format(record) + "\n" + repr(vars(record)))


@pytest.fixture
def logs() -> Iterator[Capture]:
    """Every logger at DEBUG into one handler; the scan runs at teardown."""
    capture = Capture()
    root = logging.getLogger()
    saved: list[tuple[logging.Logger, int, bool]] = []
    for logger in [root, *logging.root.manager.loggerDict.values()]:
        if isinstance(logger, logging.Logger):
            saved.append((logger, logger.level, logger.disabled))
            logger.setLevel(logging.DEBUG)
            logger.disabled = False
            if not logger.propagate:
                logger.addHandler(capture)
    root.addHandler(capture)
    disabled = logging.root.manager.disable
    logging.disable(logging.NOTSET)
    try:
        yield capture
    finally:
        logging.disable(disabled)
        for logger, level, was_disabled in saved:
            logger.setLevel(level)
            logger.disabled = was_disabled
            logger.removeHandler(capture)
    assert capture.texts, "nothing was logged: the capture is broken"
    for index, text in enumerate(capture.texts):
        assert_clean(text, f"log record #{index}")


class BrokenStore(MemoryStore):
    def claim(self, key: str, token: str, lease: float) -> Any:
        raise ConnectionError(f"cannot reach redis://:{'*' * 8}@db")

    async def aclaim(self, key: str, token: str, lease: float) -> Any:
        raise ConnectionError(f"cannot reach redis://:{'*' * 8}@db")


CONFIGS: dict[str, Callable[[], Any]] = {
    "str": lambda: CURRENT,
    "bytes": lambda: CURRENT.encode(),
    "Secret": lambda: Secret(CURRENT),
    "rotation": lambda: [
        Secret(CURRENT),
        Secret(OLD, not_after=datetime.now(tz=UTC) - timedelta(days=1)),
    ],
    "per-organization": lambda: {ORG: [CURRENT, OLD], ORG_B: OTHER_ORG},
    "callable": lambda: lambda org: {ORG: CURRENT, ORG_B: OTHER_ORG}.get(org),
}


def make_receiver(config: Any, store: Any = None, records: list[Any] | None = None) -> Any:
    receiver = WebhookReceiver(secrets=config, store=store or MemoryStore())
    if records is not None:
        receiver.on_outcome(records.append)

    @receiver.on("note.created")
    def note(event: Event[Any]) -> None:
        if event.data.text == "boom":
            raise RuntimeError(f"handler failed for {event.organization_id}")
        if event.data.text == "refuse":
            raise Unprocessable("we do not take these")
        if event.data.text == "handoff":
            raise StoreError("the task queue refused it")

    @receiver.on_error
    def broken_hook(event: Event[Any], error: BaseException) -> None:
        raise ValueError("the error hook is broken too")

    @receiver.on_outcome
    def broken_observer(record: DeliveryRecord) -> None:
        if record.status == 500:
            raise ValueError("the observer is broken")

    return receiver


def deliveries() -> Iterator[tuple[bytes, str | None]]:
    """Every scenario the core distinguishes, as (body, Service-Signature)."""
    body = envelope("note.created", NOTE)
    yield body, sign(body, CURRENT, ORG)  # processed
    yield body, sign(body, CURRENT, ORG)  # duplicate
    yield body, sign(body, WRONG, ORG)  # bad signature
    yield body, sign(body, OLD, ORG)  # the old secret: expired, or accepted (rotation)
    yield body, sign(body, OTHER_ORG, ORG_B)  # another organization's own secret
    yield body, sign(body, CURRENT, "o-UNKNOWN")  # unknown organization (or wrong secret)
    yield body, sign(body, CURRENT, ORG, timestamp=1_000_000_000)  # too old
    yield body, None  # no header
    yield body, f"o:{ORG},t:1,v:{CURRENT}"  # a secret pasted as the signature
    yield body, f"{CURRENT},{CURRENT}"  # garbage made of the secret
    for text in ("boom", "refuse", "handoff"):
        failing = envelope("note.created", {**NOTE, "id": text, "text": text})
        yield failing, sign(failing, CURRENT, ORG)
    yield b"[1, 2]", sign(b"[1, 2]", CURRENT, ORG)  # not an envelope
    other = envelope("nobody.listens", {})
    yield other, sign(other, CURRENT, ORG)  # unhandled


@pytest.mark.parametrize("config", list(CONFIGS))
def test_core_scenarios_leak_nothing(logs: Capture, config: str) -> None:
    records: list[DeliveryRecord] = []
    receiver = make_receiver(CONFIGS[config](), records=records)
    broken = make_receiver(CONFIGS[config](), store=BrokenStore(), records=records)
    outcomes = []
    for body, header in deliveries():
        outcomes.append(receiver.process(body, header))
        outcomes.append(asyncio.run(receiver.aprocess(body, header)))
        outcomes.append(broken.process(body, header))
    assert {o.status for o in outcomes} >= {200, 401, 400, 422, 500, 503}
    assert any("Traceback" in text for text in logs.texts)  # tracebacks were scanned
    assert {"service_webhooks"} <= logs.names
    assert_clean(repr(outcomes) + repr(records), "outcomes and records")
    assert_clean(repr(receiver) + repr(broken) + repr(receiver._resolver), "receiver reprs")


def test_reprs_and_strs(tmp_path: Any) -> None:
    objects: list[Any] = [
        Secret(CURRENT),
        Secret(CURRENT.encode(), not_after=1.9e9),
        [Secret(CURRENT), Secret(OLD)],
        as_resolver(CURRENT),
        as_resolver([CURRENT, OLD]),
        as_resolver({ORG: CURRENT, ORG_B: [OTHER_ORG, OLD]}),
        as_resolver(lambda org: CURRENT),
        WebhookReceiver(secrets={ORG: CURRENT}, store="memory"),
        WebhookReceiver(secrets=CURRENT, store=SQLiteStore(str(tmp_path / "s.sqlite3"))),
        Signer(CURRENT),
        Signer(CURRENT.encode(), organization_id=ORG),
        Deliverer(Signer(CURRENT)),
    ]
    for thing in objects:
        assert_clean(repr(thing), f"repr of {type(thing).__name__}")
        assert_clean(str(thing), f"str of {type(thing).__name__}")
        assert_clean(f"{thing!s:>10}", f"format of {type(thing).__name__}")


def _raised(function: Callable[[], Any]) -> BaseException:
    try:
        function()
    except Exception as error:
        return error
    raise AssertionError("expected an exception")


def test_exception_messages_and_tracebacks() -> None:
    body = envelope("note.created", NOTE)
    now = 1_700_000_000
    errors = [
        _raised(
            lambda: verify(body, sign(body, WRONG, ORG, timestamp=now), [Secret(CURRENT)], now=now)
        ),
        _raised(
            lambda: verify(body, sign(body, CURRENT, ORG, timestamp=1), [Secret(CURRENT)], now=now)
        ),
        _raised(lambda: verify(body, f"o:{ORG},t:{now},v:{CURRENT}", [Secret(CURRENT)], now=now)),
        _raised(lambda: verify(body, CURRENT, [Secret(CURRENT)], now=now)),
        _raised(
            lambda: verify(
                body,
                sign(body, CURRENT, ORG_B, timestamp=now),
                as_resolver({ORG: CURRENT}),
                now=now,
            )
        ),
        _raised(lambda: sign(body, CURRENT, "bad,org")),
        _raised(lambda: Secret(CURRENT, not_after=datetime(2030, 1, 1))),  # naive
        _raised(lambda: WebhookReceiver(secrets=CURRENT, store="memory", tolerance=-1)),
        _raised(lambda: WebhookReceiver(secrets=[], store="memory")),
        _raised(lambda: WebhookReceiver(secrets={ORG: []}, store="memory")),
        _raised(lambda: WebhookReceiver(secrets={ORG: 42}, store="memory")),  # type: ignore[dict-item]
        _raised(lambda: WebhookReceiver(secrets=CURRENT, store=CURRENT)),
        _raised(lambda: Signer(b"")),
    ]
    for error in errors:
        text = "".join(traceback.format_exception(error))
        assert_clean(str(error) + repr(error) + text, f"{type(error).__name__}: {error}")


def test_through_the_adapters(logs: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    from flask import Flask
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from service_webhooks.adapters.asgi import WebhookApp
    from service_webhooks.adapters.flask import ServiceWebhooks

    deliver, wrong = Deliverer(Signer(CURRENT, ORG)), Deliverer(Signer(WRONG, ORG))
    asgi = TestClient(
        Starlette(routes=[Route("/webhooks", WebhookApp(make_receiver([CURRENT, OLD])))])
    )
    app = Flask("secrets")
    app.config.update(SERVICE_WEBHOOKS_SECRETS=[CURRENT, OLD], SERVICE_WEBHOOKS_STORE="memory")
    extension = ServiceWebhooks(app)

    @extension.on("note.created")
    def flask_handler(event: Event[Any]) -> None:
        if event.data.text == "boom":
            raise RuntimeError("flask handler failed")

    flask = app.test_client()
    responses = []
    for client in (asgi, flask):
        responses.append(deliver(client, "/webhooks", "note.created", NOTE))
        responses.append(wrong(client, "/webhooks", "note.created", NOTE))
        responses.append(deliver(client, "/webhooks", "note.created", {**NOTE, "text": "boom"}))
        responses.append(client.get("/webhooks"))
    assert [r.status_code for r in responses] == [200, 401, 500, 405] * 2
    for response in responses:
        text = response.content if hasattr(response, "content") else response.data
        assert_clean(repr(response) + repr(dict(response.headers)) + repr(text), "a response")
    assert_clean(repr(app.extensions["service_webhooks"]), "the Flask extension's receiver")
    asgi.close()


def test_through_django(logs: Capture) -> None:
    django = pytest.importorskip("django")
    from django.conf import settings
    from django.test import Client
    from django.test.utils import override_settings
    from django.urls import clear_url_caches, path

    if not settings.configured:  # alone; the adapter suite configures its own project
        settings.configure(
            SECRET_KEY="test-only",
            ALLOWED_HOSTS=["testserver"],
            INSTALLED_APPS=["service_webhooks.adapters.django"],  # the view imports its models
        )
        django.setup()
    from service_webhooks.adapters.django.conf import build_receiver
    from service_webhooks.adapters.django.views import webhook_view

    receiver = build_receiver({"SECRETS": {ORG: [CURRENT, OLD]}, "STORE": MemoryStore()})
    receiver.on("note.created", lambda event: None)
    urls = type(logging)("sw_secret_urls")
    urls.urlpatterns = [path("webhooks/", webhook_view(receiver, asynchronous=False))]  # type: ignore[attr-defined]
    deliver, wrong = Deliverer(Signer(CURRENT, ORG)), Deliverer(Signer(WRONG, ORG))
    with override_settings(ROOT_URLCONF=urls, ALLOWED_HOSTS=["testserver"]):
        clear_url_caches()
        client = Client()
        statuses = [
            deliver(client, "/webhooks/", "note.created", NOTE).status_code,
            wrong(client, "/webhooks/", "note.created", NOTE).status_code,
        ]
    clear_url_caches()
    assert statuses == [200, 401]
    assert_clean(repr(receiver), "the Django receiver")


async def test_delivery_emulator(logs: Capture) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Route

    from service_webhooks.adapters.asgi import WebhookApp
    from service_webhooks.delivery import OutboundEvent as Queued
    from service_webhooks.delivery import deliver_to_app
    from service_webhooks.delivery.endpoint import Endpoint

    receiver = make_receiver(CURRENT)
    app = Starlette(routes=[Route("/webhooks", WebhookApp(receiver))])
    events = [Queued("note.created", {**NOTE, "id": f"n-{i}"}, organization_id=ORG) for i in (1, 2)]
    good = await deliver_to_app(app, events, secret=CURRENT, organization_id=ORG)
    bad = await deliver_to_app(app, events[:1], secret=WRONG, organization_id=ORG)
    assert good.summary().delivered == 2
    assert [a.status for a in bad.deliveries[0].attempts] == [401]
    endpoint = Endpoint("https://example.com/webhooks", CURRENT, {"note.created"})
    for emulator in (good, bad):
        assert_clean(
            repr(emulator.summary()) + repr(emulator.deliveries) + repr(emulator.audit),
            "the emulator's results",
        )
    assert_clean(repr(endpoint) + str(endpoint), "an Endpoint")


def test_api_client(logs: Capture) -> None:
    from service_webhooks.api import Client
    from service_webhooks.testing.fake_api import FakeAPI

    fake = FakeAPI(api_key=API_KEY)
    with Client(API_KEY, base_url="http://fake", transport=fake.sync_transport()) as client:
        assert_clean(repr(client), "the API client")
        client.privacy_settings.history(limit=2)
    with Client("not-the-key", base_url="http://fake", transport=fake.sync_transport()) as bad:
        error = _raised(lambda: bad.privacy_settings.history(limit=2))
    assert_clean(str(error) + "".join(traceback.format_exception(error)), "an API error")
    assert isinstance(fake.sync_transport(), httpx.BaseTransport)
