"""The Flask adapter under gunicorn: both URL spellings, case-sensitive POST, repeated
signature lines (with and without the gunicorn hook) and a slow client under the
recommended set-up; under werkzeug's development server (``flask run``): what that
server does on its own (spec §5.2, §6.1, §7)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

HOOK = ["-c", "python:service_webhooks.adapters.gunicorn"]
RECOMMENDED = [*HOOK, "--worker-class", "gthread", "--threads", "8", "--timeout", "30"]


def serve(kit: ModuleType, tmp: Path, *options: str, success_body: bool = True) -> Any:
    """The test app under gunicorn, 1 worker, with ``options``."""
    port = kit.free_port()
    argv = [
        str(kit.BIN / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "1",
        "--graceful-timeout", "2", "--log-level", "warning", "--chdir", str(kit.APP_DIR),
        *options, kit.APP,
    ]  # fmt: skip
    env = {
        "SW_TEST_STORE": str(tmp / "store.sqlite3"),
        "SW_TEST_BROKEN_STORE": str(tmp / "x" / "y"),
        "SW_TEST_SUCCESS_BODY": "1" if success_body else "0",
    }
    return kit.start_server(argv, cwd=kit.APP_DIR, env=env, log=tmp / "gunicorn.log", port=port)


@pytest.fixture(scope="module")
def recommended(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    running = serve(kit, tmp_path_factory.mktemp("recommended"), *RECOMMENDED)
    yield running
    kit.stop_server(running)


@pytest.fixture(scope="module")
def without_hook(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    running = serve(kit, tmp_path_factory.mktemp("plain"), "--threads", "4")
    yield running
    kit.stop_server(running)


@pytest.fixture(scope="module")
def flask_run(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The test app under ``flask run`` (werkzeug's development server, threaded)."""
    tmp = tmp_path_factory.mktemp("flask-run")
    port = kit.free_port()
    argv = [str(kit.BIN / "flask"), "--app", kit.APP, "run", "--port", str(port)]
    env = {
        "SW_TEST_STORE": str(tmp / "store.sqlite3"),
        "SW_TEST_BROKEN_STORE": str(tmp / "x" / "y"),
    }
    running = kit.start_server(argv, cwd=kit.APP_DIR, env=env, log=tmp / "flask.log", port=port)
    yield running
    kit.stop_server(running)


def send(kit: ModuleType, port: int, path: str, *lines: str, method: str = "POST") -> Any:
    body = kit.envelope()
    signatures = [line(body) for line in lines] if lines else []
    head = kit.contract.signed_head(method, path, body, *signatures)
    return kit.contract.raw_request(port, head, body)


@pytest.mark.parametrize("path", ["/webhooks", "/webhooks/"])
def test_both_spellings_are_processed_under_gunicorn(
    kit: ModuleType, recommended: Any, path: str
) -> None:
    answer = send(kit, recommended.port, path)
    assert (answer.status, answer.reason) == (200, "processed")


def test_a_lower_case_post_is_never_processed_under_gunicorn(
    kit: ModuleType, recommended: Any
) -> None:
    answer = send(kit, recommended.port, "/webhooks", method="post")
    assert answer.status in (400, 405)  # gunicorn may refuse the method itself (400)
    assert answer.status != 200


def _partial(kit: ModuleType) -> tuple[Any, Any]:
    return (
        lambda body: kit.contract.split_signature(body)[0],
        lambda body: kit.contract.split_signature(body)[1],
    )


@pytest.mark.parametrize("split", [False, True], ids=["two-full-lines", "two-partial-lines"])
def test_two_signature_lines_are_refused_under_gunicorn_with_the_hook(
    kit: ModuleType, recommended: Any, split: bool
) -> None:
    lines = _partial(kit) if split else (kit.signed, kit.signed)
    answer = send(kit, recommended.port, "/webhooks", *lines)
    assert (answer.status, answer.reason) == (401, "format")


def test_without_the_hook_gunicorn_joins_two_lines_with_a_comma(
    kit: ModuleType, without_hook: Any
) -> None:
    """What docs/security.md says of a WSGI server without the hook: two full lines
    joined hold six pairs (refused), two partial lines joined read as one valid value."""
    full = send(kit, without_hook.port, "/webhooks", kit.signed, kit.signed)
    assert (full.status, full.reason) == (401, "format")
    partial = send(kit, without_hook.port, "/webhooks", *_partial(kit))
    assert (partial.status, partial.reason) == (200, "processed")


def _still_open(sock: socket.socket) -> bool:
    """Nothing answered and not closed by the server."""
    sock.setblocking(False)
    try:
        return not sock.recv(1)
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)


