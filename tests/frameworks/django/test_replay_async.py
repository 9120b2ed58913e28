"""Replays where an event loop is involved: the admin's Replay action under ASGI, with an
async handler that uses Django's async ORM (``sync_to_async``), and the async replay
(``areplay``, the dashboard's) of a ``TRANSACTIONAL`` receiver."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.db import connections
from django.test import AsyncClient, Client, RequestFactory
from sw_testapp.models import Delivery

from service_webhooks import Event
from service_webhooks.adapters.django import receiver
from service_webhooks.adapters.django.conf import build_receiver
from service_webhooks.adapters.django.models import ReceivedDeliveryRecord
from service_webhooks.adapters.django.views import webhook_view

URL = "/admin/service_webhooks/receiveddeliveryrecord/"


class AsyncOrmHandler:
    """An async handler doing what Django's async ORM does: a thread-sensitive
    ``sync_to_async`` call. Its timeout turns a deadlock (the call queued onto the
    thread that waits for this handler) into a handler failure."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    async def __call__(self, event: Event[Any]) -> None:
        record = sync_to_async(self.runs.append)  # thread_sensitive=True, as aget(), acreate()
        await asyncio.wait_for(record(event.data["id"]), timeout=5)


@pytest.fixture
def async_orm() -> Iterator[AsyncOrmHandler]:
    handler = AsyncOrmHandler()
    receiver.router.declare("test.async_orm")
    yield handler
    receiver.remove(handler)


def test_the_admin_replays_an_async_orm_handler_under_asgi(
    kit: ModuleType, async_orm: AsyncOrmHandler
) -> None:
    body = kit.envelope("test.async_orm")
    response = Client().post(
        "/webhooks/", data=body, content_type="application/json",
        headers={kit.SIGNATURE_HEADER: kit.signed(body)},
    )  # fmt: skip
    assert response.json()["reason"] == "unhandled"  # no handler yet: the replay runs it
    record_id = ReceivedDeliveryRecord.objects.get(body=body).id
    receiver.on("test.async_orm")(async_orm)
    user = User.objects.create_superuser(f"admin-{uuid.uuid4().hex[:8]}", "a@example.com", "pw")

    client = AsyncClient()  # Django's ASGI handler: the action runs in its sync thread
    client.force_login(user)  # before the loop: aforce_login is Django 5.0+

    async def replay_from_the_admin() -> str:
        action = {"action": "replay", "_selected_action": [record_id], "index": 0}
        await client.post(URL, action)  # a redirect to the list (no follow= before 5.0)
        page = await client.get(URL)  # which shows the action's messages
        return str(page.content.decode())

    page = async_to_sync(replay_from_the_admin)()
    assert f"Delivery {record_id}: 200 processed" in page  # not 500 (the TimeoutError)
    assert async_orm.runs == [json.loads(body)["data"]["id"]]  # once
    replays = receiver.inbox.get(record_id).replays  # type: ignore[union-attr]
    assert [(r.reason, r.forced) for r in replays] == [("processed", False)]


@pytest.fixture(params=["sqlite", "postgresql"])
def alias(request: pytest.FixtureRequest) -> Iterator[str]:
    yield "default" if request.param == "sqlite" else request.getfixturevalue("pg")
    connections.close_all()


async def test_a_transactional_receiver_replays_in_an_event_loop(
    kit: ModuleType, alias: str
) -> None:
    """``areplay`` (the dashboard's Replay button) runs the unit of work in Django's
    thread-sensitive executor, as ``aprocess`` does: ``transaction.atomic`` entered in
    the event loop would raise ``SynchronousOnlyOperation`` on every replay."""
    transactional = build_receiver(
        {"SECRETS": kit.SECRET, "TRANSACTIONAL": True, "STORE": {"OPTIONS": {"using": alias}}}
    )
    runs: list[str] = []

    @transactional.on("note.created")
    def handler(event: Event[Any]) -> None:
        Delivery.objects.using(alias).create(note_id=event.data.id)
        runs.append(event.data.id)
        if len(runs) == 1:
            raise RuntimeError("crash after the write")

    note_id = uuid.uuid4().hex
    body = kit.envelope(id=note_id)

    def deliver() -> tuple[int, str]:
        request = RequestFactory().post(
            "/webhooks/", data=body, content_type="application/json",
            headers={kit.SIGNATURE_HEADER: kit.signed(body)},
        )  # fmt: skip
        response = webhook_view(transactional, asynchronous=False)(request)
        record = ReceivedDeliveryRecord.objects.using(alias).get(body=body)
        return response.status_code, record.id

    def rows() -> int:
        return Delivery.objects.using(alias).filter(note_id=note_id).count()

    status, record_id = await sync_to_async(deliver)()
    assert (status, await sync_to_async(rows)()) == (500, 0)  # rolled back
    outcome = await transactional.areplay(record_id)
    assert (outcome.status, outcome.reason) == (200, "processed")
    assert (runs, await sync_to_async(rows)()) == ([note_id, note_id], 1)
    replays = (await transactional.inbox.aget(record_id)).replays  # type: ignore[union-attr]
    assert [(r.reason, r.error_type) for r in replays] == [("processed", None)]
    await sync_to_async(connections.close_all)()


def test_prune_defaults_to_the_stores_database_and_reports_its_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without ``--database`` the command prunes where the project receiver keeps its
    records (``STORE``'s ``using``), not ``default``; a database error is one line."""
    from django.core.management import CommandError, call_command

    from service_webhooks.adapters.django.store import DjangoStore

    assert receiver.store is not None  # builds the lazy project receiver: patch it, not its proxy
    monkeypatch.setattr(receiver._wrapped, "store", DjangoStore(using="down"))  # a missing file
    with pytest.raises(CommandError) as raised:
        call_command("service_webhooks_prune", stdout=io.StringIO())
    assert str(raised.value) == ("cannot prune in database 'down': unable to open database file")
