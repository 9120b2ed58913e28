"""``webhook_asgi`` in process (the uvicorn runs are in test_servers.py): deliveries
reach the project receiver before Django, everything else reaches Django."""

from __future__ import annotations

import asyncio
import uuid
from types import ModuleType
from typing import Any

import httpx
from django.core.asgi import get_asgi_application

from service_webhooks import MAX_BODY_SIZE
from service_webhooks.adapters.django.asgi import webhook_asgi


def _request(app: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await c.request(method, path, **kwargs)

    return asyncio.run(go())


def test_a_delivery_is_processed_and_other_paths_reach_django(kit: ModuleType) -> None:
    app = webhook_asgi(get_asgi_application(), path="/webhooks")
    body = kit.envelope(id=uuid.uuid4().hex)
    headers = {kit.SIGNATURE_HEADER: kit.signed(body)}
    response = _request(app, "POST", "/webhooks", content=body, headers=headers)
    assert (response.status_code, response.json()["reason"]) == (200, "processed")
    again = _request(app, "POST", "/webhooks/", content=body, headers=headers)
    assert again.json()["reason"] == "duplicate"  # both spellings, one receiver
    other = _request(app, "GET", "/no-such-page/")
    assert other.status_code == 404  # Django's own answer, not the receiver's JSON
    assert "reason" not in other.text


def test_a_declared_oversized_body_is_413_and_other_methods_405(kit: ModuleType) -> None:
    app = webhook_asgi(get_asgi_application(), path="/webhooks")
    headers = {"Content-Length": str(MAX_BODY_SIZE + 1), kit.SIGNATURE_HEADER: "o:x,t:1,v:AA"}
    big = _request(app, "POST", "/webhooks", content=b"x" * (MAX_BODY_SIZE + 1), headers=headers)
    assert (big.status_code, big.json()["reason"]) == (413, "payload_too_large")
    get = _request(app, "GET", "/webhooks")  # httpx upper-cases "post": raw sockets elsewhere
    assert (get.status_code, get.headers["allow"]) == (405, "POST")
