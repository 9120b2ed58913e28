"""The dashboard's ASGI app: authentication, security headers, routes and rendering.

Routes (below wherever the app is mounted):

==========================  ====  ==================================================
path                        verb  page
==========================  ====  ==================================================
``/``                       GET   list: newest first, filters, keyset paging
``/overview``               GET   counts per outcome (1 h, 24 h), failure rate,
                                  slowest handlers, a 24 h chart (inline SVG)
``/d/{id}``                 GET   detail: metadata, payload, traceback, replays
``/d/{id}/body``            GET   the raw body, as a download
``/d/{id}/replay``          POST  replay (a receiver was given; CSRF token required)
``/static/dashboard.css``   GET   the stylesheet (shipped in the wheel)
==========================  ====  ==================================================
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import hashlib
import hmac
import inspect
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service_webhooks import ConfigurationError, WebhookReceiver
from service_webhooks.inbox import Inbox, InboxQuery, ReceivedDelivery, inbox_from_url
from service_webhooks.inbox.backend import decode_cursor, from_micros
from service_webhooks.inbox.commands import clip, pretty_body

from ._origins import normalize_origin, parse_trusted_origins

__all__ = ["SECURITY_HEADERS", "Authorize", "Dashboard", "dashboard"]

Authorize = Callable[[Scope], "bool | Awaitable[bool]"]
"""``authorize(scope) -> bool`` (or an awaitable of it): whether an HTTP request (its
ASGI ``scope``: headers, cookies, ``scope["user"]`` set by your auth middleware) may see
the dashboard. ``False`` is answered 403."""

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "content-security-policy",
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
)
"""Headers sent with every response of the dashboard, errors and assets included."""

UTC = datetime.UTC
HERE = Path(__file__).parent
REALM = "service-webhooks inbox"
MAX_FORM_BYTES = 4096
_CROSS_SITE = (
    "The request came from another site (its Origin or Sec-Fetch-Site header): replays "
    "are accepted only from the dashboard's own pages."
)
_PROXIED = (
    "The page was loaded from {origin}, but the dashboard received the request for host "
    "{host!r}: a reverse proxy changes the Host header. Start the dashboard with "
    "--trusted-origin {origin} (dashboard(trusted_origins=[...]) in code), or have the "
    "proxy pass the Host header on unchanged."
)

OK_REASONS = frozenset({"processed", "duplicate", "unhandled"})
"""Answer reasons the service counts as a success (2xx with the default policy)."""

OUTCOMES: tuple[tuple[str, str], ...] = (
    ("", "Any outcome"),
    ("5xx", "Failed (5xx, retried)"),
    ("4xx", "Refused (4xx)"),
    ("2xx", "Succeeded (2xx)"),
    ("processed", "processed"),
    ("duplicate", "duplicate"),
    ("unhandled", "unhandled"),
    ("handler_failed", "handler_failed"),
    ("unprocessable", "unprocessable"),
    ("malformed_envelope", "malformed_envelope"),
    ("in_flight", "in_flight"),
    ("store_unavailable", "store_unavailable"),
    ("retry_later", "retry_later"),
    ("handoff_failed", "handoff_failed"),
)
"""The outcome filter's choices (the overview links a count to the list filtered by its
reason only for these: a reason of the application's own ``RetryLater`` is shown
unlinked)."""
_FILTERABLE = frozenset(value for value, _ in OUTCOMES)  # the values ?outcome= accepts
RANGES: tuple[tuple[str, str, float], ...] = (
    ("", "Any time", 0.0),
    ("1h", "Last hour", 3600.0),
    ("24h", "Last 24 hours", 86400.0),
    ("7d", "Last 7 days", 7 * 86400.0),
    ("30d", "Last 30 days", 30 * 86400.0),
)


class BadFilter(ValueError):
    """A list filter that cannot be understood (shown on the page, answered 400)."""


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["seconds"] = _seconds
    env.filters["clip"] = clip  # an event name or organization ID in a table cell
    env.finalize = _visible  # every {{ value }}: control and bidi characters shown
    return env


_HIDDEN = {
    code: f"\\u{code:04x}"
    for code in (
        *(c for c in range(0x20) if chr(c) not in "\t\n\r"),  # C0 controls, NUL among them
        *range(0x7F, 0xA0),  # DEL and the C1 controls
        0x061C,
        0x200E,
        0x200F,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),  # bidi
    )
}
"""Characters a page shows as a ``\\uXXXX`` escape rather than as themselves: controls,
and the bidirectional overrides and isolates (U+202E), with which a signed event name
or body could display as other text than it holds (as the CLI's ``printable`` does)."""


def _visible(value: object) -> object:
    """Jinja2's ``finalize``: a ``str`` from a request with :data:`_HIDDEN` characters
    escaped; anything else (numbers, the templates' own ``Markup``) as it is."""
    return value.translate(_HIDDEN) if type(value) is str else value


def _when(moment: datetime.datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _is_failure(reason: str) -> bool:
    return reason not in OK_REASONS


def _parse_time(text: str, name: str) -> datetime.datetime | None:
    if not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError as error:
        raise BadFilter(f"{name}: a date and time such as 2025-01-31T13:45 (UTC)") from error
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    try:
        moment.astimezone(UTC)
    except OverflowError as error:  # in UTC, year 0 or 10000
        raise BadFilter(f"{name}: a date and time in years 1 to 9999 (UTC)") from error
    return moment


def _form_time(text: str) -> str:
    """A ``from``/``to`` filter as its ``datetime-local`` field shows it: the same
    moment in UTC without an offset (``2025-01-31T13:45:00``), since the browser shows
    an empty field for a value with an offset (``Z``, ``+02:00``) or a date alone, and
    the next Apply would drop the filter. Text that is no time is returned as given."""
    try:
        moment = _parse_time(text.strip(), "time")
    except BadFilter:  # shown as given, with the error
        return text
    if moment is None:
        return text
    local = moment.astimezone(UTC).replace(tzinfo=None)
    spec = "seconds" if not local.microsecond else "milliseconds"
    if local.microsecond % 1000:
        spec = "microseconds"  # more than a browser shows: kept exact all the same
    return local.isoformat(timespec=spec)


def list_query(params: Mapping[str, str], now: datetime.datetime) -> InboxQuery:
    """The :class:`InboxQuery` of the list page's filters.

    Raises:
        BadFilter: A filter value that is not understood.
    """
    outcome = params.get("outcome", "").strip()
    reasons: tuple[str, ...] = ()
    status_class: int | None = None
    if outcome in ("2xx", "4xx", "5xx"):
        status_class = int(outcome[0])
    elif outcome:
        if outcome not in _FILTERABLE:
            raise BadFilter("outcome: not a known outcome")
        reasons = (outcome,)
    since = _parse_time(params.get("since", "").strip(), "from")
    until = _parse_time(params.get("until", "").strip(), "to")
    span = params.get("range", "").strip()
    if span:
        seconds = {key: s for key, _, s in RANGES}.get(span)
        if not seconds:
            raise BadFilter("range: not a known time range")
        start = now - datetime.timedelta(seconds=seconds)
        since = max(since, start) if since else start
    text = params.get("q", "").strip().lower()
    if text and not all(c in "0123456789abcdef" for c in text):
        raise BadFilter("search: delivery IDs are hexadecimal digits (0-9, a-f)")
    return InboxQuery(
        reasons=reasons,
        status_class=status_class,
        event_name=params.get("event", "").strip() or None,
        organization_id=params.get("org", "").strip() or None,
        since=since,
        until=until,
        id_prefix=text or None,
    )


_CLASSES = {"5xx": "Failed", "4xx": "Refused", "2xx": "Succeeded"}
_BOUNDS = (("since", "from"), ("until", "to"))


def list_selection(params: Mapping[str, str], cursor: str | None) -> list[str]:
    """What a list page shows, in words, for its window title and heading: the active
    filters (``["Failed", "note.created", "Last 24 hours"]``) and, past the first
    page, where the page starts; ``[]`` for the newest deliveries unfiltered. Call it
    once :func:`list_query` accepted ``params`` and the inbox ``cursor``."""
    given = {name: params.get(name, "").strip() for name in _LIST_PARAMS}
    shown = [_CLASSES.get(given["outcome"], given["outcome"])] if given["outcome"] else []
    shown += [clip(given[name]) for name in ("event", "org") if given[name]]
    shown += [label for key, label, _ in RANGES if key and key == given["range"]]
    shown += [f"{word} {given[name].replace('T', ' ')}" for name, word in _BOUNDS if given[name]]
    if given["q"]:
        shown.append(f"ID {given['q'].lower()}" + ("" if len(given["q"]) >= 32 else "…"))
    if cursor:
        try:
            shown.append(f"older than {_when(from_micros(decode_cursor(cursor)[0]))}")
        except (ConfigurationError, ValueError, OverflowError):  # another kind of inbox
            shown.append("older")
    return shown


def _basic_credentials(value: str | tuple[str, str]) -> tuple[bytes, bytes]:
    if isinstance(value, str) and ":" not in value:
        raise ConfigurationError("basic_auth must be 'USER:PASSWORD' or (user, password)")
    user, password = value.split(":", 1) if isinstance(value, str) else value
    if not user or not password:
        raise ConfigurationError("basic_auth needs a non-empty user and password")
    return user.encode(), password.encode()


def _csrf_key_of(credentials: tuple[bytes, bytes]) -> bytes:
    """The replay token's key for Basic ``credentials``: the same in every worker process
    given them (a random key per process refused about half the forms of two workers),
    and unknown to whoever lacks the password, who could not log in either."""
    return hmac.new(credentials[1], b"service-webhooks dashboard csrf key", "sha256").digest()


def _checked_csrf_key(key: object) -> bytes:
    """``csrf_key`` as bytes: a ``str`` (an environment variable, ``secret new``'s
    output) had been kept as it was, and every delivery page then answered 500 (HMAC
    takes bytes); an empty key would make every token the same well-known value.

    Raises:
        ConfigurationError: Neither ``bytes`` nor ``str``, or empty.
    """
    if isinstance(key, str):
        key = key.encode("utf-8", "surrogatepass")
    if not isinstance(key, bytes):
        raise ConfigurationError(f"csrf_key must be bytes or a str, not {type(key).__name__}")
    if not key:
        raise ConfigurationError("csrf_key must not be empty")
    return key


class Dashboard:
    """The dashboard as an ASGI app (HTTP only). Build it with :func:`dashboard`.

    Attributes:
        inbox: The :class:`~service_webhooks.inbox.Inbox` shown.
        receiver: The receiver replays run through, or ``None`` (no Replay button).
        trusted_origins: The origins (``https://ops.example.com``, normalized) whose
            replay forms are accepted besides the one of the ``Host`` received.
    """

    def __init__(
        self,
        inbox: Inbox,
        *,
        receiver: WebhookReceiver | None,
        basic_auth: tuple[bytes, bytes] | None,
        authorize: Authorize | None,
        csrf_key: bytes,
        page_size: int,
        title: str,
        trusted_origins: tuple[str, ...] = (),
    ) -> None:
        self.inbox = inbox
        self.receiver = receiver
        self.trusted_origins = trusted_origins
        self.title = title
        self.page_size = page_size
        self._basic = basic_auth
        self._authorize = authorize
        self._csrf_key = csrf_key
        self._env = _environment()
        self._css = (HERE / "static" / "dashboard.css").read_bytes()
        self._css_etag = '"' + hashlib.sha256(self._css).hexdigest()[:16] + '"'
        self._router = Router(
            routes=[
                _Route("/", self.list_page, methods=["GET"]),
                _Route("/overview", self.overview_page, methods=["GET"]),
                _Route("/d/{delivery_id}", self.detail_page, methods=["GET"]),
                _Route("/d/{delivery_id}/body", self.body, methods=["GET"]),
                _Route("/d/{delivery_id}/replay", self.replay, methods=["POST"]),
                _Route("/static/dashboard.css", self.stylesheet, methods=["GET"]),
            ],
            default=self.unknown_path,
        )

    # -- ASGI -------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":  # served on its own: nothing to start
                await _lifespan(receive, send)
            return

        started = False

        async def secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() not in _SECURITY_NAMES
                ]
                headers.extend(_SECURITY_RAW)
                message = {**message, "headers": headers}
            await send(message)

        try:
            denied = await self._deny(scope)
            if denied is not None:
                await denied(scope, receive, secured)
                return
            await self._router(scope, receive, secured)
        except HTTPException as error:
            # a route's 405 (see _Route), answered here with the dashboard's page: the
            # handler of an app it is mounted in would find the response started, and
            # answer 500
            if started:
                raise
            await self._http_error(Request(scope), error)(scope, receive, secured)
        except Exception:
            # the answer is ours, with the headers and no detail; the exception goes on
            # to the server, which logs it (as Starlette's ServerErrorMiddleware does)
            if not started:
                await _SERVER_ERROR(scope, receive, secured)
            raise

    async def _deny(self, scope: Scope) -> ASGIApp | None:
        """A 401/403 response when the request is not authorized, else ``None``."""
        if self._basic is not None:
            if self._basic_ok(scope):
                return None
            return Response(
                "Authentication required.\n",
                status_code=401,
                media_type="text/plain",
                headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'},
            )
        assert self._authorize is not None
        allowed = self._authorize(scope)
        if inspect.isawaitable(allowed):
            allowed = await allowed
        if allowed is True:
            return None
        return Response("Forbidden.\n", status_code=403, media_type="text/plain")

    def _basic_ok(self, scope: Scope) -> bool:
        assert self._basic is not None
        header = _header(scope, b"authorization")
        scheme, _, encoded = header.partition(b" ")
        if scheme.lower() != b"basic":
            return False
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        user, colon, password = decoded.partition(b":")
        good_user = hmac.compare_digest(user, self._basic[0])
        good_password = hmac.compare_digest(password, self._basic[1])
        return bool(colon) and good_user and good_password

    # -- CSRF -------------------------------------------------------------------------

    def _identity(self, request: Request) -> bytes:
        """Who the token is bound to: the Basic user, or ``scope["user"]``'s identity."""
        if self._basic is not None:
            return b"basic:" + self._basic[0]
        user = request.scope.get("user")
        name = getattr(user, "identity", None) or getattr(user, "display_name", None) or ""
        return b"user:" + str(name).encode()

    def csrf_token(self, request: Request) -> str:
        """The replay form's token: HMAC-SHA256 of this app's key and the identity."""
        return hmac.new(self._csrf_key, self._identity(request), hashlib.sha256).hexdigest()

    def _replay_refusal(self, request: Request, form: dict[str, list[str]]) -> str | None:
        """Why a replay form is refused (403), or ``None`` to accept it: a missing or
        wrong token, or a form sent from another site.

        ``Origin`` must be absent, ``null`` (what Chromium sends for the dashboard's
        forms: its pages are ``Referrer-Policy: no-referrer``), name the ``Host``
        received, or be one of :attr:`trusted_origins` (exactly); ``Sec-Fetch-Site``
        must be absent, ``same-origin`` or ``none`` (a browser says ``same-origin``
        through a proxy too: it compares the page's URL with the form's)."""
        token = form.get("csrf_token", [""])[0]
        expected = self.csrf_token(request)
        if not hmac.compare_digest(token.encode(), expected.encode()):
            return (
                "The form's security token is missing or wrong: reload the page and press "
                "Replay again."
            )
        fetch_site = request.headers.get("sec-fetch-site")
        origin = request.headers.get("origin") or "null"
        host = request.headers.get("host", "")
        if origin != "null" and origin not in self.trusted_origins:
            scheme, _, netloc = origin.partition("://")  # urlsplit raises on some values
            if scheme not in ("http", "https") or netloc != host:
                return _proxy_hint(origin, host) if fetch_site == "same-origin" else _CROSS_SITE
        if fetch_site not in (None, "same-origin", "none"):
            return _CROSS_SITE
        return None

    # -- rendering --------------------------------------------------------------------

    def _render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> Response:
        root = _root(request)

        def url(path: str, **params: Any) -> str:
            query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
            return root + path + ("?" + query if query else "")

        html = self._env.get_template(template).render(
            title=self.title, url=url, page=template.removesuffix(".html"), **context
        )
        return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})

    async def _record(self, request: Request) -> ReceivedDelivery | None:
        delivery_id = request.path_params["delivery_id"].strip().lower()
        if not delivery_id or not all(c in "0123456789abcdef" for c in delivery_id):
            return None
        return await self.inbox.aget(delivery_id)

    def _not_found(self, request: Request) -> Response:
        return self._render(
            request, "error.html", 404, heading="Not found", message="No such delivery."
        )

    async def unknown_path(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The router's default: a page for a path it has no route for (Starlette's own
        raises when mounted, and answers plain text when not)."""
        response = self._render(
            Request(scope), "error.html", 404, heading="Not found", message="No such page."
        )
        await response(scope, receive, send)

    def _http_error(self, request: Request, error: HTTPException) -> Response:
        message = error.detail
        if error.status_code == 405:
            message = f"This address does not answer {request.method} requests."
        response = self._render(
            request, "error.html", error.status_code, heading=error.detail, message=message
        )
        response.headers.update(error.headers or {})
        return response

    # -- pages ------------------------------------------------------------------------

    async def list_page(self, request: Request) -> Response:
        params = {key: request.query_params.get(key, "") for key in _LIST_PARAMS}
        params["since"], params["until"] = _form_time(params["since"]), _form_time(params["until"])
        cursor = request.query_params.get("cursor") or None
        error = None
        selection: list[str] = []
        items: tuple[ReceivedDelivery, ...] = ()
        next_cursor = None
        heading = "Error: bad filter"
        try:
            query = list_query(params, datetime.datetime.now(UTC))
            heading = "Error: bad page address"  # a cursor the inbox did not make
            page = await self.inbox.asearch(query, limit=self.page_size, cursor=cursor)
            items, next_cursor = page.items, page.next_cursor
            selection = list_selection(params, cursor)
        except (BadFilter, ConfigurationError) as problem:
            error = str(problem)
        return self._render(
            request,
            "list.html",
            400 if error else 200,
            heading=heading if error else " · ".join(selection),
            selection=selection,
            params=params,
            filtered=any(params.values()),
            cursor=cursor,
            items=items,
            next_cursor=next_cursor,
            error=error,
            outcomes=OUTCOMES,
            ranges=[(key, label) for key, label, _ in RANGES],
            is_failure=_is_failure,
        )

    async def detail_page(self, request: Request) -> Response:
        record = await self._record(request)
        if record is None:
            return self._not_found(request)
        payload, payload_note = pretty_body(record.body)
        return self._render(
            request,
            "detail.html",
            record=record,
            payload=payload,
            payload_note=payload_note,
            can_replay=self.receiver is not None,
            csrf_token=self.csrf_token(request),
            is_failure=_is_failure,
        )

    async def body(self, request: Request) -> Response:
        record = await self._record(request)
        if record is None:
            return self._not_found(request)
        extension = "json" if (record.content_type or "").startswith("application/json") else "bin"
        return Response(
            record.body,
            media_type="application/octet-stream",
            headers={
                "Content-Disposition": f'attachment; filename="delivery-{record.id}.{extension}"',
                "Cache-Control": "no-store",
            },
        )

    async def replay(self, request: Request) -> Response:
        raw = await _read_capped(request, MAX_FORM_BYTES)
        form = parse_qs(raw.decode("utf-8", "replace")) if raw is not None else {}
        refusal = "The form is too large." if raw is None else self._replay_refusal(request, form)
        if refusal is not None:
            return self._render(request, "error.html", 403, heading="Refused", message=refusal)
        if self.receiver is None:
            return self._render(
                request,
                "error.html",
                404,
                heading="Replay is off",
                message="This dashboard was started without a receiver, so it cannot replay.",
            )
        record = await self._record(request)
        if record is None:
            return self._not_found(request)
        force = form.get("force", [""])[0] == "1"
        try:
            await self.receiver.areplay(record.id, force=force)
        except KeyError:
            return self._render(
                request,
                "error.html",
                409,
                heading="Not in the receiver's inbox",
                message="The receiver records into another inbox than the one shown here.",
            )
        root = _root(request)
        return RedirectResponse(f"{root}/d/{record.id}#replays", status_code=303)

    async def overview_page(self, request: Request) -> Response:
        now = datetime.datetime.now(UTC)
        hour = datetime.timedelta(hours=1)
        start = now.replace(minute=0, second=0, microsecond=0) - 23 * hour
        hours = [start + index * hour for index in range(24)]
        windows: list[tuple[datetime.datetime, datetime.datetime | None]] = [
            (now - hour, None),
            (now - 24 * hour, None),
        ]
        windows += [(since, since + hour) for since in hours]
        # the two summaries and the 24 bars in one query (SQL backends), the slowest
        # handlers in another, both at once
        counted, slowest = await asyncio.gather(
            self.inbox.awindow_counts(windows),
            self.inbox.aslowest(limit=10, since=now - 24 * hour),
        )
        last_hour, last_day, *per_hour = counted
        buckets = []
        for since, counts in zip(hours, per_hour, strict=True):
            failed = sum(n for reason, n in counts.items() if _is_failure(reason))
            buckets.append((since, sum(counts.values()) - failed, failed))
        return self._render(
            request,
            "overview.html",
            windows=[("Last hour", _summary(last_hour)), ("Last 24 hours", _summary(last_day))],
            chart=_chart(buckets),
            slowest=slowest,
            now=now,
            filterable=_FILTERABLE,
        )

    async def stylesheet(self, request: Request) -> Response:
        if request.headers.get("if-none-match") == self._css_etag:
            return Response(status_code=304, headers={"ETag": self._css_etag})
        return Response(
            self._css,
            media_type="text/css",
            headers={"ETag": self._css_etag, "Cache-Control": "private, max-age=3600"},
        )


_LIST_PARAMS = ("outcome", "event", "org", "range", "since", "until", "q")
_SERVER_ERROR = Response(
    "Internal server error: see the server's log.\n",
    status_code=500,
    media_type="text/plain",
    headers={"Cache-Control": "no-store"},
)
_SECURITY_NAMES = {name.encode() for name, _ in SECURITY_HEADERS}
_SECURITY_RAW = [(name.encode(), value.encode()) for name, value in SECURITY_HEADERS]


class _Route(Route):
    """A route that raises its 405 (an ``HTTPException`` with ``Allow``, which
    :class:`Dashboard` answers with its error page) wherever it is served: Starlette's
    raises it only when mounted in an app (the scope has ``"app"``), and served alone
    answers plain text of its own."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.methods and scope["method"] not in self.methods:
            raise HTTPException(405, headers={"Allow": ", ".join(sorted(self.methods))})
        await super().handle(scope, receive, send)


