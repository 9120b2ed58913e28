"""The status-contract rows and real-server helpers shared by the framework suites.

Every row of the status contract (docs/status-codes.md) is one ``row_*`` function taking a
:class:`Target` (a way to send one request, and to hold a claim in the app's store);
each suite that uses it (Flask, Django, the ASGI servers) imports it as ``sw_contract``,
sets ``ORG``, ``SECRET``, ``PATH`` and ``BROKEN_PATH`` for its app with :func:`configure`
from a module-scoped autouse fixture (so each test module runs with its own suite's
settings), and parametrizes ``status_row`` over :data:`ROWS` (``pytest_generate_tests``),
so every driver (the framework's test client, each real server) runs every row.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from service_webhooks import MAX_BODY_SIZE, SIGNATURE_HEADER, default_idempotency_key, sign
from service_webhooks.stores import SQLiteStore

BIN = Path(sys.executable).parent
# Set by each suite's conftest for its app (see configure):
ORG = "o-TEST-na1"
SECRET = ""
PATH = "/webhooks"
BROKEN_PATH = "/broken"


def configure(
    *, org: str, secret: str, path: str = "/webhooks", broken_path: str = "/broken"
) -> None:
    """Sets the organization, secret and paths the rows and signing helpers use."""
    global ORG, SECRET, PATH, BROKEN_PATH
    ORG, SECRET, PATH, BROKEN_PATH = org, secret, path, broken_path


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def reason(self) -> str:
        reason: str = json.loads(self.body)["reason"]
        return reason


@dataclass
class Target:
    """``send(method, path, headers, body) -> Answer``; ``claim(key)`` holds a claim."""

    send: Callable[[str, str, list[tuple[str, str]], bytes], Answer]
    claim: Callable[[str], None]
    path: str = field(default_factory=lambda: PATH)
    broken_path: str = field(default_factory=lambda: BROKEN_PATH)
    sent: list[str] = field(default_factory=list)

    def post(self, body: bytes, *headers: str, method: str = "POST", path: str = "") -> Answer:
        pairs = [(SIGNATURE_HEADER, h) for h in headers]
        return self.send(method, path or self.path, pairs, body)


def sqlite_claim(store_path: str) -> Callable[[str], None]:
    """A :attr:`Target.claim` for an app whose store is the SQLite file ``store_path``:
    holds a live claim on a key there, as another worker would."""

    def claim(key: str) -> None:
        store = SQLiteStore(store_path)
        try:
            store.claim(key, f"other-worker-{uuid.uuid4().hex}", 120.0)
        finally:
            store.close()

    return claim


def envelope(name: str = "note.created", **data: object) -> bytes:
    data = {"id": uuid.uuid4().hex, "author": "ana@example.com", "text": "hi", **data}
    return json.dumps({"eventName": name, "version": 1, "data": data}).encode()


def signed(body: bytes, *, secret: str | None = None, timestamp: int | None = None) -> str:
    return sign(body, secret or SECRET, ORG, timestamp=timestamp)


def expect(answer: Answer, status: int, reason: str) -> None:
    assert (answer.status, answer.reason) == (status, reason), answer
    assert answer.headers["content-type"].startswith("application/json")
    if status == 503:
        assert answer.headers["retry-after"] == "60"
    assert not 300 <= answer.status < 400


# -- the status contract, one function per row ----------------------------------------


def row_processed(t: Target) -> None:
    body = envelope()
    expect(t.post(body, signed(body)), 200, "processed")


def row_duplicate_already_processed(t: Target) -> None:
    body = envelope()
    expect(t.post(body, signed(body)), 200, "processed")
    expect(t.post(body, signed(body)), 200, "duplicate")  # a retry: new t, same body


def row_no_handler(t: Target) -> None:
    body = envelope("nobody.listens")
    expect(t.post(body, signed(body)), 200, "unhandled")


def row_missing_header(t: Target) -> None:
    expect(t.post(envelope()), 401, "format")


def row_malformed_header(t: Target) -> None:
    expect(t.post(envelope(), "t:1,v:AAAA"), 401, "format")


def row_repeated_header(t: Target) -> None:
    body = envelope()
    expect(t.post(body, signed(body), signed(body)), 401, "format")


def row_bad_signature(t: Target) -> None:
    body = envelope()
    expect(
        t.post(body, signed(body, secret="whsec-not-the-right-one-0123456789abcdef")),
        401,
        "signature",
    )


def row_old_timestamp(t: Target) -> None:
    body = envelope()
    expect(t.post(body, signed(body, timestamp=int(time.time()) - 301)), 401, "timestamp")


def row_not_an_envelope(t: Target) -> None:
    for body in (b"[1, 2]", b"", b"\xff\xfe not utf-8", b'{"eventName": 1, "version": 1}'):
        expect(t.post(body, signed(body)), 400, "malformed_envelope")


def row_too_large(t: Target) -> None:
    body = envelope(text="x" * MAX_BODY_SIZE)
    expect(t.post(body, signed(body)), 413, "payload_too_large")


def row_not_post(t: Target) -> None:
    for method in ("GET", "PUT", "DELETE"):
        answer = t.post(b"", method=method)
        expect(answer, 405, "method_not_allowed")
        assert answer.headers["allow"] == "POST"


def row_in_flight(t: Target) -> None:
    body = envelope()
    t.claim(default_idempotency_key(ORG, body))
    expect(t.post(body, signed(body)), 503, "in_flight")


def row_store_unreachable(t: Target) -> None:
    body = envelope()
    expect(t.post(body, signed(body), path=t.broken_path), 503, "store_unavailable")


def row_handler_raised(t: Target) -> None:
    body = envelope("test.raise")
    expect(t.post(body, signed(body)), 500, "handler_failed")
    expect(t.post(body, signed(body)), 500, "handler_failed")  # released: retried, not 503


def row_handler_refused(t: Target) -> None:
    body = envelope("test.refuse")
    expect(t.post(body, signed(body)), 422, "unprocessable")


ROWS = {name.removeprefix("row_"): f for name, f in globals().items() if name.startswith("row_")}


# -- real servers ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def start_server(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], log: Path, port: int
) -> Server:
    """Start ``argv`` and wait (up to 20 s) until it accepts connections on ``port``."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=cwd, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return Server(port, process, log)
        except OSError:
            time.sleep(0.1)
    stop_server(Server(port, process, log))
    raise RuntimeError(f"{argv[0]} did not listen on {port}:\n{log.read_text()}")


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def gunicorn_argv(app: str, port: int, *, threads: int = 4) -> list[str]:
    return [
        str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "1",
        "--threads", str(threads), "--graceful-timeout", "2", "--log-level", "warning", app,
    ]  # fmt: skip


