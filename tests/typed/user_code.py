"""A user's typed code, checked by ``mypy --strict`` in ``test_user_types.py`` (never run).

Lines ending in ``# error: [code]`` are misuse the public annotations must refuse with
that mypy error code; every other line must pass. ``assert_type`` pins what a checker
sees: decorated handlers keep their own type, ``Event[Model].data`` is the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any, assert_type

import msgspec

from service_webhooks import (
    DeliveryRecord,
    Duration,
    Event,
    NoteCreated,
    Outcome,
    Secret,
    SegmentTrendAlert,
    WebhookReceiver,
    sign,
    verify,
)
from service_webhooks.api import AsyncClient, Client, Operation, OperationsPage, Pager
from service_webhooks.testing import Signer

receiver = WebhookReceiver(secrets="whsec-example", store="memory")


class Comment(msgspec.Struct):
    id: str


@receiver.on("note.created", version=1)
def note_created(event: Event[NoteCreated]) -> None:
    assert_type(event.data, NoteCreated)
    assert_type(event.data.author, str)
    assert_type(event.version, int)
    assert_type(event.body, bytes)


@receiver.on(["segment.trend.alert"])
async def trend(event: Event[SegmentTrendAlert]) -> None:
    assert_type(event.data.known_duration, Duration | None)


@receiver.on("comment.added", model=Comment)
def comment(event: Event[Comment]) -> None: ...


@receiver.on_any
def audit(event: Event[Any]) -> None: ...


@receiver.on_error
def report(event: Event[Any], error: BaseException) -> None: ...


@receiver.on_outcome
def observe(record: DeliveryRecord) -> None:
    assert_type(record.outcome, Outcome)
    assert_type(record.duration, float)
    assert_type(observe(record), None)  # the registered observer keeps its type


def key(event: Event[Any]) -> str:
    return str(event.data.id)


def lookup(organization_id: str) -> str | None:
    return None


@contextmanager
def unit_of_work(event: Event[Any]) -> Generator[None, None, None]:
    yield


class Handler:
    def __call__(self, event: Event[NoteCreated]) -> None: ...


# a registration hands the function back with its own type, never Any
event = Event("note.created", 1, NoteCreated(id="n-1", author="a", text=""), "o-1", 0, "k")
assert_type(note_created(event), None)
alert = Event("segment.trend.alert", 1, SegmentTrendAlert(duration="DAILY"), "o-1", 0, "k")


async def awaits_trend() -> None:
    assert_type(await trend(alert), None)


assert_type(receiver.on("note.created", Handler()), Handler)
assert_type(receiver.on_any(Handler()), Handler)
assert_type(report(event, ValueError()), None)
note_created(alert)  # error: [arg-type]

# the receiver's configuration
WebhookReceiver(
    secrets=["whsec-new", Secret("whsec-old", not_after=0.0)],
    idempotency_key=key,
    unit_of_work=unit_of_work,
    observers=[observe],
)
WebhookReceiver(secrets={"o-1": "whsec-a", "o-2": ["whsec-b", b"raw"]})
WebhookReceiver(secrets=lookup)
body = b"{}"
assert_type(receiver.process(body, sign(body, "whsec-example", "o-1")), Outcome)
verify(body, None, [Secret("whsec-example")])


# misuse the annotations refuse
def wrong_parameter(event: str) -> None: ...
def generator(event: Event[Any]) -> Iterator[None]:
    yield


async def async_key(event: Event[Any]) -> str:
    return ""


async def async_hook(event: Event[Any], error: BaseException) -> None: ...
async def async_observer(record: DeliveryRecord) -> None: ...


receiver.on("note.created", wrong_parameter)  # error: [type-var]
receiver.on("note.created", generator)  # error: [type-var]
receiver.on("note.created", audit, version="1")  # error: [call-overload]
receiver.on_any(wrong_parameter)  # error: [type-var]
receiver.on_error(async_hook)  # error: [type-var]
receiver.on_error(audit)  # error: [type-var]
receiver.on_outcome(async_observer)  # error: [type-var]
WebhookReceiver(secrets=123)  # error: [arg-type]
WebhookReceiver(secrets=[1])  # error: [list-item]
WebhookReceiver(secrets="whsec", idempotency_key=async_key)  # error: [arg-type]
WebhookReceiver(secrets="whsec", tolerance="300")  # error: [arg-type]
verify(body, None, 42)  # error: [arg-type]
sign("body", "whsec", "o-1")  # error: [arg-type]
receiver.process("body", "t=1,o=o-1,v=x")  # error: [arg-type]


# the API client and its pagination
def list_operations(client: Client) -> None:
    pager = client.operations.iter(state="PENDING")
    assert_type(pager, Pager[OperationsPage, Operation])
    for operation in pager:
        assert_type(operation, Operation)
    Client("key", base_url="https://api.example.com", sleep=asyncio.sleep)  # error: [arg-type]


async def alist_operations(client: AsyncClient) -> None:
    assert_type(await client.operations.list(limit=20), OperationsPage)
    async for operation in client.operations.iter():
        assert_type(operation, Operation)
    AsyncClient("key", base_url="https://x", sleep=lambda seconds: None)  # error: [arg-type]


# the test kit
signed_body, headers = Signer("whsec-example", organization_id="o-1").delivery("note.created", {})
assert_type(signed_body, bytes)
assert_type(headers, dict[str, str])
signer = Signer({"o-1": ["whsec-new", "whsec-old"]}, organization_id="o-1")
assert_type(signer.secret, Secret)  # the newest secret for o-1, resolved
verify(signed_body, headers["Service-Signature"], [signer.secret])
Signer(b"raw-secret", organization_id="o-1")
Signer(123)  # error: [arg-type]