def _proxy_hint(origin: str, host: str) -> str:
    """The refusal of a form whose browser says it is same-origin (``Sec-Fetch-Site``,
    which no page can forge) while its ``Origin`` names another host than ``Host``: a
    proxy rewrote ``Host``. The operator is told the option that fixes it; an
    ``Origin`` that is no origin to trust gets the plain refusal."""
    try:
        public = normalize_origin(origin)
    except ConfigurationError:
        return _CROSS_SITE
    if public != origin:  # browsers send origins serialized: not one
        return _CROSS_SITE
    return _PROXIED.format(origin=public, host=host)


def _root(request: Request) -> str:
    """Where the dashboard is mounted (``""`` when served at ``/``)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _header(scope: Scope, name: bytes) -> bytes:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value)
    return b""


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The request body, or ``None`` when it is longer than ``limit`` bytes."""
    chunks = bytearray()
    async for chunk in request.stream():
        chunks += chunk
        if len(chunks) > limit:
            return None
    return bytes(chunks)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _summary(counts: dict[str, int]) -> dict[str, Any]:
    total = sum(counts.values())
    failed = sum(n for reason, n in counts.items() if _is_failure(reason))
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return {
        "total": total,
        "failed": failed,
        "rate": f"{100 * failed / total:.1f} %" if total else "-",
        "rows": [(reason, n, _is_failure(reason)) for reason, n in rows],
    }


