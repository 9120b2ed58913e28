"""The dashboard over HTTP, in process: authentication, CSRF, escaping, headers, pages."""

from __future__ import annotations

import base64
import datetime
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount
from starlette.testclient import TestClient

from service_webhooks import ConfigurationError, WebhookReceiver, sign
from service_webhooks.dashboard import SECURITY_HEADERS, dashboard
from service_webhooks.inbox import MemoryInbox, ReceivedDelivery, SQLiteInbox

from .conftest import HOSTILE, ORG, PASSWORD, SECRET, USER, deliver, envelope

AUTH = (USER, PASSWORD)
UTC = datetime.UTC


class Flaky:
    """A receiver whose ``note.created`` handler fails until ``fixed`` is set."""

    def __init__(self, inbox: Any) -> None:
        self.fixed = False
        self.calls = 0
        self.receiver = WebhookReceiver(SECRET, store="memory", inbox=inbox)

        @self.receiver.on("note.created")
        def handler(event: Any) -> None:
            self.calls += 1
            if not self.fixed:
                raise RuntimeError("not fixed <yet>")


@pytest.fixture
def flaky() -> Flaky:
    return Flaky(MemoryInbox())


@pytest.fixture
def client(flaky: Flaky) -> Iterator[TestClient]:
    app = dashboard(receiver=flaky.receiver, basic_auth=f"{USER}:{PASSWORD}")
    with TestClient(app, base_url="http://127.0.0.1:8001") as test_client:
        yield test_client


def failed_record(flaky: Flaky, text: str = HOSTILE) -> ReceivedDelivery:
    deliver(flaky.receiver, envelope("n-bad", text))
    record = flaky.receiver.inbox.search().items[0]  # type: ignore[union-attr]
    assert record.reason == "handler_failed"
    return record


def token_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', html)
    assert match, "no CSRF token in the page"
    return match[1]


def ids_on(html: str) -> list[str]:
    return re.findall(r'data-id="([0-9a-f]{32})"', html)


# -- authentication ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/overview", "/static/dashboard.css", "/d/00", "/nope"])
def test_a_request_without_credentials_gets_401(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Basic realm="')
    assert "Deliveries" not in response.text


@pytest.mark.parametrize(
    "header",
    [
        "Basic " + base64.b64encode(b"admin:wrong").decode(),
        "Basic " + base64.b64encode(b"other:" + PASSWORD.encode()).decode(),
        "Basic " + base64.b64encode(USER.encode() + PASSWORD.encode()).decode(),  # no colon
        "Basic !!!not-base64",
        "Bearer " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),
    ],
)
def test_wrong_credentials_get_401(client: TestClient, header: str) -> None:
    assert client.get("/", headers={"Authorization": header}).status_code == 401


def test_the_right_credentials_open_every_page(client: TestClient, flaky: Flaky) -> None:
    record = failed_record(flaky)
    for path in ("/", "/overview", f"/d/{record.id}", f"/d/{record.id}/body"):
        assert client.get(path, auth=AUTH).status_code == 200, path


async def test_authorize_callable_decides(flaky: Flaky) -> None:
    seen: list[str] = []

    async def authorize(scope: Any) -> bool:
        seen.append(scope["path"])
        return dict(scope["headers"]).get(b"x-staff") == b"yes"

    app = dashboard(flaky.receiver.inbox, authorize=authorize)
    with TestClient(app) as test_client:
        assert test_client.get("/").status_code == 403
        assert test_client.get("/", headers={"X-Staff": "yes"}).status_code == 200
    assert seen == ["/", "/"]
    sync_app = dashboard(flaky.receiver.inbox, authorize=lambda scope: False)
    assert TestClient(sync_app).get("/overview").status_code == 403


def test_every_response_carries_the_security_headers(client: TestClient, flaky: Flaky) -> None:
    record = failed_record(flaky)
    responses = [
        client.get("/"),  # 401
        client.get("/", auth=AUTH),
        client.get("/d/" + "f" * 32, auth=AUTH),  # 404
        client.get("/static/dashboard.css", auth=AUTH),
        client.get(f"/d/{record.id}/body", auth=AUTH),
        client.post(f"/d/{record.id}/replay", auth=AUTH),  # 403
    ]
    for response in responses:
        for name, value in SECURITY_HEADERS:
            assert response.headers[name] == value
    csp = dict(SECURITY_HEADERS)["content-security-policy"]
    assert "default-src 'none'" in csp
    assert "script-src" not in csp  # no script at all: default-src 'none' forbids it
    assert "frame-ancestors 'none'" in csp


