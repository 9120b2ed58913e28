"""``"TRANSACTIONAL": True``: a handler's database work and its idempotency record commit
in one transaction (exactly-once effects for database work), on SQLite and PostgreSQL."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from django.db import connections
from django.test import AsyncRequestFactory, RequestFactory
from sw_testapp.models import Delivery

from service_webhooks import Event, WebhookReceiver
from service_webhooks.adapters.django.conf import build_receiver
from service_webhooks.adapters.django.models import IdempotencyRecord
from service_webhooks.adapters.django.store import (
    DjangoStore,
    TransactionalReceiver,
    TransactionalStore,
)
from service_webhooks.adapters.django.views import webhook_view
from service_webhooks.stores import ClaimState


@pytest.fixture(params=["sqlite", "postgresql"])
def alias(request: pytest.FixtureRequest) -> Iterator[str]:
    yield "default" if request.param == "sqlite" else request.getfixturevalue("pg")
    connections.close_all()


def crashing_once(receiver: WebhookReceiver, alias: str) -> list[str]:
    """A handler that writes a row, then raises on its first run."""
    runs: list[str] = []

    @receiver.on("note.created")
    def handler(event: Event[Any]) -> None:
        Delivery.objects.using(alias).create(note_id=event.data.id)
        runs.append(event.data.id)
        if len(runs) == 1:
            raise RuntimeError("crash after the write")

    return runs


def post(kit: ModuleType, view: Any, body: bytes) -> Any:
    request = RequestFactory().post(
        "/webhooks/", data=body, content_type="application/json",
        headers={kit.SIGNATURE_HEADER: kit.signed(body)},
    )  # fmt: skip
    return view(request)


def state(alias: str, note_id: str, body: bytes, kit: ModuleType) -> tuple[int, list[str]]:
    key = kit.default_idempotency_key(kit.ORG, body)
    records = IdempotencyRecord.objects.using(alias).filter(key=key, state="done")
    rows = Delivery.objects.using(alias).filter(note_id=note_id).count()
    return rows, list(records.values_list("state", flat=True))


def test_a_handler_that_writes_then_raises_leaves_nothing_and_the_retry_writes_once(
    kit: ModuleType, alias: str
) -> None:
    receiver = build_receiver(
        {"SECRETS": kit.SECRET, "TRANSACTIONAL": True, "STORE": {"OPTIONS": {"using": alias}}}
    )
    assert isinstance(receiver, TransactionalReceiver)
    assert isinstance(receiver.store, TransactionalStore)
    runs = crashing_once(receiver, alias)
    view = webhook_view(receiver, asynchronous=False)
    note_id = uuid.uuid4().hex
    body = kit.envelope(id=note_id)

    assert post(kit, view, body).status_code == 500
    assert state(alias, note_id, body, kit) == (0, [])  # neither the row nor a DONE record

    assert post(kit, view, body).status_code == 200  # the service's retry
    assert state(alias, note_id, body, kit) == (1, ["done"])
    assert post(kit, view, body).status_code == 200  # a duplicate: nothing runs
    assert (len(runs), state(alias, note_id, body, kit)) == (2, (1, ["done"]))


async def test_the_async_view_keeps_the_same_transaction(kit: ModuleType, alias: str) -> None:
    from asgiref.sync import sync_to_async

    receiver = build_receiver(
        {"SECRETS": kit.SECRET, "TRANSACTIONAL": True, "STORE": {"OPTIONS": {"using": alias}}}
    )
    crashing_once(receiver, alias)
    view = webhook_view(receiver, asynchronous=True)
    note_id = uuid.uuid4().hex
    body = kit.envelope(id=note_id)
    headers = {kit.SIGNATURE_HEADER: kit.signed(body)}
    factory = AsyncRequestFactory()
    request = factory.post("/", data=body, content_type="application/json", headers=headers)
    assert (await view(request)).status_code == 500
    assert await sync_to_async(state)(alias, note_id, body, kit) == (0, [])
    request = factory.post("/", data=body, content_type="application/json", headers=headers)
    assert (await view(request)).status_code == 200
    assert await sync_to_async(state)(alias, note_id, body, kit) == (1, ["done"])
    await sync_to_async(connections.close_all)()


def test_a_crash_before_the_record_commits_rolls_back_the_handlers_work(
    kit: ModuleType, alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = build_receiver(
        {
            "SECRETS": kit.SECRET, "TRANSACTIONAL": True, "LEASE": 0.5,
            "STORE": {"OPTIONS": {"using": alias}},
        }
    )  # fmt: skip
    receiver.on("note.created", lambda e: Delivery.objects.using(alias).create(note_id=e.data.id))
    view = webhook_view(receiver, asynchronous=False)
    note_id = uuid.uuid4().hex
    body = kit.envelope(id=note_id)
    with monkeypatch.context() as patch:

        def dies(*args: Any) -> bool:
            raise ConnectionError("the process lost its database before committing")

        patch.setattr(DjangoStore, "complete", dies)
        assert post(kit, view, body).status_code == 503
    assert state(alias, note_id, body, kit) == (0, [])
    time.sleep(0.6)  # the dead claim's lease runs out
    assert post(kit, view, body).status_code == 200
    assert state(alias, note_id, body, kit) == (1, ["done"])


def test_without_the_option_the_failed_handlers_row_stays(kit: ModuleType, alias: str) -> None:
    receiver = build_receiver({"SECRETS": kit.SECRET, "STORE": {"OPTIONS": {"using": alias}}})
    crashing_once(receiver, alias)
    note_id = uuid.uuid4().hex
    body = kit.envelope(id=note_id)
    assert post(kit, webhook_view(receiver, asynchronous=False), body).status_code == 500
    assert state(alias, note_id, body, kit) == (1, [])  # why TRANSACTIONAL exists


def test_transactional_needs_a_transactional_store(kit: ModuleType) -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="TransactionalStore"):
        build_receiver({"SECRETS": kit.SECRET, "TRANSACTIONAL": True, "STORE": "memory"})


def test_a_renewal_keeps_the_one_open_transaction(alias: str) -> None:
    store = TransactionalStore(using=alias)
    key, token = f"renew-{uuid.uuid4().hex}", uuid.uuid4().hex
    assert store.claim(key, token, 30) is ClaimState.NEW
    assert store.claim(key, token, 30) is ClaimState.NEW  # a renewal: no second transaction
    assert len(store._open) == 1
    Delivery.objects.using(alias).create(note_id=key)
    assert store.complete(key, token, 3600) is True  # commits, and leaves no atomic open
    assert store._open == {}
    assert not connections[alias].in_atomic_block
    assert Delivery.objects.using(alias).filter(note_id=key).count() == 1