CHART_WIDTH = 720
CHART_HEIGHT = 160
CHART_TOP = 14
CHART_BOTTOM = 22


def _chart(buckets: list[tuple[datetime.datetime, int, int]]) -> dict[str, Any]:
    """Bars (succeeded, failed stacked) per hour, as SVG coordinates in a fixed viewBox,
    with each hour's counts for the table under the chart."""
    peak = max((ok + failed for _, ok, failed in buckets), default=0) or 1
    plot = CHART_HEIGHT - CHART_TOP - CHART_BOTTOM
    slot = CHART_WIDTH / len(buckets)
    bars = []
    for index, (since, ok, failed) in enumerate(buckets):
        x = index * slot + 2
        ok_height = plot * ok / peak
        failed_height = plot * failed / peak
        base = CHART_TOP + plot
        bars.append(
            {
                "x": f"{x:.1f}",
                "width": f"{slot - 4:.1f}",
                "ok_y": f"{base - ok_height:.1f}",
                "ok_height": f"{ok_height:.1f}",
                "failed_y": f"{base - ok_height - failed_height:.1f}",
                "failed_height": f"{failed_height:.1f}",
                "hour": f"{since:%H}:00",
                "ok": ok,
                "failed": failed,
                "label": f"{since:%H}:00 UTC: {ok} succeeded, {failed} failed",
                "tick": f"{since:%H}" if index % 3 == 0 else "",
                "tick_x": f"{x + (slot - 4) / 2:.1f}",
            }
        )
    return {
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "axis_y": CHART_TOP + plot,
        "label_y": CHART_HEIGHT - 6,
        "peak": peak,
        "bars": bars,
    }