def test_a_slow_client_does_not_delay_other_deliveries_under_the_recommended_setup(
    kit: ModuleType, recommended: Any
) -> None:
    body = kit.envelope()
    head = kit.contract.signed_head("POST", "/webhooks", body)
    headers_trickler = socket.create_connection(("127.0.0.1", recommended.port), timeout=30)
    headers_trickler.sendall(b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no end
    body_trickler = kit.contract.raw_open(
        recommended.port, [*head, f"Content-Length: {len(body)}"], body[:10]
    )
    try:
        answer = send(kit, recommended.port, "/webhooks")  # waits 30 s at most
        assert (answer.status, answer.reason) == (200, "processed")
        assert _still_open(headers_trickler) is True
        assert _still_open(body_trickler) is True
    finally:
        headers_trickler.close()
        body_trickler.close()


def test_success_body_false_answers_200_with_an_empty_body_under_gunicorn(
    kit: ModuleType, tmp_path: Path
) -> None:
    running = serve(kit, tmp_path, *RECOMMENDED, success_body=False)
    try:
        kit.contract.expect_empty_successes(running.port, "/webhooks", kit.envelope())
    finally:
        kit.stop_server(running)


@pytest.mark.parametrize("breakage", ["bad-chunk-size", "missing-terminator", "cut-short"])
def test_a_broken_chunked_body_is_refused_not_a_500_under_gunicorn(
    kit: ModuleType, recommended: Any, breakage: str
) -> None:
    """gunicorn raises from ``wsgi.input.read`` for such a body; the view takes that as
    the end of the body, so the core refuses it (docs/security.md: no input makes the
    receiver answer 500, which the service would retry)."""
    answer = kit.contract.broken_chunked_request(
        recommended.port, "/webhooks", kit.envelope(), breakage
    )
    assert (answer.status, answer.reason) == (401, "signature")
    assert "Traceback" not in recommended.log.read_text()


def test_flask_run_joins_two_lines_with_a_comma(kit: ModuleType, flask_run: Any) -> None:
    """docs/security.md: werkzeug's development server joins repeated lines like gunicorn
    without the hook, and takes no hook."""
    full = send(kit, flask_run.port, "/webhooks", kit.signed, kit.signed)
    assert (full.status, full.reason) == (401, "format")
    partial = send(kit, flask_run.port, "/webhooks", *_partial(kit))
    assert (partial.status, partial.reason) == (200, "processed")


@pytest.mark.parametrize(("size", "status"), [(300, 200), (2**20 + 1, 413)], ids=["small", "over"])
def test_flask_run_reads_chunked_bodies(
    kit: ModuleType, flask_run: Any, size: int, status: int
) -> None:
    """docs/flask.md: werkzeug's development server terminates a chunked input stream."""
    body = kit.envelope(text="x" * size)
    head = [*kit.contract.signed_head("POST", "/webhooks", body), "Transfer-Encoding: chunked"]
    sock = kit.contract.raw_open(flask_run.port, head, b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    try:
        answer = kit.contract.raw_answer(sock)
    finally:
        sock.close()
    assert answer.status == status


@pytest.mark.parametrize(("server", "interim"), [("recommended", [100]), ("flask_run", [100, 100])])
def test_expect_100_continue_is_answered_by_the_server_then_413(
    kit: ModuleType, request: pytest.FixtureRequest, server: str, interim: list[int]
) -> None:
    """docs/flask.md: a WSGI server sends ``100 Continue`` before the view runs (werkzeug's
    development server twice); the view then answers an announced oversized body 413
    without reading it (the body is never sent here)."""
    running = request.getfixturevalue(server)
    body = kit.envelope()
    answer = kit.contract.expect_continue_with_length(running.port, "/webhooks", body, 2**21)
    assert (answer.interim, answer.status, answer.reason) == (interim, 413, "payload_too_large")


@pytest.mark.parametrize("hook", ["before", "after"])
@pytest.mark.parametrize("server", ["recommended", "flask_run"])
def test_an_app_hook_reading_the_body_leaves_the_delivery_intact(
    kit: ModuleType, request: pytest.FixtureRequest, server: str, hook: str
) -> None:
    """An app-wide hook calling ``request.get_data()`` before the view (the view read the
    server's stream again: gunicorn gave it nothing, a 401 the service never retries, and
    ``flask run`` blocked until the client gave up) or after it (the same, the other way
    round): the delivery is processed and the hook gets the exact body."""
    running = request.getfixturevalue(server)
    body = kit.envelope()
    head = [*kit.contract.signed_head("POST", "/webhooks", body), f"X-Test-Read-Body: {hook}"]
    sock = kit.contract.raw_open(running.port, [*head, f"Content-Length: {len(body)}"], body)
    sock.settimeout(5)
    try:
        answer = kit.contract.raw_answer(sock)
    finally:
        sock.close()
    assert (answer.status, answer.reason) == (200, "processed")
    if hook == "after":
        assert answer.headers["x-test-body-size"] == str(len(body))
