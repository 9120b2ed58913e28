"""The ASGI mounts inside FastAPI applications composed as users compose them, under a
real uvicorn: routes, ``add_middleware`` and a mounted sub-application, each inside
GZip, CORS, TrustedHost, ``BaseHTTPMiddleware`` and an exception-catching middleware.
Every row of the status contract comes out unchanged (never a 3xx), and the redirects
the quick start warns about are what it says (spec §6.1, §7)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import sw_contract

pytestmark = pytest.mark.e2e
pytest_generate_tests = sw_contract.pytest_generate_tests  # status_row: every row

HERE = Path(__file__).parent
PREFIX = {"routes": "", "middleware": "", "mounted": "/sub"}


def start(kit: ModuleType, app: str, tmp: Path, *options: str) -> Any:
    """``composed_apps:<app>`` under uvicorn, its store in ``tmp``."""
    port = kit.free_port()
    argv = [
        str(kit.BIN / "uvicorn"), f"composed_apps:{app}", "--app-dir", str(HERE),
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
        "--no-access-log", *options,
    ]  # fmt: skip
    env = {
        "SW_SECRET": kit.SECRET,
        "SW_STORE": str(tmp / "store.sqlite3"),
        "SW_BROKEN_STORE": str(tmp / "missing" / "store.sqlite3"),
    }
    return kit.start_server(argv, cwd=HERE, env=env, log=tmp / "uvicorn.log", port=port)


@pytest.fixture(scope="module", params=list(PREFIX))
def composed(
    kit: ModuleType, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, str, str]]:
    """(server, URL prefix, store path) of one composition."""
    tmp = tmp_path_factory.mktemp(request.param)
    server = start(kit, request.param, tmp)
    yield server, PREFIX[request.param], str(tmp / "store.sqlite3")
    kit.stop_server(server)


def test_status_contract_through_the_users_middleware(
    kit: ModuleType, composed: tuple[Any, str, str], status_row: Any
) -> None:
    """httpx asks for gzip (GZipMiddleware compresses every answer) and sends an
    ``Origin`` (CORSMiddleware adds its header): the status and the headers the service
    acts on (``Retry-After``, ``Allow``) are the receiver's."""
    server, prefix, store_path = composed
    with httpx.Client(base_url=server.url, timeout=10) as http:

        def send(method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> Any:
            headers = [*headers, ("Origin", "https://app.example")]
            response = http.request(method, prefix + path, headers=headers, content=body)
            assert response.headers["x-stack"] == "seen"  # it went through the stack
            lowered = {k.lower(): v for k, v in response.headers.items()}
            return kit.Answer(response.status_code, lowered, response.content)

        status_row(kit.Target(send, kit.sqlite_claim(store_path)))


@pytest.mark.parametrize("framing", ["content-length", "chunked", "expect-100-continue"])
@pytest.mark.parametrize("tail", ["", "/", "?source=service", "/?source=service"])
def test_deliveries_as_clients_send_them_are_processed(
    kit: ModuleType, composed: tuple[Any, str, str], framing: str, tail: str
) -> None:
    server, prefix, _ = composed
    body = kit.envelope()
    head = kit.signed_head("POST", f"{prefix}/webhooks{tail}", body)
    if framing == "chunked":
        framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        sock = kit.raw_open(server.port, [*head, "Transfer-Encoding: chunked"], framed)
    else:
        length = f"Content-Length: {len(body)}"
        if framing == "content-length":
            sock = kit.raw_open(server.port, [*head, length], body)
        else:
            sock = kit.raw_open(server.port, [*head, length, "Expect: 100-continue"])
            interim = b""
            while b"\r\n\r\n" not in interim:
                interim += sock.recv(1)
            assert interim.startswith(b"HTTP/1.1 100 "), interim
            sock.sendall(body)
    try:
        answer = kit.raw_answer(sock)
    finally:
        sock.close()
    assert (answer.status, answer.reason) == (200, "processed")


def test_other_methods_and_a_cors_preflight(
    kit: ModuleType, composed: tuple[Any, str, str]
) -> None:
    """A preflight is CORSMiddleware's to answer (the service never sends one); any
    other method reaches the receiver: 405 with ``Allow: POST``."""
    server, prefix, _ = composed
    url = f"{server.url}{prefix}/webhooks"
    for method in ("HEAD", "GET", "OPTIONS"):
        response = httpx.request(method, url, timeout=10)
        assert (response.status_code, response.headers["allow"]) == (405, "POST"), method
    preflight = httpx.options(
        url,
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
        timeout=10,
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"


@pytest.fixture(scope="module")
def hazards(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The three apps of the quick start's warnings, by name."""
    servers = {}
    try:
        for app in ("https_redirect", "https_redirect_wrapped", "mount_at_path"):
            servers[app] = start(kit, app, tmp_path_factory.mktemp(app))
        yield servers
    finally:
        for server in servers.values():
            kit.stop_server(server)


def _post(kit: ModuleType, port: int, path: str, *extra: str) -> Any:
    body = kit.envelope()
    return kit.raw_request(port, [*kit.signed_head("POST", path, body), *extra], body)


def test_https_redirect_middleware_redirects_deliveries_over_plain_http(
    kit: ModuleType, hazards: dict[str, Any]
) -> None:
    """Behind a proxy that ends TLS, uvicorn sees ``http`` unless the proxy's
    ``X-Forwarded-Proto`` is trusted (uvicorn trusts 127.0.0.1 by default)."""
    port = hazards["https_redirect"].port
    answer = _post(kit, port, "/webhooks")
    assert (answer.status, answer.headers["location"]) == (307, "https://127.0.0.1/webhooks")
    forwarded = _post(kit, port, "/webhooks", "X-Forwarded-Proto: https")
    assert (forwarded.status, forwarded.reason) == (200, "processed")
    wrapped = _post(kit, hazards["https_redirect_wrapped"].port, "/webhooks")
    assert (wrapped.status, wrapped.reason) == (200, "processed")


def test_an_app_mounted_at_the_webhook_path_redirects_it(
    kit: ModuleType, hazards: dict[str, Any]
) -> None:
    """``app.mount("/webhooks", WebhookApp(...))``: Starlette answers ``/webhooks``
    with a 307 to ``/webhooks/``, which the service never follows."""
    port = hazards["mount_at_path"].port
    answer = _post(kit, port, "/webhooks")
    assert (answer.status, answer.headers["location"]) == (307, "http://127.0.0.1/webhooks/")
    assert _post(kit, port, "/webhooks/").status == 200
