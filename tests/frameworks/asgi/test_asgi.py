"""ASGI adapter through Starlette's own test client, FastAPI and plain ASGI."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route, Router
from starlette.testclient import TestClient

from service_webhooks import MAX_BODY_SIZE, Event, MemoryStore, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp, WebhookMiddleware, webhook_routes

Signed = Callable[..., tuple[bytes, str]]


@pytest.fixture
def receiver(secret: str) -> WebhookReceiver:
    receiver = WebhookReceiver(secrets=secret, store=MemoryStore())
    receiver.on("note.created", lambda event: None)
    return receiver


def post(client: TestClient, path: str, body: bytes, header: str | None, **kw: Any) -> Any:
    headers = {"Service-Signature": header} if header is not None else {}
    return client.post(path, content=body, headers=headers, **kw)


def test_routed_app_in_starlette(receiver: WebhookReceiver, signed: Signed) -> None:
    app = Starlette(routes=[Route("/webhooks", WebhookApp(receiver))])
    with TestClient(app, follow_redirects=False) as client:
        response = post(client, "/webhooks", *signed())
        assert response.status_code == 200
        assert response.json() == {"status": 200, "reason": "processed"}
        assert response.headers["content-type"] == "application/json"


def test_middleware_passes_other_paths_and_scopes_through(
    receiver: WebhookReceiver, signed: Signed
) -> None:
    async def home(request: Request) -> PlainTextResponse:
        return PlainTextResponse("home")

    app = WebhookMiddleware(Starlette(routes=[Route("/", home)]), receiver=receiver)
    with TestClient(app, follow_redirects=False) as client:  # lifespan scope passes through too
        assert client.get("/").text == "home"
        assert post(client, "/webhooks", *signed()).status_code == 200
        assert client.get("/webhooks/other").status_code == 404


def test_fastapi_route(receiver: WebhookReceiver, signed: Signed) -> None:
    api = FastAPI()
    api.add_route("/hooks", WebhookApp(receiver), methods=["POST"])
    with TestClient(api, follow_redirects=False) as client:
        assert post(client, "/hooks", *signed()).status_code == 200


def test_a_mount_would_redirect_which_the_service_never_follows(
    receiver: WebhookReceiver, signed: Signed
) -> None:
    """Why the docs say Route: a Mount answers POST /webhooks with 307 (retried forever)."""
    app = Starlette(routes=[Mount("/webhooks", app=WebhookApp(receiver))])
    with TestClient(app, follow_redirects=False) as client:
        assert post(client, "/webhooks", *signed()).status_code == 307
        assert post(client, "/webhooks/", *signed()).status_code == 200


@pytest.mark.parametrize(
    ("case", "status", "reason"),
    [
        ("ok", 200, "processed"),
        ("no_header", 401, "format"),
        ("bad_signature", 401, "signature"),
        ("repeated_header", 401, "format"),
        ("malformed", 400, "malformed_envelope"),
        ("too_large", 413, "payload_too_large"),
        ("get", 405, "method_not_allowed"),
    ],
)
def test_status_table_through_the_test_client(
    receiver: WebhookReceiver, signed: Signed, case: str, status: int, reason: str
) -> None:
    body, header = signed()
    with TestClient(WebhookApp(receiver), follow_redirects=False) as client:
        if case == "no_header":
            response = post(client, "/", body, None)
        elif case == "bad_signature":
            response = post(client, "/", body + b" ", header)
        elif case == "repeated_header":
            response = client.post(
                "/",
                content=body,
                headers=[("Service-Signature", header), ("Service-Signature", header)],
            )
        elif case == "malformed":
            response = post(client, "/", *signed(b"[]"))
        elif case == "too_large":
            response = post(client, "/", b"x" * (MAX_BODY_SIZE + 1), header)
        elif case == "get":
            response = client.get("/")
        else:
            response = post(client, "/", body, header)
    assert (response.status_code, response.json()["reason"]) == (status, reason)


async def test_body_read_in_chunks_stops_at_the_cap(receiver: WebhookReceiver) -> None:
    """Without Content-Length, the adapter reads no more than the cap plus one chunk."""
    chunk = b"x" * 65536
    sent = 0
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        sent += 1
        return {"type": "http.request", "body": chunk, "more_body": sent < 1000}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    await WebhookApp(receiver)(scope, receive, send)
    assert messages[0]["status"] == 413
    assert sent == MAX_BODY_SIZE // len(chunk) + 1  # 17 chunks of 1000 read


async def test_declared_oversize_is_answered_without_reading(receiver: WebhookReceiver) -> None:
    async def receive() -> dict[str, Any]:
        raise AssertionError("the body must not be read")

    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    headers = [(b"content-length", str(20 * 2**20).encode())]
    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    await WebhookApp(receiver)(scope, receive, send)
    assert messages[0]["status"] == 413


async def test_client_disconnect_processes_nothing(receiver: WebhookReceiver) -> None:
    calls: list[Event[Any]] = []
    receiver.on_any(calls.append)
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    await WebhookApp(receiver)(scope, receive, send)
    assert (messages, calls) == ([], [])


def test_adapter_refuses_a_non_receiver() -> None:
    with pytest.raises(TypeError):
        WebhookApp(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="start with"):
        WebhookMiddleware(WebhookApp.__call__, receiver=None, path="webhooks")  # type: ignore[arg-type]


def test_concurrent_duplicates_in_process_run_the_handler_once(secret: str, signed: Signed) -> None:
    receiver = WebhookReceiver(secrets=secret, store=MemoryStore())
    calls: list[int] = []

    @receiver.on("note.created")
    async def slow(event: Event[Any]) -> None:
        await asyncio.sleep(0.05)
        calls.append(1)

    body, header = signed()
    app = WebhookApp(receiver)

    async def run() -> list[int]:
        import httpx

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            responses = await asyncio.gather(
                *(
                    client.post("/", content=body, headers={"Service-Signature": header})
                    for _ in range(30)
                )
            )
        return [r.status_code for r in responses]

    statuses = asyncio.run(run())
    assert calls == [1]
    assert statuses.count(200) >= 1
    assert set(statuses) <= {200, 503}


def test_webhook_routes_is_typed_as_starlette_routes(receiver: WebhookReceiver) -> None:
    """``webhook_routes`` is annotated ``list[Route]``, not ``list[Any]``: type checkers
    see what ``Starlette(routes=...)`` and FastAPI's ``router.routes`` take."""
    import typing

    from service_webhooks.adapters import asgi

    assert typing.get_type_hints(asgi.webhook_routes, vars(asgi) | {"Route": Route}) == {
        "receiver": WebhookReceiver,
        "path": str,
        "return": list[Route],
    }
    assert all(isinstance(route, Route) for route in asgi.webhook_routes(receiver))


