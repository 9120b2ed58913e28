"""A fake of the service's API for tests: the three endpoints of spec §4, in memory.

::

    fake = FakeAPI(api_key="test-key")
    client = Client("test-key", base_url="http://fake", transport=fake.sync_transport())
    fake.inject(Fault(status=429, retry_after="1"))      # next request gets a 429

    with fake.serve() as base_url:                       # real HTTP on 127.0.0.1
        ...

What it does, per the spec (and where the spec is open, what it chose):

- ``GET /settings/recording/v1/privacy/history``: ``limit`` default 20, 1-100
  (spec §4.1, §8); pages carry ``next_pagination_token`` (snake_case).
- ``GET /operations/v1``: ``state`` / ``type`` filters (any value: the enums are
  open, spec §9), ``limit`` 1-100, 100 when omitted (spec §4.2); pages carry
  ``nextPaginationToken`` (camelCase). A token used with other filters than the ones
  it was issued for is answered 400.
- ``POST /operations/v1/{id}/cancel``: the id is read from the raw, still-escaped path,
  so an unescaped ``/`` in an id is a 404. Unknown id: 404; an operation that is not
  cancelable or not ``PENDING``: 409; success: 200 with ``{}`` and the operation
  becomes ``FAILED`` with ``errorDetails`` ``"cancelled"`` (spec §3.1 lists no
  cancelled state).
- ``Authorization`` must be exactly ``Basic <api_key>``, else 401. A
  ``read_only_key`` may GET but gets 403 on cancel.
- The last page's token is ``""`` (or absent with ``omit_last_token=True``);
  ``repeat_tokens=True`` simulates a buggy service that hands the same token forever.
- Error bodies are ``{"message": ...}`` (spec §7 does not show them), an unknown
  path's 404 and a wrong method's 405 included.
- Faults (:class:`Fault`) are consumed in order by the first request they match:
  a status (for example 429 with ``Retry-After``, 500, 503), a raw body, a delay.
- Every request is recorded in :attr:`FakeAPI.requests`.

The default data set has 42 versions and 62 operations: every state and type, some
cancelable, plus an unknown type, an unknown state, unknown fields and the zero time
``0001-01-01T00:00:00Z``, so a client's tolerance (spec §9) is exercised.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import socket
import threading
import time
from collections.abc import Coroutine, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import unquote

import msgspec

try:
    import httpx
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as error:  # pragma: no cover - exercised only without the extras
    from .._extras import missing_extra

    raise missing_extra("http,asgi", "httpx", "starlette", what=__name__, cause=error) from error

__all__ = [
    "STATES",
    "TYPES",
    "ZERO_TIME",
    "FakeAPI",
    "Fault",
    "RecordedRequest",
    "make_operations",
    "make_versions",
    "serve",
]

ZERO_TIME = "0001-01-01T00:00:00Z"
STATES = ("PENDING", "COMPLETED", "FAILED")
TYPES = (
    "DELETE_USER",
    "DELETE_SESSION",
    "DELETE_SEGMENT_SESSIONS",
    "DELETE_SEGMENT_USERS",
    "SEARCH_EXPORT",
)
_EPOCH = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
_CANCELABLE_TYPES = frozenset({"DELETE_USER", "DELETE_SESSION", "SEARCH_EXPORT"})


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_versions(count: int = 42) -> list[dict[str, Any]]:
    """Build ``count`` privacy settings versions as JSON objects, most recent first.

    Every third version has an element block never updated (the zero time); the most
    recent carries an unknown field and the oldest an unknown block type (spec §9).
    """
    versions: list[dict[str, Any]] = []
    for index in range(count, 0, -1):
        changed = _EPOCH + timedelta(hours=index)
        block: dict[str, Any] = {
            "selector": f".private-{index}",
            "consent": index % 2 == 0,
            "notes": "" if index % 4 else f"note {index}",
            "type": "BLOCK_EXCLUDE",
            "scope": "ALL_SESSIONS",
            "lastUpdated": ZERO_TIME if index % 3 == 0 else _iso(changed),
            "label": "",
            "targetingConditions": None,
            "editable": "EDITABLE_DESCRIPTION_ONLY",
            "exceptionSelectors": [],
            "groupId": index,
        }
        versions.append(
            {
                "elementBlocks": [block],
                "ajaxWatches": [
                    {
                        "urlRegex": f"^https://example\\.com/api/{index}/.*",
                        "recordReq": "ELIDE",
                        "recordRsp": "WHITELIST",
                        "whitelistReq": "",
                        "whitelistRsp": "id,name",
                    }
                ],
                "discardIpAddresses": index % 2 == 1,
                "metadata": {
                    "lastUpdated": _iso(changed + timedelta(microseconds=123000)),
                    "lastUpdatedBy": f"admin{index % 3}@example.com",
                    "created": _iso(_EPOCH),
                    "createdBy": "owner@example.com",
                },
                "defaultPrivacyMode": "PRIVACY_MODE_OFF",
                "elementRuleGroups": {},
            }
        )
    if versions:
        versions[0]["consentBanner"] = {"enabled": True}  # a field added later (spec §9)
        block["type"] = "BLOCK_MASK"  # the oldest version: a value added later (spec §9)
    return versions


def make_operations(count: int = 60) -> tuple[list[dict[str, Any]], set[str]]:
    """Build ``count`` operations cycling through every state and type, newest first,
    plus one of an unknown type and one in an unknown state (spec §9).

    Returns:
        The operations as JSON objects, and the ids of the cancelable ones (pending
        ``DELETE_USER``, ``DELETE_SESSION`` and ``SEARCH_EXPORT``).
    """
    operations: list[dict[str, Any]] = []
    cancelable: set[str] = set()
    for index in range(count):
        state = STATES[index % len(STATES)]
        type_ = TYPES[(index // len(STATES)) % len(TYPES)]
        created = _EPOCH - timedelta(minutes=index)
        op_id = f"op-{index:04d}"
        operations.append(
            {
                "id": op_id,
                "type": type_,
                "details": None if index % 2 else {"userId": f"user-{index}"},
                "results": {"rows": index} if state == "COMPLETED" else None,
                "state": state,
                "errorDetails": "quota exceeded" if state == "FAILED" else "",
                "createdAt": _iso(created),
                "finishedAt": ZERO_TIME if state == "PENDING" else _iso(created + timedelta(1)),
                "estimatePctComplete": 100 if state != "PENDING" else index % 100,
            }
        )
        if state == "PENDING" and type_ in _CANCELABLE_TYPES:
            cancelable.add(op_id)
    extra = {"errorDetails": "", "details": None, "results": None, "estimatePctComplete": 5}
    operations.append(
        {**extra, "id": "op-future-type", "type": "ARCHIVE_PROJECT", "state": "PENDING"}
        | {"createdAt": _iso(_EPOCH), "finishedAt": ZERO_TIME, "priority": "high"}
    )
    operations.append(
        {**extra, "id": "op-future-state", "type": "DELETE_USER", "state": "PAUSED"}
        | {"createdAt": _iso(_EPOCH), "finishedAt": ZERO_TIME}
    )
    return operations, cancelable


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour, consumed by the first request it matches.

    Attributes:
        status: Answer with this status instead of serving the request (``None``:
            serve normally, after ``delay``).
        retry_after: ``Retry-After`` header value sent with ``status`` (seconds or a date).
        body: Raw response body for ``status`` (default ``{"message": "injected"}``).
        delay: Seconds to wait before answering (a slow response).
        path: Only requests whose path starts with this match (``None``: any).
        method: Only requests with this method match (``None``: any).
    """

    status: int | None = None
    retry_after: str | None = None
    body: bytes | None = None
    delay: float = 0.0
    path: str | None = None
    method: str | None = None

    def matches(self, method: str, path: str) -> bool:
        """Whether this fault applies to a request."""
        if self.method is not None and self.method != method:
            return False
        return self.path is None or path.startswith(self.path)


