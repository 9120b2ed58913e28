"""The bad-input catalogue (``tests/helpers/sw_bad_inputs.py``) through the core and the
ASGI adapter.

Every named input gets its documented status and reason from ``process`` (signature as
``bytes`` and as ``str``, the forms the adapters pass), from ``aprocess``, and from the
ASGI adapter through httpx's ``ASGITransport`` (which raises any exception the app
lets out). Nothing answers 5xx; nothing raises.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import sw_bad_inputs as catalogue

from service_webhooks import MemoryStore, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp

SECRET = "whsec-catalogue-0123456789abcdef0123456789abcdef"
ORG = "o-CATALOGUE-na1"
NOW = 1_760_000_000
SIGNER = catalogue.Signer(SECRET, ORG, NOW)

by_name = pytest.mark.parametrize("case", catalogue.CASES, ids=catalogue.NAMES)


class _Calls:
    def __init__(self) -> None:
        self.events: list[object] = []

    def __call__(self, event: object) -> None:
        self.events.append(event)


@pytest.fixture
def handler() -> _Calls:
    return _Calls()


def _receiver(handler: _Calls, *, pinned: bool) -> WebhookReceiver:
    clock = (lambda: float(NOW)) if pinned else None
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), clock=clock)
    receiver.on("note.created", handler)  # no valid case names it: must never run
    return receiver


def _expect_outcome(case: Any, outcome: Any) -> None:
    assert (outcome.status, outcome.reason) == (case.status, case.reason), case.name
    for name, value in case.extra_headers.items():
        assert {k.lower(): v for k, v in outcome.headers}[name] == value
    if case.event_name is not None:
        assert outcome.event_name == case.event_name


def test_the_catalogue_is_big_enough_and_covers_every_kind() -> None:
    assert len(catalogue.CASES) >= 60
    prefixes = {case.name.split("_")[0] for case in catalogue.CASES}
    assert {"header", "pairs", "o", "t", "v", "body", "method", "content", "transfer"} <= prefixes
    assert {case.status for case in catalogue.CASES} == {200, 400, 401, 405, 413}


@by_name
def test_process(case: Any, handler: _Calls) -> None:
    request = case.build(SIGNER)
    receiver = _receiver(handler, pinned=True)
    signature = request.signature()
    _expect_outcome(case, receiver.process(request.body, signature, method=request.method))
    as_text = None if signature is None else signature.decode("latin-1")  # what WSGI gives
    _expect_outcome(case, receiver.process(request.body, as_text, method=request.method))
    assert handler.events == []


@by_name
async def test_aprocess(case: Any, handler: _Calls) -> None:
    request = case.build(SIGNER)
    receiver = _receiver(handler, pinned=True)
    outcome = await receiver.aprocess(request.body, request.signature(), method=request.method)
    _expect_outcome(case, outcome)
    assert handler.events == []


async def _pieces(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


@pytest.mark.parametrize("case", catalogue.WIRE, ids=[c.name for c in catalogue.WIRE])
async def test_asgi_adapter(case: Any, handler: _Calls) -> None:
    signer = catalogue.Signer(SECRET, ORG, catalogue.now())
    request = case.build(signer)
    app = WebhookApp(_receiver(handler, pinned=False))
    transport = httpx.ASGITransport(app=app)  # raise_app_exceptions: a raise fails the test
    content: Any = _pieces(request.chunks()) if request.chunked else request.body
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        response = await client.request(
            request.method, "/webhooks", headers=request.wire_headers(), content=content
        )
    headers = {k.lower(): v for k, v in response.headers.items()}
    if request.chunked:
        assert "content-length" not in response.request.headers
    catalogue.check(case, request.method, response.status_code, headers, response.content)
    assert handler.events == []
