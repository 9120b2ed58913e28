"""The Django view through Django's test clients and through gunicorn and uvicorn
(spec §5.2, §6.1, §7; the status contract of docs/status-codes.md)."""

from __future__ import annotations

import inspect
import threading
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from django.test import AsyncClient, Client
from django.urls import resolve

from service_webhooks.adapters.django import receiver
from service_webhooks.adapters.django.views import webhook_view


def _django_target(kit: ModuleType, client: Any, prefix: str = "") -> Any:
    def send(method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> Any:
        merged: dict[str, str] = {}
        for name, value in headers:  # a WSGI/ASGI server joins repeated headers with ","
            merged[name] = f"{merged[name]},{value}" if name in merged else value
        response = client.generic(
            method, path, data=body, content_type="application/json", headers=merged
        )
        lowered = {k.lower(): v for k, v in response.headers.items()}
        return kit.Answer(response.status_code, lowered, response.content)

    return kit.Target(
        send, kit.claim_in("default"), path=f"{prefix}/webhooks/", broken_path=f"{prefix}/broken/"
    )


def test_status_contract_through_the_test_client(kit: ModuleType, status_row: Any) -> None:
    status_row(_django_target(kit, Client()))


def test_status_contract_through_the_async_client_and_async_view(
    kit: ModuleType, status_row: Any
) -> None:
    assert inspect.iscoroutinefunction(resolve("/async/webhooks/").func)
    client = AsyncClient()

    async def call(*args: Any, **kwargs: Any) -> Any:
        return await client.generic(*args, **kwargs)

    def generic(*args: Any, **kwargs: Any) -> Any:
        return async_to_sync(call)(*args, **kwargs)

    status_row(_django_target(kit, type("C", (), {"generic": staticmethod(generic)}), "/async"))


@pytest.mark.e2e
def test_status_contract_through_a_real_server(
    kit: ModuleType, server: Any, status_row: Any
) -> None:
    with httpx.Client(base_url=server.url, timeout=15) as http:

        def send(method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> Any:
            response = http.request(method, path, headers=headers, content=body)
            lowered = {k.lower(): v for k, v in response.headers.items()}
            return kit.Answer(response.status_code, lowered, response.content)

        status_row(kit.Target(send, kit.claim_in("default")))


@pytest.mark.e2e
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_oversized_body_streamed_to_a_real_server_is_413(
    kit: ModuleType, server: Any, chunked: bool
) -> None:
    assert kit.stream_oversized(server.port, "/webhooks/", chunked=chunked) == 413


@pytest.mark.e2e
def test_chunked_delivery_within_the_limit_is_processed(kit: ModuleType, server: Any) -> None:
    body = kit.envelope()

    def chunks() -> Any:
        yield body[:10]
        yield body[10:]

    headers = {kit.SIGNATURE_HEADER: kit.signed(body)}
    response = httpx.post(server.url + "/webhooks/", content=chunks(), headers=headers, timeout=15)
    assert "content-length" not in response.request.headers
    assert (response.status_code, response.json()["reason"]) == (200, "processed")


@pytest.mark.e2e
def test_the_view_is_async_under_uvicorn_and_sync_under_gunicorn(server: Any) -> None:
    expected = server.process.args[0].endswith("uvicorn")
    assert httpx.get(server.url + "/which/", timeout=15).json() == {"async": expected}


@pytest.mark.e2e
@pytest.mark.services
def test_thirty_concurrent_identical_deliveries_run_the_handler_once_on_postgresql(
    kit: ModuleType, pg: str, tmp_path: Any
) -> None:
    from sw_testapp.models import Delivery

    note_id = uuid.uuid4().hex
    body = kit.envelope(id=note_id, text="slow")  # the handler sleeps 0.5 s
    running = kit.run_server("wsgi", tmp_path, default="pg", threads=4)
    try:
        barrier = threading.Barrier(30)
        answers: list[tuple[int, str]] = []
        lock = threading.Lock()

        def deliver() -> None:
            barrier.wait()
            response = httpx.post(
                running.url + "/webhooks/",
                content=body,
                headers={kit.SIGNATURE_HEADER: kit.signed(body)},
                timeout=30,
            )
            with lock:
                answers.append((response.status_code, response.json()["reason"]))

        threads = [threading.Thread(target=deliver) for _ in range(30)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        retry = httpx.post(
            running.url + "/webhooks/",
            content=body,
            headers={kit.SIGNATURE_HEADER: kit.signed(body)},
        )
    finally:
        kit.stop_server(running)
    assert len(answers) == 30
    assert answers.count((200, "processed")) == 1
    assert {a for a in answers if a != (200, "processed")} <= {
        (503, "in_flight"),
        (200, "duplicate"),
    }
    assert (retry.status_code, retry.json()["reason"]) == (200, "duplicate")
    assert Delivery.objects.using(pg).filter(note_id=note_id).count() == 1


def test_handlers_in_webhooks_py_were_autodiscovered() -> None:
    from sw_testapp import webhooks

    names = {r.handler for r in receiver.router.handlers_for("note.created", 1)}
    assert webhooks.note_created in names
    assert receiver.router.handlers_for("test.raise", 1)[0].handler is webhooks.raises


def test_the_view_is_csrf_exempt_and_outside_atomic_requests(kit: ModuleType) -> None:
    body = kit.envelope()
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        "/webhooks/", data=body, content_type="application/json",
        headers={kit.SIGNATURE_HEADER: kit.signed(body)},
    )  # fmt: skip
    assert response.status_code == 200
    view: Callable[..., Any] = webhook_view()
    assert getattr(view, "csrf_exempt", False) is True
    assert getattr(view, "_non_atomic_requests", set()) == set(connections)  # every database
    assert inspect.iscoroutinefunction(webhook_view(asynchronous=True))
    assert not inspect.iscoroutinefunction(webhook_view(asynchronous=False))


@pytest.mark.parametrize("path", ["/webhooks/", "/async/webhooks/"])
def test_atomic_requests_on_another_database_leaves_deliveries_outside_it(
    kit: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ATOMIC_REQUESTS`` on a database other than ``default`` (where a router may keep
    the app's records): Django refused the async view ("You cannot use ATOMIC_REQUESTS
    with async views", a 500 for every delivery under uvicorn) and ran the plain one in
    a transaction there (here a database that cannot be opened: every delivery failed)."""
    monkeypatch.setitem(connections.settings["down"], "ATOMIC_REQUESTS", True)
    body = kit.envelope()
    headers = {kit.SIGNATURE_HEADER: kit.signed(body)}
    post: Callable[..., Any]
    if path.startswith("/async/"):
        client = AsyncClient()

        async def apost(*args: Any, **kwargs: Any) -> Any:  # 4.2's post is not async-marked
            return await client.post(*args, **kwargs)

        post = async_to_sync(apost)
    else:
        post = Client(raise_request_exception=True).post
    response = post(path, data=body, content_type="application/json", headers=headers)
    assert (response.status_code, response.json()["reason"]) == (200, "processed")


def test_a_form_encoded_delivery_is_read_raw(kit: ModuleType) -> None:
    body = kit.envelope()
    response = Client().post(
        "/webhooks/", data=body, content_type="application/x-www-form-urlencoded",
        headers={kit.SIGNATURE_HEADER: kit.signed(body)},
    )  # fmt: skip
    assert (response.status_code, response.json()["reason"]) == (200, "processed")
