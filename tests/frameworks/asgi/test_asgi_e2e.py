"""Every row of the status table (docs/status-codes.md) through a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.e2e

Signed = Callable[..., tuple[bytes, str]]
MIB = 2**20


@dataclass
class Server:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    calls: Path
    store_down: Path

    def post(self, body: bytes, header: str | None, path: str = "/webhooks") -> httpx.Response:
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if header is not None:
            headers["Service-Signature"] = header
        return httpx.post(self.url + path, content=body, headers=headers, timeout=10)

    def handler_runs(self) -> list[str]:
        return self.calls.read_text().split() if self.calls.exists() else []

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("asgi")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(
        os.environ,
        SW_SECRET="whsec-test-0123456789abcdef0123456789abcdef",
        SW_STORE=str(tmp / "store.sqlite3"),
        SW_CALLS=str(tmp / "calls.txt"),
        SW_STORE_DOWN=str(tmp / "store-down"),
    )
    command = [
        sys.executable, "-m", "uvicorn", "asgi_server:app", "--app-dir", str(Path(__file__).parent),
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError("uvicorn did not start") from None
            time.sleep(0.05)
    yield Server(f"http://127.0.0.1:{port}", port, process, tmp / "calls.txt", tmp / "store-down")
    process.terminate()
    process.wait(10)


def note(text: str, id_: str) -> bytes:
    return (
        f'{{"eventName":"note.created","version":1,"data":{{"id":"{id_}",'
        f'"author":"ana@example.com","text":"{text}"}}}}'
    ).encode()


def test_other_paths_reach_the_wrapped_app(server: Server) -> None:
    assert httpx.get(server.url + "/").text == "home"


def test_processed_then_duplicate_runs_the_handler_once(server: Server, signed: Signed) -> None:
    body, header = signed(note("hi", "dup-1"))
    first = server.post(body, header)
    assert (first.status_code, first.json()["reason"]) == (200, "processed")
    _, retry = signed(body, timestamp=int(time.time()) + 1)
    second = server.post(body, retry)
    assert (second.status_code, second.json()["reason"]) == (200, "duplicate")
    assert server.handler_runs().count("dup-1") == 1


def test_unhandled_event_answers_200(server: Server, signed: Signed) -> None:
    response = server.post(*signed(b'{"eventName":"new.kind","version":1,"data":null}'))
    assert (response.status_code, response.json()["reason"]) == (200, "unhandled")


@pytest.mark.parametrize(
    ("make", "status", "reason"),
    [
        (lambda s: (s()[0], None), 401, "format"),
        (lambda s: (s()[0], "o:x,t:1"), 401, "format"),
        (lambda s: (s()[0] + b" ", s()[1]), 401, "signature"),
        (lambda s: s(secret="not-the-secret-" * 3), 401, "signature"),
        (lambda s: s(timestamp=int(time.time()) - 301), 401, "timestamp"),
        (
            lambda s: s(b'{"eventName":"note.created","version":"1","data":{}}'),
            400,
            "malformed_envelope",
        ),
        (lambda s: s(b"\xff\xfe"), 400, "malformed_envelope"),
        (lambda s: s(b""), 400, "malformed_envelope"),
    ],
)
def test_rejections(
    server: Server,
    signed: Signed,
    make: Callable[[Signed], tuple[bytes, str | None]],
    status: int,
    reason: str,
) -> None:
    response = server.post(*make(signed))
    assert (response.status_code, response.json()["reason"]) == (status, reason)


def test_get_answers_405(server: Server) -> None:
    response = httpx.get(server.url + "/webhooks")
    assert (response.status_code, response.headers["allow"]) == (405, "POST")


def test_handler_failure_answers_500_and_the_retry_succeeds(server: Server, signed: Signed) -> None:
    body, header = signed(note("fail", "f-1"))
    assert server.post(body, header).status_code == 500
    assert server.post(body, header).status_code == 500  # released each time: retried, not stuck


def test_unprocessable_answers_422(server: Server, signed: Signed) -> None:
    response = server.post(*signed(note("refuse", "r-1")))
    assert (response.status_code, response.json()["reason"]) == (422, "unprocessable")


def test_store_unreachable_answers_503_then_recovers(server: Server, signed: Signed) -> None:
    body, header = signed(note("hi", "store-1"))
    server.store_down.touch()
    try:
        response = server.post(body, header)
        assert (response.status_code, response.json()["reason"]) == (503, "store_unavailable")
        assert "store-1" not in server.handler_runs()
    finally:
        server.store_down.unlink()
    assert server.post(body, header).status_code == 200
    assert server.handler_runs().count("store-1") == 1


def test_thirty_concurrent_identical_deliveries_run_the_handler_once(
    server: Server, signed: Signed
) -> None:
    body, header = signed(note("slow", "c-1"))
    headers = {"Content-Type": "application/json", "Service-Signature": header}
    # one client per thread, made before the barrier: building a client costs tens of
    # milliseconds of CPU, which made the requests arrive one after another on a busy CI
    clients = [httpx.Client(timeout=10) for _ in range(30)]
    barrier = threading.Barrier(30)

    def deliver(index: int) -> int:
        barrier.wait()
        response = clients[index].post(server.url + "/webhooks", content=body, headers=headers)
        return response.status_code

    try:
        with ThreadPoolExecutor(30) as pool:
            statuses = list(pool.map(deliver, range(30)))
    finally:
        for client in clients:
            client.close()
    assert server.handler_runs().count("c-1") == 1
    assert statuses.count(200) >= 1
    assert set(statuses) <= {200, 503}
    assert statuses.count(503) >= 1  # the handler sleeps 0.5 s: others arrive while it runs


def _send_raw(port: int, head: bytes, body_size: int, chunked: bool) -> bytes:
    """Stream a large body from a thread and read whatever the server answers."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)

    def pump() -> None:
        piece = b"x" * 65536
        try:
            sock.sendall(head)
            for _ in range(body_size // len(piece)):
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed: expected

    sender = threading.Thread(target=pump)
    sender.start()
    answer = b""
    try:
        while b"\r\n\r\n" not in answer:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    finally:
        sender.join(30)
        sock.close()
    return answer


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_twenty_megabytes_answer_413_without_buffering(
    server: Server, signed: Signed, chunked: bool
) -> None:
    _, header = signed()
    size = 20 * MIB
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % size
    head = (
        b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Service-Signature: " + header.encode() + b"\r\n" + framing + b"\r\n\r\n"
    )
    before = server.rss_kib()
    answer = _send_raw(server.port, head, size, chunked)
    grown = server.rss_kib() - before
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert grown < 8 * 1024, f"server memory grew by {grown} KiB"
