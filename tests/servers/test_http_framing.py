"""HTTP framing under a real uvicorn, on both of its parsers: a body of exactly the
1 MiB limit and one byte more, with ``Content-Length`` or chunked; ``Expect:
100-continue``; deliveries pipelined on one keep-alive connection (spec §2.7, §6.1)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any, BinaryIO

import pytest

from service_webhooks import MAX_BODY_SIZE

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=["h11", "httptools"])
def server(
    serve: Any, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """``WebhookMiddleware(path="/webhooks")`` under uvicorn with the given parser."""
    running = serve("middleware", tmp_path_factory.mktemp(request.param), "--http", request.param)
    yield running
    running.process.terminate()
    running.process.wait(10)


def note_of_size(size: int) -> bytes:
    """A ``note.created`` envelope of exactly ``size`` bytes (padded in an extra field)."""
    data = {"id": uuid.uuid4().hex, "author": "ana@example.com", "text": "hi"}
    body = json.dumps({"eventName": "note.created", "version": 1, "data": data, "pad": ""})
    return body.encode()[:-2] + b"x" * (size - len(body)) + b'"}'


def chunked(body: bytes) -> bytes:
    """``body`` as two chunks and the last (empty) one."""
    half = len(body) // 2
    return b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, body[:half], len(body) - half, body[half:])


@pytest.mark.parametrize(
    ("size", "status"), [(MAX_BODY_SIZE, 200), (MAX_BODY_SIZE + 1, 413)], ids=["limit", "over"]
)
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_at_the_limit_is_processed_and_one_byte_more_is_413(
    kit: ModuleType, server: Any, size: int, status: int, framing: str
) -> None:
    body = note_of_size(size)
    head = kit.signed_head("POST", "/webhooks", body)
    if framing == "chunked":
        sock = kit.raw_open(server.port, [*head, "Transfer-Encoding: chunked"], chunked(body))
    else:
        sock = kit.raw_open(server.port, [*head, f"Content-Length: {size}"], body)
    try:
        answer = kit.raw_answer(sock)
    finally:
        sock.close()
    assert answer.status == status


def test_expect_100_continue_gets_100_then_the_answer(kit: ModuleType, server: Any) -> None:
    body = note_of_size(300)
    head = [*kit.signed_head("POST", "/webhooks", body), f"Content-Length: {len(body)}"]
    sock = kit.raw_open(server.port, [*head, "Expect: 100-continue"])
    try:
        assert sock.recv(64).startswith(b"HTTP/1.1 100 ")
        sock.sendall(body)
        answer = kit.raw_answer(sock)
    finally:
        sock.close()
    assert (answer.status, answer.reason) == (200, "processed")


def test_expect_100_continue_with_an_oversized_length_gets_413_and_no_100(
    kit: ModuleType, server: Any
) -> None:
    """uvicorn sends ``100 Continue`` only when the app reads the body; the receiver
    answers an announced oversized body first, so the client never sends it (a WSGI
    server sends the ``100`` itself: docs/flask.md, docs/django.md)."""
    body = note_of_size(300)
    answer = kit.expect_continue_with_length(server.port, "/webhooks", body, 2 * MAX_BODY_SIZE)
    assert (answer.interim, answer.status, answer.reason) == ([], 413, "payload_too_large")


def test_pipelined_deliveries_are_each_answered_in_order(kit: ModuleType, server: Any) -> None:
    bodies = [note_of_size(300) for _ in range(3)]
    first, *others = bodies
    rest = b""
    for body in [*others, first]:  # the last one repeats the first: a duplicate
        head = [*kit.signed_head("POST", "/webhooks", body), f"Content-Length: {len(body)}"]
        rest += ("\r\n".join([head[0], "Host: 127.0.0.1", *head[1:]]) + "\r\n\r\n").encode()
        rest += body
    head = [*kit.signed_head("POST", "/webhooks", first), f"Content-Length: {len(first)}"]
    sock = kit.raw_open(server.port, head, first + rest)
    try:
        answers = sock.makefile("rb")
        reasons = [json.loads(read_answer(answers))["reason"] for _ in range(4)]
    finally:
        sock.close()
    assert reasons == ["processed", "processed", "processed", "duplicate"]


def read_answer(stream: BinaryIO) -> bytes:
    """The body of the next answer on ``stream``, leaving what follows it unread."""
    length = 0
    while line := stream.readline():
        if line == b"\r\n":
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return stream.read(length)