class Unreachable(MemoryInbox):
    """An inbox whose database is down: every read raises (a driver's message)."""

    async def asearch(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("connection refused <script>alert(1)</script>")

    async def aget(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("connection refused <script>alert(1)</script>")


def test_a_server_error_carries_the_security_headers_and_no_traceback() -> None:
    """An exception (the inbox's database down) was answered by the server itself: a 500
    without the headers that every other response carries."""
    app = dashboard(Unreachable(), basic_auth=f"{USER}:{PASSWORD}")
    with TestClient(app, raise_server_exceptions=False) as client:
        for path in ("/", "/d/" + "f" * 32):
            response = client.get(path, auth=AUTH)
            assert response.status_code == 500
            for name, value in SECURITY_HEADERS:
                assert response.headers[name] == value
            assert response.headers["cache-control"] == "no-store"
            assert response.headers["content-type"].startswith("text/plain")
            assert "connection refused" not in response.text
            assert "Traceback" not in response.text
    with TestClient(app) as client, pytest.raises(RuntimeError, match="connection refused"):
        client.get("/", auth=AUTH)  # raised on after the answer: the server logs it


# -- escaping, secrets ---------------------------------------------------------------


def test_payload_headers_and_errors_are_escaped(client: TestClient, flaky: Flaky) -> None:
    body = envelope("n-x", HOSTILE)
    signature = sign(body, SECRET, ORG)
    stream = io.BytesIO(body)
    headers = [
        ("service-signature", signature),
        ("user-agent", "<b>ua</b>"),
        ("content-type", 'application/json"><i>'),
    ]
    assert flaky.receiver.handle("POST", headers, stream.read).reason == "handler_failed"
    record = flaky.receiver.inbox.search().items[0]  # type: ignore[union-attr]
    page = client.get(f"/d/{record.id}", auth=AUTH).text
    assert "<script>alert(1)</script>" not in page
    assert "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "not fixed &lt;yet&gt;" in page  # the error message
    assert "<b>ua</b>" not in page
    assert "&lt;b&gt;ua&lt;/b&gt;" in page
    assert "&#34;&gt;&lt;i&gt;" in page  # Content-Type
    assert signature.split("v1=")[-1] not in page  # no signature value anywhere
    assert SECRET not in page
    listing = client.get("/", auth=AUTH).text
    assert "<script>" not in listing


def test_control_and_bidi_characters_are_shown_as_escapes(client: TestClient, flaky: Flaky) -> None:
    # a signed event name with a right-to-left override displayed as other text than it
    # holds ("report\u202egpj.exe" reads "reportexe.jpg"); the CLI already escaped it
    name = "report\u202egpj.exe"
    assert deliver(flaky.receiver, envelope("n-bidi", name=name)).status == 200
    record = flaky.receiver.inbox.search().items[0]  # type: ignore[union-attr]
    for path in ("/", f"/d/{record.id}"):
        page = client.get(path, auth=AUTH).text
        assert "\u202e" not in page, path
        assert "report\\u202egpj.exe" in page, path
    echoed = client.get("/?org=o-%00-x", auth=AUTH).text  # a filter value shown back
    assert "\x00" not in echoed
    assert "o-\\u0000-x" in echoed


# -- replay and CSRF -----------------------------------------------------------------


def test_replay_after_the_fix_shows_the_new_outcome(client: TestClient, flaky: Flaky) -> None:
    record = failed_record(flaky)
    page = client.get(f"/d/{record.id}", auth=AUTH).text
    assert 'id="replay"' in page
    flaky.fixed = True
    response = client.post(
        f"/d/{record.id}/replay",
        data={"csrf_token": token_of(page)},
        auth=AUTH,
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert response.headers["location"] == f"/d/{record.id}#replays"
    after = client.get(f"/d/{record.id}", auth=AUTH).text
    assert "200 processed" in after
    assert "Never replayed" not in after
    assert flaky.calls == 2
    # processed: a second replay is a duplicate unless forced
    client.post(f"/d/{record.id}/replay", data={"csrf_token": token_of(after)}, auth=AUTH)
    assert flaky.calls == 2
    client.post(
        f"/d/{record.id}/replay", data={"csrf_token": token_of(after), "force": "1"}, auth=AUTH
    )
    assert flaky.calls == 3
    replays = flaky.receiver.inbox.get(record.id).replays  # type: ignore[union-attr]
    assert [(r.reason, r.forced) for r in replays] == [
        ("processed", False),
        ("duplicate", False),
        ("processed", True),
    ]


_TOKEN_WRONG = "security token is missing or wrong"
_OTHER_SITE = "came from another site"


@pytest.mark.parametrize(
    ("form", "headers", "says"),
    [
        ({}, {}, _TOKEN_WRONG),
        ({"csrf_token": ""}, {}, _TOKEN_WRONG),
        ({"csrf_token": "0" * 64}, {}, _TOKEN_WRONG),
        ({"csrf_token": "TOKEN"}, {"Origin": "https://evil.example"}, _OTHER_SITE),
        ({"csrf_token": "TOKEN"}, {"Sec-Fetch-Site": "cross-site"}, _OTHER_SITE),
        ({"csrf_token": "TOKEN", "pad": "x" * 5000}, {}, "form is too large"),
    ],
    ids=["missing", "empty", "wrong", "foreign-origin", "cross-site", "too-long"],
)
def test_a_replay_without_a_good_token_is_403_and_replays_nothing(
    client: TestClient, flaky: Flaky, form: dict[str, str], headers: dict[str, str], says: str
) -> None:
    record = failed_record(flaky)
    token = token_of(client.get(f"/d/{record.id}", auth=AUTH).text)
    form = {k: token if v == "TOKEN" else v for k, v in form.items()}
    flaky.fixed = True
    response = client.post(f"/d/{record.id}/replay", data=form, headers=headers, auth=AUTH)
    assert response.status_code == 403
    assert says in response.text
    assert flaky.calls == 1
    assert flaky.receiver.inbox.get(record.id).replays == ()  # type: ignore[union-attr]


def _replayed_elsewhere(record_id: str, one: Any, other: Any, **auth: Any) -> int:
    """The status of a Replay form rendered by dashboard ``one`` and posted to ``other``
    (two worker processes serving one dashboard)."""
    token = token_of(TestClient(one).get(f"/d/{record_id}", **auth).text)
    response = TestClient(other).post(
        f"/d/{record_id}/replay", data={"csrf_token": token}, follow_redirects=False, **auth
    )
    return response.status_code


def test_workers_given_the_same_basic_auth_accept_each_others_replay_forms(
    flaky: Flaky,
) -> None:
    # the key is derived from the password: a random one per process refused about half
    # the presses under uvicorn --workers 2
    record = failed_record(flaky)
    one, other = (dashboard(receiver=flaky.receiver, basic_auth=AUTH) for _ in "ab")
    assert _replayed_elsewhere(record.id, one, other, auth=AUTH) == 303
    user, password = AUTH
    changed = dashboard(receiver=flaky.receiver, basic_auth=(user, password + "-new"))
    new_auth = (user, password + "-new")
    token = token_of(TestClient(one).get(f"/d/{record.id}", auth=AUTH).text)
    refused = TestClient(changed).post(
        f"/d/{record.id}/replay", data={"csrf_token": token}, auth=new_auth
    )
    assert refused.status_code == 403  # another password, another key


def test_workers_with_their_own_login_need_one_csrf_key(flaky: Flaky) -> None:
    record = failed_record(flaky)
    own = [dashboard(receiver=flaky.receiver, authorize=lambda scope: True) for _ in "ab"]
    assert _replayed_elsewhere(record.id, *own) == 403  # random per process
    shared = [
        dashboard(receiver=flaky.receiver, authorize=lambda scope: True, csrf_key=b"k" * 32)
        for _ in "ab"
    ]
    assert _replayed_elsewhere(record.id, *shared) == 303


def test_a_str_csrf_key_is_taken_as_its_bytes(flaky: Flaky) -> None:
    """``service-webhooks secret new`` prints a str, read back from the environment as
    one: it was kept as it was, and every delivery page answered 500 (HMAC takes bytes)."""
    record = failed_record(flaky)
    key = "k" * 43
    as_str, as_bytes = (
        dashboard(receiver=flaky.receiver, authorize=lambda scope: True, csrf_key=given)
        for given in (key, key.encode())
    )
    assert TestClient(as_str).get(f"/d/{record.id}").status_code == 200
    assert _replayed_elsewhere(record.id, as_str, as_bytes) == 303


@pytest.mark.parametrize("key", [b"", "", 42])
def test_an_empty_or_wrongly_typed_csrf_key_is_refused(flaky: Flaky, key: Any) -> None:
    with pytest.raises(ConfigurationError, match="csrf_key must"):
        dashboard(receiver=flaky.receiver, authorize=lambda scope: True, csrf_key=key)


def test_without_a_receiver_there_is_no_replay(flaky: Flaky) -> None:
    record = failed_record(flaky)
    app = TestClient(dashboard(flaky.receiver.inbox, basic_auth=AUTH))
    page = app.get(f"/d/{record.id}", auth=AUTH).text
    assert 'id="replay"' not in page
    token = app.app.csrf_token(Request({"type": "http", "headers": []}))  # type: ignore[attr-defined]
    response = app.post(f"/d/{record.id}/replay", data={"csrf_token": token}, auth=AUTH)
    assert response.status_code == 404
    assert "without a receiver" in response.text
    assert flaky.calls == 1


def test_replay_of_a_record_the_receiver_does_not_keep_is_409(flaky: Flaky) -> None:
    record = failed_record(flaky)
    elsewhere = Flaky(MemoryInbox())
    app = TestClient(dashboard(flaky.receiver.inbox, receiver=elsewhere.receiver, basic_auth=AUTH))
    token = token_of(app.get(f"/d/{record.id}", auth=AUTH).text)
    assert (
        app.post(f"/d/{record.id}/replay", data={"csrf_token": token}, auth=AUTH).status_code == 409
    )
    missing = app.post("/d/" + "e" * 32 + "/replay", data={"csrf_token": token}, auth=AUTH)
    assert missing.status_code == 404


# -- list: filters and keyset paging -------------------------------------------------


def record_at(inbox: Any, n: int, moment: datetime.datetime, **fields: Any) -> ReceivedDelivery:
    values: dict[str, Any] = {
        "id": f"{n:032x}",
        "received_at": moment,
        "organization_id": ORG,
        "event_name": "note.created",
        "version": 1,
        "idempotency_key": f"k{n}",
        "body": envelope(f"n-{n}"),
        "content_type": "application/json",
        "user_agent": "test",
        "status": 200,
        "reason": "processed",
        "handler_time": 0.001 * (n % 50),
    }
    values.update(fields)
    record = ReceivedDelivery(**values)
    inbox.record(record)
    return record


def walk(client: TestClient, first: str, *, arrive: bool = False) -> tuple[list[str], int]:
    """Every ID on every page from ``first``, following the Older links."""
    seen: list[str] = []
    pages = 0
    url: str | None = first
    while url is not None:
        page = client.get(url, auth=AUTH)
        assert page.status_code == 200
        pages += 1
        seen.extend(ids_on(page.text))
        match = re.search(r'id="older" rel="next" href="([^"]+)"', page.text)
        url = match[1].replace("&amp;", "&") if match else None
        if arrive and pages == 3:  # deliveries keep arriving while someone pages
            now = datetime.datetime.now(UTC)
            for n in range(5000, 5010):
                record_at(client.app.inbox, n, now)  # type: ignore[attr-defined]
    return seen, pages


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_paging_over_1000_deliveries_shows_each_exactly_once(backend: str, tmp_path: Path) -> None:
    inbox: Any = MemoryInbox(max_records=10_000) if backend == "memory" else None
    if inbox is None:
        inbox = SQLiteInbox(tmp_path / "inbox.sqlite3")
    start = datetime.datetime.now(UTC) - datetime.timedelta(hours=2)
    expected = []
    for n in range(1000):
        # pairs share a timestamp: the ID breaks the tie
        moment = start + datetime.timedelta(seconds=n // 2)
        expected.append(record_at(inbox, n, moment).id)
    client = TestClient(dashboard(inbox, basic_auth=AUTH, page_size=50))
    seen, pages = walk(client, "/", arrive=True)
    assert pages == 20
    assert len(seen) == len(set(seen)) == 1000
    assert set(seen) == set(expected)
    ordered = sorted(
        expected, key=lambda i: (start + datetime.timedelta(seconds=int(i, 16) // 2), i)
    )
    assert seen == ordered[::-1]
    # filtered paging: one outcome, the same walk
    failed, pages = walk(client, "/?outcome=processed&event=note.created&org=" + ORG)
    assert len(failed) == len(set(failed)) == 1010  # the 10 that arrived, on the first page
    assert pages == 21


def test_filters_select_deliveries(client: TestClient, flaky: Flaky) -> None:
    inbox = flaky.receiver.inbox
    now = datetime.datetime.now(UTC)
    ok = record_at(inbox, 1, now - datetime.timedelta(minutes=5))
    old = record_at(inbox, 2, now - datetime.timedelta(days=3), event_name="note.deleted")
    other = record_at(inbox, 3, now - datetime.timedelta(minutes=1), organization_id="o-OTHER")
    bad = record_at(inbox, 4, now, status=500, reason="handler_failed")
    refused = record_at(inbox, 5, now, status=422, reason="unprocessable")

    def found(query: str) -> set[str]:
        response = client.get("/" + query, auth=AUTH)
        assert response.status_code == 200, response.text
        return set(ids_on(response.text))

    assert found("") == {ok.id, old.id, other.id, bad.id, refused.id}
    assert found("?outcome=5xx") == {bad.id}
    assert found("?outcome=4xx") == {refused.id}
    assert found("?outcome=handler_failed") == {bad.id}
    assert found("?outcome=2xx") == {ok.id, old.id, other.id}
    assert found("?event=note.deleted") == {old.id}
    assert found("?org=o-OTHER") == {other.id}
    assert found("?range=24h&outcome=2xx") == {ok.id, other.id}
    since = (now - datetime.timedelta(days=4)).strftime("%Y-%m-%dT%H:%M:%S")
    until = (now - datetime.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    assert found(f"?since={since}&until={until}") == {old.id}
    assert found("?q=" + old.id.upper()) == {old.id}
    assert len(found("?q=" + old.id[:20])) == 5
    assert found("?q=" + "9" * 32) == set()


@pytest.mark.parametrize(
    "query",
    ["?outcome=nope", "?range=2y", "?since=yesterday", "?q=not-hex", "?cursor=garbage"],
)
def test_a_bad_filter_is_explained_with_400(client: TestClient, query: str) -> None:
    response = client.get("/" + query, auth=AUTH)
    assert response.status_code == 400
    assert 'class="notice notice-error" role="alert"' in response.text


def test_every_link_of_the_overview_filters_the_list(flaky: Flaky) -> None:
    # CeleryHandoff answers handoff_failed: the overview linked its count to
    # /?outcome=handoff_failed, answered 400 "not a known outcome"
    inbox = flaky.receiver.inbox
    now = datetime.datetime.now(UTC)
    handoff = record_at(inbox, 1, now, status=503, reason="handoff_failed")
    record_at(inbox, 2, now, status=503, reason="broker_busy")  # an app's own RetryLater
    record_at(inbox, 3, now)
    app = dashboard(receiver=flaky.receiver, basic_auth=f"{USER}:{PASSWORD}")
    with TestClient(app, base_url="http://127.0.0.1:8001") as client:
        overview = client.get("/overview", auth=AUTH).text
        assert ">broker_busy</span>" in overview
        links = re.findall(r'href="(/\?outcome=[^"]*)"', overview)
        assert any("handoff_failed" in link for link in links)
        assert not any("broker_busy" in link for link in links)
        for link in links:
            assert client.get(link.replace("&amp;", "&"), auth=AUTH).status_code == 200, link
        page = client.get("/?outcome=handoff_failed", auth=AUTH).text
        assert ids_on(page) == [handoff.id]
        assert '<option value="handoff_failed" selected>' in page


# -- detail, body, overview, mounting ------------------------------------------------


def test_detail_shows_the_traceback_and_download_gives_the_bytes(
    client: TestClient, flaky: Flaky
) -> None:
    record = failed_record(flaky)
    page = client.get(f"/d/{record.id}", auth=AUTH).text
    assert "Traceback (most recent call last)" in page
    assert "RuntimeError" in page
    assert "&#34;eventName&#34;: &#34;note.created&#34;" in page  # indented JSON
    body = client.get(f"/d/{record.id}/body", auth=AUTH)
    assert body.content == record.body
    assert body.headers["content-type"] == "application/octet-stream"
    assert body.headers["content-disposition"].startswith("attachment;")
    not_json = record_at(flaky.receiver.inbox, 7, record.received_at, body=b"\xff not json")
    assert "not UTF-8" in client.get(f"/d/{not_json.id}", auth=AUTH).text  # nor JSON
    for missing in ("/d/" + "a" * 32, "/d/XYZ", "/d/" + "a" * 32 + "/body"):
        assert client.get(missing, auth=AUTH).status_code == 404


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 990 + b"]" * 990,  # near msgspec's limit: unhandled or malformed, recorded
        b"[" * 5000 + b"]" * 5000,  # malformed_envelope, recorded: it was authenticated
        b"[" + b",".join([b"[" * 400 + b"]" * 400] * 60) + b"]",  # 48 KB, unhandled
    ],
    ids=["990-deep", "5000-deep", "wide-and-deep"],
)
def test_a_deeply_nested_payload_is_shown_raw_not_a_500_or_a_huge_page(
    client: TestClient, flaky: Flaky, data: bytes
) -> None:
    body = b'{"eventName":"x.nested","version":1,"data":' + data + b"}"
    assert deliver(flaky.receiver, body).reason in ("unhandled", "malformed_envelope")
    record = flaky.receiver.inbox.search().items[0]  # type: ignore[union-attr]
    page = client.get(f"/d/{record.id}", auth=AUTH)
    assert page.status_code == 200  # Python's json: RecursionError, once a 500
    # indented, the wide body was 19 MB of text (two characters per level per line)
    assert len(page.content) < 8 * len(body) + (1 << 20) + 20_000
    assert "JSON too nested to indent" in page.text or "not JSON" in page.text


def test_a_list_page_of_long_event_names_stays_small(client: TestClient, flaky: Flaky) -> None:
    """An eventName fills the body (1 MiB): the list showed each in full, escaped, so 50
    such deliveries made a 200 MB page. A cell shows its start; the detail, all of it."""
    name = "<" * 200_000
    for n in range(5):
        body = json.dumps({"eventName": name, "version": 1, "data": n}).encode()
        assert deliver(flaky.receiver, body).reason == "unhandled"
    listing = client.get("/", auth=AUTH)
    assert listing.status_code == 200
    assert len(ids_on(listing.text)) == 5
    assert len(listing.content) < 50_000  # was 4 MB
    assert "&lt;" * 119 + "…" in listing.text
    record_id = ids_on(listing.text)[0]
    assert "&lt;" * 200_000 in client.get(f"/d/{record_id}", auth=AUTH).text


def test_overview_counts_failure_rate_slowest_and_chart(client: TestClient, flaky: Flaky) -> None:
    inbox = flaky.receiver.inbox
    now = datetime.datetime.now(UTC)
    for n in range(6):
        record_at(inbox, n, now - datetime.timedelta(minutes=10), handler_time=0.5 + n)
    record_at(inbox, 10, now - datetime.timedelta(hours=5), status=500, reason="handler_failed")
    record_at(inbox, 11, now - datetime.timedelta(hours=5), status=500, reason="handler_failed")
    page = client.get("/overview", auth=AUTH).text
    hour, day = page.split('aria-label="Last 24 hours"')
    assert '<span class="num">6</span>' in hour
    assert "0.0 %" in hour
    assert '<span class="num">8</span>' in day
    assert "25.0 %" in day
    assert "(2 failed)" in day
    assert page.count('<rect class="bar-bad"') == 24
    assert "<svg" in page
    assert "<script" not in page
    slow = page.split('id="h-slow"')[1]
    assert slow.index("5.50 s") < slow.index("4.50 s") < slow.index("500.0 ms")
    empty = TestClient(dashboard(MemoryInbox(), basic_auth=AUTH)).get("/overview", auth=AUTH)
    assert "No handler ran" in empty.text


def test_the_chart_has_its_numbers_in_a_table_and_hatched_failures(
    client: TestClient, flaky: Flaky
) -> None:
    """The per-hour counts were only in each bar's SVG ``<title>`` (a hover tooltip),
    and failed bars differed from succeeded ones by their colour alone."""
    inbox = flaky.receiver.inbox
    now = datetime.datetime.now(UTC)
    for n in range(3):
        record_at(inbox, n, now)
    record_at(inbox, 5, now, status=500, reason="handler_failed")
    page = client.get("/overview", auth=AUTH).text
    assert page.count('<rect class="bar-bad" fill="url(#hatch-bad)"') == 24
    assert '<rect class="key-bad" fill="url(#hatch-bad)"' in page  # the legend's
    assert '<pattern id="hatch-bad"' in page
    table = page.split('<details class="chart-data" id="chart-data">')[1].split("</details>")[0]
    assert "<caption" in table
    cells = r'<th scope="row">(\d\d:00)</th><td class="num">(\d+)</td><td class="num">(\d+)</td>'
    rows = re.findall(cells, table)
    assert len(rows) == 24
    assert rows[-1] == (f"{now:%H}:00", "3", "1")
    assert sum(int(failed) for _, _, failed in rows) == 1


def test_a_list_title_names_its_filters_and_page(flaky: Flaky) -> None:
    """Every list page was titled "Deliveries · Webhook inbox", whatever its filters,
    page, or error: tabs and bookmarks could not be told apart."""
    inbox = flaky.receiver.inbox
    now = datetime.datetime.now(UTC)
    records = [record_at(inbox, n, now - datetime.timedelta(minutes=n)) for n in range(3)]
    client = TestClient(dashboard(inbox, basic_auth=AUTH, page_size=2))

    def title(query: str, status: int = 200) -> str:
        response = client.get("/" + query, auth=AUTH)
        assert response.status_code == status, response.text
        match = re.search(r"<title>(.*)</title>", response.text)
        assert match
        return match[1]

    assert title("") == "Deliveries · Webhook inbox"
    assert title("?outcome=5xx&event=note.created") == (
        "Failed · note.created · Deliveries · Webhook inbox"
    )
    assert title("?outcome=handler_failed&org=o-X&range=24h") == (
        "handler_failed · o-X · Last 24 hours · Deliveries · Webhook inbox"
    )
    assert title("?outcome=2xx&since=2025-01-31T13:45&until=2025-02-01T00:00:00%2B01:00") == (
        "Succeeded · from 2025-01-31 13:45:00 · to 2025-01-31 23:00:00 · Deliveries · Webhook inbox"
    )
    assert title("?q=ABC") == "ID abc… · Deliveries · Webhook inbox"
    assert title(f"?q={records[0].id}") == f"ID {records[0].id} · Deliveries · Webhook inbox"
    assert title("?event=%3Cb%3E") == "&lt;b&gt; · Deliveries · Webhook inbox"  # escaped
    # the heading says it too, after the page's name
    page = client.get("/?outcome=4xx&event=note.created", auth=AUTH).text
    assert '<h1>Deliveries<span class="selection"> · Refused · note.created</span></h1>' in page
    assert "<h1>Deliveries</h1>" in client.get("/", auth=AUTH).text
    # the older page: where it starts, so that it differs from the first
    older = re.search(r'id="older" rel="next" href="/\?cursor=([^"]+)"', title_page(client))
    assert older
    start = f"{records[1].received_at:%Y-%m-%d %H:%M:%S}"
    assert title(f"?cursor={older[1]}") == f"older than {start} · Deliveries · Webhook inbox"
    # an error says so
    assert title("?outcome=nope", 400) == "Error: bad filter · Deliveries · Webhook inbox"
    assert title("?event=a%00b", 400) == "Error: bad filter · Deliveries · Webhook inbox"
    assert title("?cursor=garbage", 400) == "Error: bad page address · Deliveries · Webhook inbox"


def title_page(client: TestClient) -> str:
    return client.get("/", auth=AUTH).text


def test_a_single_page_has_no_empty_pager_landmark(flaky: Flaky) -> None:
    """A list that fits one page rendered an empty ``<nav aria-label="Pages of
    deliveries">``: a landmark a screen reader announces, with nothing in it."""
    inbox = flaky.receiver.inbox
    now = datetime.datetime.now(UTC)
    client = TestClient(dashboard(inbox, basic_auth=AUTH, page_size=2))
    pager = 'aria-label="Pages of deliveries"'
    assert pager not in client.get("/", auth=AUTH).text  # no delivery at all
    record_at(inbox, 1, now)
    assert pager not in client.get("/", auth=AUTH).text  # one page
    assert pager not in client.get("/?outcome=5xx", auth=AUTH).text  # none matches
    assert pager not in client.get("/?outcome=nope", auth=AUTH).text  # a bad filter
    for n in range(2, 4):
        record_at(inbox, n, now - datetime.timedelta(minutes=n))
    first = client.get("/", auth=AUTH).text
    assert pager in first
    assert 'id="older"' in first
    link = re.search(r'id="older" rel="next" href="([^"]+)"', first)
    assert link
    last = client.get(link[1].replace("&amp;", "&"), auth=AUTH).text
    assert pager in last
    assert 'id="first-page"' in last
    assert 'id="older"' not in last


def test_a_body_not_utf8_or_empty_says_so(client: TestClient, flaky: Flaky) -> None:
    """A body of invalid UTF-8 was labelled "not JSON: shown as UTF-8 text" while its
    invalid bytes were silently shown as U+FFFD; an empty body was an empty box."""
    inbox = flaky.receiver.inbox
    now = datetime.datetime.now(UTC)
    latin = record_at(inbox, 1, now, body='{"text": "café"}'.encode("latin-1"))
    page = client.get(f"/d/{latin.id}", auth=AUTH).text
    assert "not UTF-8: invalid bytes shown as \N{REPLACEMENT CHARACTER}" in page
    assert "shown as UTF-8 text" not in page
    assert "caf\N{REPLACEMENT CHARACTER}" in page
    assert f'href="/d/{latin.id}/body" download' in page  # the exact bytes
    text = record_at(inbox, 2, now, body="plain text, café".encode())
    assert "not JSON: shown as UTF-8 text" in client.get(f"/d/{text.id}", auth=AUTH).text
    empty = record_at(inbox, 3, now, body=b"")
    page = client.get(f"/d/{empty.id}", auth=AUTH).text
    assert "Empty body: the delivery had no payload." in page
    assert 'id="payload"' not in page  # no empty box
    assert "Size</dt><dd>0 bytes" in page


def test_mounted_below_a_prefix_every_link_keeps_it(flaky: Flaky) -> None:
    record = failed_record(flaky)
    app = Starlette(
        routes=[Mount("/webhooks/admin", app=dashboard(receiver=flaky.receiver, basic_auth=AUTH))]
    )
    with TestClient(app) as test_client:
        page = test_client.get("/webhooks/admin/", auth=AUTH).text
        assert 'href="/webhooks/admin/static/dashboard.css"' in page
        assert f'href="/webhooks/admin/d/{record.id}"' in page
        assert 'href="/webhooks/admin/overview"' in page
        detail = test_client.get(f"/webhooks/admin/d/{record.id}", auth=AUTH).text
        assert f'action="/webhooks/admin/d/{record.id}/replay"' in detail
        flaky.fixed = True
        response = test_client.post(
            f"/webhooks/admin/d/{record.id}/replay",
            data={"csrf_token": token_of(detail)},
            auth=AUTH,
            follow_redirects=False,
        )
        assert response.headers["location"] == f"/webhooks/admin/d/{record.id}#replays"
        css = test_client.get("/webhooks/admin/static/dashboard.css", auth=AUTH)
        assert css.headers["content-type"].startswith("text/css")
        again = test_client.get(
            "/webhooks/admin/static/dashboard.css",
            auth=AUTH,
            headers={"If-None-Match": css.headers["etag"]},
        )
        assert again.status_code == 304


@pytest.mark.parametrize("mount", ["", "/webhooks/admin"])
def test_an_unknown_path_or_method_is_a_page_not_a_500(flaky: Flaky, mount: str) -> None:
    """Mounted in a Starlette app, the router raised its 404 and 405 (instead of
    answering them) after the dashboard had started its own 500: a mistyped address was
    an 'Internal server error' and a traceback in the server's log. Served alone, the
    405 was Starlette's plain text."""
    record = failed_record(flaky)
    app: Any = dashboard(receiver=flaky.receiver, basic_auth=AUTH)
    if mount:
        app = Starlette(routes=[Mount(mount, app=app)])
    with TestClient(app) as test_client:  # raises what the server would log
        missing = test_client.get(f"{mount}/nope", auth=AUTH)
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("text/html")
        assert "<title>Not found · Webhook inbox</title>" in missing.text
        assert f'href="{mount}/"' in missing.text  # back to the deliveries
        # served alone, Starlette's route answered its 405 itself, in plain text
        wrong = test_client.get(f"{mount}/d/{record.id}/replay", auth=AUTH)
        assert wrong.status_code == 405
        assert wrong.headers["allow"] == "POST"
        assert wrong.headers["content-type"].startswith("text/html")
        assert "does not answer GET requests" in wrong.text
        for response in (missing, test_client.post(f"{mount}/overview", auth=AUTH)):
            for name, value in SECURITY_HEADERS:
                assert response.headers[name] == value
    assert flaky.receiver.inbox.get(record.id).replays == ()  # type: ignore[union-attr]


def test_no_page_refers_to_another_origin(client: TestClient, flaky: Flaky) -> None:
    record = failed_record(flaky)
    for path in ("/", "/overview", f"/d/{record.id}"):
        html = client.get(path, auth=AUTH).text
        assert not re.search(r'(src|href|action)="(https?:)?//', html), path
        assert "<script" not in html, path
        assert " style=" not in html, path


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of"),
        ({"basic_auth": "a:b", "authorize": lambda scope: True}, "exactly one of"),
        ({"basic_auth": "nocolon"}, "USER:PASSWORD"),
        ({"basic_auth": ":pw"}, "non-empty"),
        ({"authorize": "yes"}, "callable"),
        ({"basic_auth": "a:b", "page_size": 0}, "page_size"),
    ],
)
def test_configuration_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        dashboard(MemoryInbox(), **kwargs)


def test_an_inbox_is_required_and_may_be_a_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="needs an inbox"):
        dashboard(basic_auth="a:b")
    receiver = WebhookReceiver(SECRET, store="memory", inbox=False)
    with pytest.raises(ConfigurationError, match="needs an inbox"):
        dashboard(receiver=receiver, basic_auth="a:b")
    app = dashboard(f"sqlite:{tmp_path / 'x.sqlite3'}", basic_auth="a:b")
    assert isinstance(app.inbox, SQLiteInbox)


def test_a_receiver_that_keeps_no_inbox_cannot_be_the_replaying_one() -> None:
    # shown over another inbox, its Replay button could only fail (a 500 per press)
    receiver = WebhookReceiver(SECRET, store="memory", inbox=False)
    with pytest.raises(ConfigurationError, match="keeps no inbox"):
        dashboard(MemoryInbox(), receiver=receiver, basic_auth="a:b")


def test_lifespan_and_other_scopes(flaky: Flaky) -> None:
    with TestClient(dashboard(MemoryInbox(), basic_auth=AUTH)) as test_client:  # lifespan runs
        assert test_client.get("/", auth=AUTH).status_code == 200