@dataclass(frozen=True)
class RecordedRequest:
    """A request the fake received: method, decoded path, raw path, query, headers."""

    method: str
    path: str
    raw_path: str
    params: list[tuple[str, str]]
    headers: Mapping[str, str] = field(repr=False)


def _json(status: int, content: Any, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        msgspec.json.encode(content), status, headers=headers, media_type="application/json"
    )


def _error(status: int, message: str) -> Response:
    return _json(status, {"message": message})


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (unknown path) and 405 (wrong method) as ``{"message": ...}``,
    like every other error of the fake (Starlette would answer plain text)."""
    assert isinstance(exc, HTTPException)
    return _json(exc.status_code, {"message": exc.detail}, exc.headers)


class _BadRequest(Exception):
    pass


def _limit(request: Request, default: int) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    digits = raw[1:] if raw.startswith("-") else raw
    if not (digits.isascii() and digits.isdigit()):  # int() would take " 5", "+5", "5_0"
        raise _BadRequest(f"limit must be an integer, got {raw!r}")
    value = int(raw)
    if not 1 <= value <= 100:
        raise _BadRequest(f"limit must be between 1 and 100, got {value}")
    return value


def _same(given: str, expected: str) -> bool:
    """Whether a request's ``Authorization`` is the expected one, in constant time: the
    fake may listen on a network (``api serve-fake --host``), so no timing tells how
    much of a guessed key is right."""
    return hmac.compare_digest(given.encode(), expected.encode())


class FakeAPI:
    """An ASGI app faking the service's API (see the module docstring).

    Args:
        api_key: The key accepted in ``Authorization: Basic <api_key>``.
        read_only_key: Another key allowed to read but answered 403 on cancel.
        versions: History, most recent first (default :func:`make_versions`).
        operations: Operations as JSON objects (default :func:`make_operations`).
        cancelable: Ids that may be cancelled (default: those of :func:`make_operations`).
        repeat_tokens: Always hand back the first next-page token (a buggy service).
        omit_last_token: Leave the token field out of the last page instead of ``""``.
    """

    def __init__(
        self,
        *,
        api_key: str = "test-key",
        read_only_key: str | None = None,
        versions: list[dict[str, Any]] | None = None,
        operations: list[dict[str, Any]] | None = None,
        cancelable: set[str] | None = None,
        repeat_tokens: bool = False,
        omit_last_token: bool = False,
    ) -> None:
        default_ops, default_cancelable = make_operations()
        self.api_key = api_key
        self.read_only_key = read_only_key
        self.versions = make_versions() if versions is None else versions
        self.operations = default_ops if operations is None else operations
        self.cancelable = (
            (default_cancelable if operations is None else set())
            if cancelable is None
            else cancelable
        )
        self.repeat_tokens = repeat_tokens
        self.omit_last_token = omit_last_token
        self.faults: list[Fault] = []
        self.requests: list[RecordedRequest] = []
        self.app = Starlette(
            routes=[
                Route("/settings/recording/v1/privacy/history", self._history, methods=["GET"]),
                Route("/operations/v1", self._list_operations, methods=["GET"]),
                Route("/operations/v1/{rest:path}", self._cancel, methods=["POST"]),
            ],
            exception_handlers={HTTPException: _http_error},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        raw_path = scope.get("raw_path") or scope["path"].encode()
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.url.path,
                raw_path=raw_path.decode("latin-1"),
                params=list(request.query_params.multi_items()),
                headers=dict(request.headers),
            )
        )
        fault = self._take_fault(request.method, request.url.path)
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.status is not None:
                headers = {} if fault.retry_after is None else {"Retry-After": fault.retry_after}
                body = fault.body if fault.body is not None else b'{"message": "injected"}'
                response = Response(body, fault.status, headers, "application/json")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def inject(self, *faults: Fault) -> None:
        """Queue faults; each is used once, by the first request it matches."""
        self.faults.extend(faults)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for index, fault in enumerate(self.faults):
            if fault.matches(method, path):
                return self.faults.pop(index)
        return None

    def _authorized(self, request: Request, *, write: bool) -> Response | None:
        header = request.headers.get("authorization") or ""
        if _same(header, f"Basic {self.api_key}"):
            return None
        if self.read_only_key is not None and _same(header, f"Basic {self.read_only_key}"):
            return _error(403, "this API key may not cancel operations") if write else None
        return _error(401, "missing or invalid API key")

    def _page(
        self, items: list[dict[str, Any]], token: str | None, limit: int, scope: list[str]
    ) -> tuple[list[dict[str, Any]], str | None]:
        start = 0
        if token:
            try:
                decoded = msgspec.json.decode(base64.urlsafe_b64decode(token))
                start, token_scope = int(decoded["o"]), list(decoded["f"])
            except (binascii.Error, msgspec.DecodeError, KeyError, TypeError, ValueError):
                raise _BadRequest("invalid paginationToken") from None
            if token_scope != scope:
                raise _BadRequest("filter parameters changed between paged requests")
        end = start + limit
        if end >= len(items):
            return items[start:], None if self.omit_last_token else ""
        offset = limit if self.repeat_tokens else end
        payload = msgspec.json.encode({"o": offset, "f": scope})
        return items[start:end], base64.urlsafe_b64encode(payload).decode()

    async def _history(self, request: Request) -> Response:
        denied = self._authorized(request, write=False)
        if denied is not None:
            return denied
        try:
            limit = _limit(request, 20)
            token = request.query_params.get("paginationToken")
            versions, next_token = self._page(self.versions, token, limit, [])
        except _BadRequest as error:
            return _error(400, str(error))
        body: dict[str, Any] = {"versions": versions}
        if next_token is not None:
            body["next_pagination_token"] = next_token
        return _json(200, body)

    async def _list_operations(self, request: Request) -> Response:
        denied = self._authorized(request, write=False)
        if denied is not None:
            return denied
        state = request.query_params.get("state")
        type_ = request.query_params.get("type")
        # Open enums (spec §9): an unknown filter value just matches nothing (or the
        # operations that already carry it).
        selected = [
            op
            for op in self.operations
            if (state is None or op["state"] == state) and (type_ is None or op["type"] == type_)
        ]
        try:
            limit = _limit(request, 100)
            token = request.query_params.get("paginationToken")
            page, next_token = self._page(selected, token, limit, [state or "", type_ or ""])
        except _BadRequest as error:
            return _error(400, str(error))
        body: dict[str, Any] = {"operations": page}
        if next_token is not None:
            body["nextPaginationToken"] = next_token
        return _json(200, body)

    async def _cancel(self, request: Request) -> Response:
        raw_path: bytes = request.scope.get("raw_path") or request.scope["path"].encode()
        parts = raw_path.split(b"/")
        if len(parts) != 5 or parts[:3] != [b"", b"operations", b"v1"] or parts[4] != b"cancel":
            return _error(404, "not found")
        denied = self._authorized(request, write=True)
        if denied is not None:
            return denied
        op_id = unquote(parts[3].decode("latin-1"))
        operation = next((op for op in self.operations if op["id"] == op_id), None)
        if operation is None:
            return _error(404, f"operation {op_id!r} not found")
        if op_id not in self.cancelable or operation["state"] != "PENDING":
            return _error(409, f"operation {op_id!r} is not cancelable")
        operation.update(
            state="FAILED", errorDetails="cancelled", finishedAt=_iso(datetime.now(UTC))
        )
        self.cancelable.discard(op_id)
        return _json(200, {})

    def async_transport(self) -> httpx.AsyncBaseTransport:
        """An in-process transport for ``AsyncClient(transport=...)``."""
        return httpx.ASGITransport(app=self)

    def sync_transport(self) -> httpx.BaseTransport:
        """An in-process transport for ``Client(transport=...)`` (runs the app in a
        short-lived event loop per request, so it works from any sync code)."""
        return _SyncASGITransport(self)

    def serve(self, host: str = "127.0.0.1", port: int = 0) -> AbstractContextManager[str]:
        """Run this fake over real HTTP; see :func:`serve`."""
        return serve(self, host, port)


def _real_monotonic() -> float:
    """The OS's monotonic clock, read past a test's frozen ``time.monotonic``
    (freezegun replaces it, and ``time.perf_counter``, while time is frozen)."""
    if hasattr(time, "clock_gettime"):  # not on Windows
        return time.clock_gettime(time.CLOCK_MONOTONIC)
    return time.monotonic()


class _RealClockLoop(asyncio.SelectorEventLoop):
    """An event loop timed by :func:`_real_monotonic`: under a frozen clock a loop's
    timers never fire, so the server would never stop (and a ``Fault.delay`` never end)."""

    def time(self) -> float:
        return _real_monotonic()


@contextmanager
def serve(app: ASGIApp, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Run an ASGI app with uvicorn in a background thread (real HTTP).

    Args:
        app: The app, typically a :class:`FakeAPI`.
        host: Interface to bind; keep the loopback default in tests.
        port: TCP port; 0 picks a free one.

    Yields:
        The base URL, for example ``"http://127.0.0.1:54321"``.

    Raises:
        ImportError: uvicorn is not installed (the ``cli`` extra brings it).
        RuntimeError: The server did not start within 10 seconds.
    """
    from .._extras import require_extra

    require_extra("cli", "uvicorn", what="serve() (a real HTTP server)")
    import uvicorn  # imported only when a real server is wanted

    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only then
    # (without it, Nagle + delayed ACK add ~40 ms to every response).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    config = uvicorn.Config(
        app, lifespan="off", log_level="warning", access_log=False, timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)

    def run() -> None:
        with asyncio.Runner(loop_factory=_RealClockLoop) as runner:
            runner.run(server.serve(sockets=[sock]))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = _real_monotonic() + 10
        while not server.started:
            if not thread.is_alive() or _real_monotonic() > deadline:
                raise RuntimeError("the API server did not start")
            time.sleep(0.01)
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


class _SyncASGITransport(httpx.BaseTransport):
    """Drives an ASGI app from sync code through ``httpx.ASGITransport``."""

    def __init__(self, app: FakeAPI) -> None:
        self._transport = httpx.ASGITransport(app=app)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()

        async def run() -> httpx.Response:
            response = await self._transport.handle_async_request(request)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return _run(run())
        # Called from a coroutine (a sync client inside async code): use another thread.
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(_run, run()).result()


def _run(coroutine: Coroutine[Any, Any, httpx.Response]) -> httpx.Response:
    with asyncio.Runner(loop_factory=_RealClockLoop) as runner:
        return runner.run(coroutine)