def dashboard(
    inbox: Inbox | str | None = None,
    *,
    receiver: WebhookReceiver | None = None,
    basic_auth: str | tuple[str, str] | None = None,
    authorize: Authorize | None = None,
    csrf_key: bytes | str | None = None,
    page_size: int = 50,
    title: str = "Webhook inbox",
    trusted_origins: Iterable[str] = (),
) -> Dashboard:
    """The dashboard over ``inbox``, as an ASGI app to mount or serve.

    Args:
        inbox: The :class:`~service_webhooks.inbox.Inbox` to show, or a URL for
            :func:`~service_webhooks.inbox.inbox_from_url`; ``None``: ``receiver.inbox``.
        receiver: Shows a Replay button on each delivery; replays run through
            :meth:`~service_webhooks.WebhookReceiver.areplay` (it must record into the
            same inbox).
        basic_auth: ``"USER:PASSWORD"`` or ``(user, password)``: HTTP Basic
            authentication (compared in constant time); anything else is answered 401.
        authorize: ``authorize(scope) -> bool`` (or awaitable) for apps with their own
            login; ``False`` is answered 403. Exactly one of ``basic_auth`` and
            ``authorize`` is required.
        csrf_key: Key of the replay form's HMAC token: non-empty ``bytes``, or a ``str``
            taken as its UTF-8 bytes (what ``service-webhooks secret new`` prints).
            Default with ``basic_auth``: derived from its password (HMAC-SHA256), so
            every worker process given the same credentials agrees on it; with
            ``authorize``: random per process, so give every worker process the same key.
        page_size: Deliveries per list page (1..1000).
        title: Shown in the header and the window title.
        trusted_origins: The origins browsers reach the dashboard at through a reverse
            proxy that rewrites ``Host`` (``["https://ops.example.com"]``:
            ``scheme://host[:port]``, no path), whose replay forms are accepted although
            their ``Origin`` names another host than the ``Host`` received. Compared
            exactly with ``Origin`` (case and the default port normalized here); no
            wildcard, and ``X-Forwarded-Host`` is never read. Default: none, only
            forms whose ``Origin`` names the ``Host`` received.

    Returns:
        A :class:`Dashboard` (an ASGI app; HTTP and lifespan scopes).

    Raises:
        ConfigurationError: No inbox, a ``receiver`` that keeps none, no or both
            authentication methods, a bad ``basic_auth``, ``csrf_key`` or ``page_size``, a
            ``trusted_origins`` value that is not an origin (or one string, not a list).
    """
    if (basic_auth is None) == (authorize is None):
        raise ConfigurationError(
            "the dashboard needs exactly one of basic_auth='USER:PASSWORD' and authorize=callable"
        )
    if authorize is not None and not callable(authorize):
        raise ConfigurationError("authorize must be a callable authorize(scope) -> bool")
    if not 1 <= page_size <= 1000:
        raise ConfigurationError("page_size must be 1..1000")
    origins = parse_trusted_origins(trusted_origins)
    if isinstance(inbox, str):
        inbox = inbox_from_url(inbox)
    if inbox is None:
        inbox = receiver.inbox if receiver is not None else None
    if inbox is None:
        raise ConfigurationError("the dashboard needs an inbox (or a receiver that keeps one)")
    if receiver is not None and receiver.inbox is None:
        raise ConfigurationError(
            "the receiver keeps no inbox (inbox=False, or a store that keeps none), so it "
            "cannot replay: give it the inbox the dashboard shows"
        )
    credentials = None if basic_auth is None else _basic_credentials(basic_auth)
    if csrf_key is None:
        csrf_key = secrets.token_bytes(32) if credentials is None else _csrf_key_of(credentials)
    csrf_key = _checked_csrf_key(csrf_key)
    return Dashboard(
        inbox,
        receiver=receiver,
        basic_auth=credentials,
        authorize=authorize,
        csrf_key=csrf_key,
        page_size=page_size,
        title=title,
        trusted_origins=origins,
    )