def _slashes_apps(receiver: WebhookReceiver) -> dict[str, Any]:
    async def home(request: Request) -> PlainTextResponse:
        return PlainTextResponse("home")

    api = FastAPI()
    api.router.routes.extend(webhook_routes(receiver, "/webhooks"))
    router = APIRouter()
    router.routes.extend(webhook_routes(receiver, "/webhooks"))
    included = FastAPI()
    included.include_router(router, prefix="/api")  # rebuilds each route from its path
    return {
        "starlette": Starlette(routes=[*webhook_routes(receiver, "/webhooks"), Route("/", home)]),
        "fastapi": api,
        "mount": Starlette(routes=[Mount("/api", routes=webhook_routes(receiver, "/webhooks"))]),
        "included": included,
        "router": Router(routes=webhook_routes(receiver, "/webhooks")),  # no app around it
    }


@pytest.mark.parametrize("kind", ["starlette", "fastapi", "mount", "included", "router"])
@pytest.mark.parametrize("tail", ["//", "///"])
def test_webhook_routes_answer_repeated_trailing_slashes_404_not_307(
    receiver: WebhookReceiver, signed: Signed, kind: str, tail: str
) -> None:
    """Starlette's ``redirect_slashes`` would answer ``/webhooks//`` with a 307 to
    ``/webhooks`` (a 3xx the service never follows, spec §7): a plain 404 instead."""
    app = _slashes_apps(receiver)[kind]
    prefix = "/api" if kind in ("mount", "included") else ""
    with TestClient(app, follow_redirects=False) as client:
        response = post(client, prefix + "/webhooks" + tail, *signed())
        assert response.status_code == 404, response.headers.get("location")
        if kind in ("fastapi", "included"):  # the app's own 404 answer
            assert response.json() == {"detail": "Not Found"}
        elif kind == "router":  # Starlette's Router.not_found outside an app
            assert response.text == "Not Found"
        assert post(client, prefix + "/webhooks/", *signed()).status_code == 200


def test_webhook_routes_leave_the_apps_other_routes_and_redirects_alone(
    receiver: WebhookReceiver, signed: Signed
) -> None:
    async def page(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.url.path)

    routes = [*webhook_routes(receiver, "/webhooks"), Route("/about", page)]
    catch_all = Route("/{rest:path}", page, methods=["GET"])  # after the webhook routes
    with TestClient(Starlette(routes=[*routes, catch_all]), follow_redirects=False) as client:
        assert client.get("/webhooks//").text == "/webhooks//"  # the app's route still wins
    with TestClient(Starlette(routes=routes), follow_redirects=False) as client:
        assert client.get("/about/").status_code == 307  # redirect_slashes is still on