def stream_oversized(port: int, path: str, *, chunked: bool, size: int = 2 * MAX_BODY_SIZE) -> int:
    """POST ``size`` bytes from a raw socket in a thread; return the answered status.

    The server may answer and close before the body is sent: a broken pipe or reset
    on the sending side is expected then and ignored.
    """
    body = envelope(text="x" * size)
    headers = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"{SIGNATURE_HEADER}: {signed(body)}"]
    headers += ["Transfer-Encoding: chunked"] if chunked else [f"Content-Length: {len(body)}"]
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 65536):
            piece = body[start : start + 65536]
            yield b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece
        if chunked:
            yield b"0\r\n\r\n"

    def send() -> None:
        try:
            sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
            for chunk in chunks():
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered without reading everything: allowed

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        received = b""
        while b"\r\n" not in received:
            data = sock.recv(4096)
            if not data:
                break
            received += data
    finally:
        sender.join(timeout=20)
        sock.close()
    assert received.startswith(b"HTTP/1.1 "), received[:200]
    return int(received.split(b" ", 2)[1])


@dataclass
class RawAnswer:
    """One answer read from a raw socket: its status, the 1xx statuses before it, its
    head (lower-cased names) and body."""

    status: int
    interim: list[int]
    headers: dict[str, str]
    body: bytes

    @property
    def reason(self) -> str:
        reason: str = json.loads(self.body)["reason"]
        return reason


