"""The ASGI adapter under a real uvicorn and ``service-webhooks listen``: mount points,
both URL spellings, case-sensitive methods and repeated signature lines, each through
a raw socket (spec §5.2, §6.1, §7)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.e2e


def note() -> bytes:
    return (
        b'{"eventName":"note.created","version":1,"data":{"id":"%s",'
        b'"author":"ana@example.com","text":"hi"}}' % uuid.uuid4().hex.encode()
    )


def deliver(kit: ModuleType, port: int, path: str, *, method: str = "POST") -> tuple[int, str]:
    body = note()
    answer = kit.raw_request(port, kit.signed_head(method, path, body), body)
    if answer.status == 400 and answer.body == b"Invalid HTTP request received.":
        return 400, "refused_by_the_server"  # uvicorn on httptools: before any app runs
    return answer.status, answer.reason


REFUSED = {(405, "method_not_allowed"), (400, "refused_by_the_server")}
"""A lower-case method is refused either by the app (h11) or by uvicorn (httptools)."""


@pytest.fixture(scope="module")
def mounted(serve: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``Mount("/api", app=WebhookMiddleware(...))`` in a Starlette app."""
    server = serve("mounted", tmp_path_factory.mktemp("mounted"))
    yield server
    server.process.terminate()
    server.process.wait(10)