def raw_open(port: int, head: list[str], body: bytes = b"") -> socket.socket:
    """Connect, send the request line and headers in ``head`` (``Host`` added), then
    ``body`` as is (framing is the caller's); the socket stays open for more."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    lines = [head[0], "Host: 127.0.0.1", *head[1:]]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    return sock


def raw_answer(sock: socket.socket) -> RawAnswer:
    """Read one final answer (after any 1xx) from ``sock``; waits at most 30 s."""
    buffer, interim = b"", []
    while True:
        while b"\r\n\r\n" not in buffer:
            data = sock.recv(65536)
            if not data:
                raise AssertionError(f"connection closed before an answer: {buffer[:200]!r}")
            buffer += data
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        status_line, *fields = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        if status >= 200:
            break
        interim.append(status)
    headers = {}
    for line in fields:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(buffer) < length:
        data = sock.recv(65536)
        if not data:
            break
        buffer += data
    return RawAnswer(status, interim, headers, buffer[:length])


def raw_request(port: int, head: list[str], body: bytes = b"") -> RawAnswer:
    """One request from a raw socket (``Content-Length`` added for ``body``); its answer."""
    sock = raw_open(port, [*head, f"Content-Length: {len(body)}"], body)
    try:
        return raw_answer(sock)
    finally:
        sock.close()


def expect_continue_with_length(port: int, path: str, body: bytes, length: int) -> RawAnswer:
    """A signed POST announcing ``length`` bytes with ``Expect: 100-continue`` whose body
    is never sent: the answer (with any ``100`` the server sent first in ``interim``)."""
    head = [*signed_head("POST", path, body), f"Content-Length: {length}"]
    sock = raw_open(port, [*head, "Expect: 100-continue"])
    try:
        return raw_answer(sock)
    finally:
        sock.close()


def broken_chunked_request(port: int, path: str, body: bytes, breakage: str) -> RawAnswer:
    """POST ``body`` signed and chunked, with its framing broken as a client may break
    it (``bad-chunk-size``, ``missing-terminator`` or ``cut-short``); the answer."""
    size = b"%x\r\n" % len(body)
    framed = {
        "bad-chunk-size": b"zz\r\n" + body + b"\r\n0\r\n\r\n",
        "missing-terminator": size + body + b"XX0\r\n\r\n",
        "cut-short": size + body[: len(body) // 2],  # then the client closes its side
    }[breakage]
    head = [*signed_head("POST", path, body), "Transfer-Encoding: chunked"]
    sock = raw_open(port, head, framed)
    try:
        if breakage == "cut-short":
            sock.shutdown(socket.SHUT_WR)
        return raw_answer(sock)
    finally:
        sock.close()


def signed_head(method: str, path: str, body: bytes, *signatures: str) -> list[str]:
    """A request head for ``body`` with one ``Service-Signature`` line per signature
    (default: one valid signature)."""
    lines = [f"{method} {path} HTTP/1.1", "Content-Type: application/json"]
    return lines + [f"{SIGNATURE_HEADER}: {s}" for s in signatures or (signed(body),)]


def expect_empty_successes(port: int, path: str, body: bytes) -> None:
    """For a receiver built with ``success_body=False``: ``body`` delivered twice is
    answered 200 with ``Content-Length: 0`` and no body (processed, then duplicate), and
    a bad signature still gets its 401 with the JSON reason."""
    for _ in range(2):
        answer = raw_request(port, signed_head("POST", path, body), body)
        assert (answer.status, answer.headers["content-length"], answer.body) == (200, "0", b"")
    refused = raw_request(port, signed_head("POST", path, body, "o:x,t:1,v:AAAA"), body)
    assert (refused.status, refused.reason) == (401, "signature")


def split_signature(body: bytes) -> tuple[str, str]:
    """A valid signature of ``body`` split in two partial lines: ``o:..,t:..`` and ``v:..``
    (joined with ``","`` they form the valid value again)."""
    pairs = signed(body).split(",")
    v = next(p for p in pairs if p.startswith("v:"))
    return ",".join(p for p in pairs if p != v), v


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Re-exported by each conftest: parametrize ``status_row`` over every row."""
    if "status_row" in metafunc.fixturenames:
        metafunc.parametrize("status_row", list(ROWS.values()), ids=list(ROWS))