@pytest.fixture(scope="module")
def root_path(serve: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``WebhookMiddleware`` under ``uvicorn --root-path /api`` (behind a proxy that
    strips ``/api``: the request reaches uvicorn as ``/webhooks``)."""
    server = serve("middleware", tmp_path_factory.mktemp("root"), "--root-path", "/api")
    yield server
    server.process.terminate()
    server.process.wait(10)


@pytest.fixture(scope="module", params=["middleware", "routes"])
def plain(
    serve: Any, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """``WebhookMiddleware(path="/webhooks")`` or ``webhook_routes(receiver, "/webhooks")``."""
    server = serve(request.param, tmp_path_factory.mktemp(request.param))
    yield server
    server.process.terminate()
    server.process.wait(10)


def calls(server: Any) -> list[str]:
    path = Path(server.log).with_name("calls")
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("path", ["/api/webhooks", "/api/webhooks/"])
def test_middleware_inside_a_starlette_mount_processes_deliveries(
    kit: ModuleType, mounted: Any, path: str
) -> None:
    assert deliver(kit, mounted.port, path) == (200, "processed")


def test_a_mount_leaves_other_paths_alone(kit: ModuleType, mounted: Any) -> None:
    body = note()
    assert (
        kit.raw_request(mounted.port, kit.signed_head("POST", "/webhooks", body), body).status
        == 404
    )
    assert kit.raw_request(mounted.port, ["GET /api/ HTTP/1.1"]).body == b"home"


@pytest.mark.parametrize("path", ["/webhooks", "/webhooks/"])
def test_middleware_under_uvicorn_root_path_processes_deliveries(
    kit: ModuleType, root_path: Any, path: str
) -> None:
    assert deliver(kit, root_path.port, path) == (200, "processed")


@pytest.mark.parametrize("path", ["/webhooks", "/webhooks/"])
def test_both_spellings_are_processed_never_redirected(
    kit: ModuleType, plain: Any, path: str
) -> None:
    before = len(calls(plain))
    assert deliver(kit, plain.port, path) == (200, "processed")
    assert len(calls(plain)) == before + 1


@pytest.mark.parametrize("path", ["/webhooks//", "/webhooks///"])
def test_repeated_trailing_slashes_are_404_never_redirected(
    kit: ModuleType, plain: Any, path: str
) -> None:
    """Starlette's ``redirect_slashes`` would answer 307 to ``/webhooks`` (spec §7)."""
    before = len(calls(plain))
    body = note()
    answer = kit.raw_request(plain.port, kit.signed_head("POST", path, body), body)
    assert answer.status == 404, answer.headers
    assert len(calls(plain)) == before


@pytest.fixture(scope="module")
def prefixed(serve: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``webhook_routes`` in an ``APIRouter`` included in FastAPI with ``prefix="/hooks"``."""
    server = serve("fastapi_prefixed", tmp_path_factory.mktemp("prefixed"))
    yield server
    server.process.terminate()
    server.process.wait(10)


@pytest.mark.parametrize("tail", ["", "/", "//", "///"])
def test_routes_included_with_a_prefix_in_fastapi_are_never_redirected(
    kit: ModuleType, prefixed: Any, tail: str
) -> None:
    """FastAPI's ``include_router`` rebuilds each route as a plain ``Route`` from its
    path and endpoint: every run of trailing slashes must still be a 404, not a 307."""
    body = note()
    path = "/hooks/webhooks" + tail
    answer = kit.raw_request(prefixed.port, kit.signed_head("POST", path, body), body)
    if len(tail) > 1:
        assert (answer.status, answer.body) == (404, b'{"detail":"Not Found"}'), answer.headers
    else:
        assert (answer.status, answer.reason) == (200, "processed")


@pytest.mark.parametrize("method", ["post", "Post", "GET", "PUT"])
def test_a_method_other_than_post_is_405_under_uvicorn(
    kit: ModuleType, plain: Any, method: str
) -> None:
    before = len(calls(plain))
    answer = deliver(kit, plain.port, "/webhooks", method=method)
    if method.upper() == "POST":
        assert answer in REFUSED
    else:
        assert answer == (405, "method_not_allowed")
    assert len(calls(plain)) == before


def test_a_lower_case_post_is_405_under_listen(kit: ModuleType, listen: int) -> None:
    assert deliver(kit, listen, "/webhooks", method="post") in REFUSED
    assert deliver(kit, listen, "/webhooks") == (200, "processed")


def _repeated(kit: ModuleType, port: int, split: bool) -> tuple[int, str]:
    body = note()
    lines = kit.split_signature(body) if split else (kit.signed(body), kit.signed(body))
    answer = kit.raw_request(port, kit.signed_head("POST", "/webhooks", body, *lines), body)
    return answer.status, answer.reason


@pytest.mark.parametrize("split", [False, True], ids=["two-full-lines", "two-partial-lines"])
def test_two_signature_lines_are_refused_under_uvicorn(
    kit: ModuleType, plain: Any, split: bool
) -> None:
    before = len(calls(plain))
    assert _repeated(kit, plain.port, split) == (401, "format")
    assert len(calls(plain)) == before


@pytest.mark.parametrize("split", [False, True], ids=["two-full-lines", "two-partial-lines"])
def test_two_signature_lines_are_refused_under_listen(
    kit: ModuleType, listen: int, split: bool
) -> None:
    assert _repeated(kit, listen, split) == (401, "format")


def test_success_body_false_answers_200_with_an_empty_body_under_uvicorn(
    kit: ModuleType, serve: Any, tmp_path: Path
) -> None:
    server = serve("quiet", tmp_path)
    try:
        kit.expect_empty_successes(server.port, "/webhooks", note())
        assert len(calls(server)) == 1  # the duplicate ran nothing
    finally:
        server.process.terminate()
        server.process.wait(10)


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_whitespace_around_the_signature_value_is_not_part_of_it(
    kit: ModuleType, serve: Any, tmp_path: Path, http: str
) -> None:
    """Optional whitespace is not part of a field value (RFC 9110 §5.5). uvicorn on h11
    drops it; on httptools (uvicorn[standard]) it keeps what follows the value, which
    must not turn a correctly signed delivery into a 401 (not retried: a lost event)."""
    server = serve("middleware", tmp_path, "--http", http)
    try:
        body = note()
        head = kit.signed_head("POST", "/webhooks", body, f"{kit.signed(body)} \t")
        answer = kit.raw_request(server.port, head, body)
        assert (answer.status, answer.reason) == (200, "processed")
        assert len(calls(server)) == 1
    finally:
        server.process.terminate()
        server.process.wait(10)
