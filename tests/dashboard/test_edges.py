"""The dashboard at the edges an operator reaches: odd times and cursors in the URL, a
body UTF-8 cannot encode, and ``inbox serve`` behind a proxy that strips a path prefix."""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from service_webhooks import MemoryStore, WebhookReceiver, sign
from service_webhooks.cli import main
from service_webhooks.dashboard import dashboard
from service_webhooks.inbox import Inbox, SQLiteInbox

from .conftest import ORG, PASSWORD, SECRET, USER, deliver, envelope

AUTH = (USER, PASSWORD)
LONE_SURROGATE = b'{"eventName": "note.created", "version": 1, "data": "a \\ud800 b"}'


@pytest.fixture
def receiver(tmp_path: Path) -> WebhookReceiver:
    inbox = SQLiteInbox(tmp_path / "inbox.sqlite3")
    return WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox)


@pytest.fixture
def client(receiver: WebhookReceiver) -> Iterator[TestClient]:
    app = dashboard(receiver=receiver, basic_auth=f"{USER}:{PASSWORD}")
    with TestClient(app, base_url="http://127.0.0.1:8001") as test_client:
        yield test_client


def alert(html: str) -> str:
    match = re.search(r'role="alert">([^<]*)<', html)
    return match[1] if match else ""


def field(html: str, name: str) -> str:
    match = re.search(rf'name="{name}" id="[^"]+" value="([^"]*)"', html)
    assert match, f"no {name} field"
    return match[1]


@pytest.mark.parametrize(
    "cursor",
    [
        "9" * 24 + "-ab",
        str(2**63) + "-" + "a" * 32,
        "\u00b2-" + "a" * 32,  # a digit to str.isdigit(), not to int(): was a 500
        "1\u00b9-ab",
        "\u0661-ab",  # an Arabic-Indic one
    ],
)
def test_a_cursor_the_inbox_did_not_make_is_a_400_not_a_500(
    client: TestClient, cursor: str
) -> None:
    response = client.get("/", params={"cursor": cursor}, auth=AUTH)
    assert response.status_code == 400
    assert alert(response.text) == "not an inbox cursor"


@pytest.fixture(params=["sqlite", "postgres"])
def any_inbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Inbox]:
    """A SQLite or a PostgreSQL inbox (a table of its own) holding one delivery."""
    if request.param == "sqlite":
        inbox: Any = SQLiteInbox(tmp_path / "inbox.sqlite3")
    else:
        from service_webhooks.inbox import PostgresInbox

        url: str = request.getfixturevalue("postgres_url")
        inbox = PostgresInbox(url, table=f"sw_dash_edges_{uuid.uuid4().hex[:12]}")
        inbox.create_schema()
    deliver(WebhookReceiver(SECRET, store=MemoryStore(), inbox=inbox), envelope("n-1"))
    yield inbox
    if request.param == "postgres":
        inbox.drop_schema()
    inbox.close()


@pytest.mark.parametrize("params", [{"event": "note\x00created"}, {"org": "\x00"}])
def test_a_nul_in_a_text_filter_is_a_400_not_a_500(any_inbox: Inbox, params: Any) -> None:
    """PostgreSQL refuses a NUL in a query parameter: the list page was a 500."""
    with TestClient(dashboard(any_inbox, basic_auth=AUTH)) as client:
        response = client.get("/", params=params, auth=AUTH)
        assert response.status_code == 400
        assert "NUL" in alert(response.text)
        assert client.get("/", params={"event": "note.created"}, auth=AUTH).status_code == 200


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"since": "0001-01-01T00:00+01:00"}, "from: a date and time in years 1 to 9999 (UTC)"),
        ({"until": "9999-12-31T23:59:59-01:00"}, "to: a date and time in years 1 to 9999 (UTC)"),
        (
            {"range": "24h", "since": "9999-12-31T23:30-05:00"},
            "from: a date and time in years 1 to 9999 (UTC)",
        ),
    ],
)
def test_a_time_outside_utc_years_is_a_400_naming_the_field(
    client: TestClient, params: dict[str, str], message: str
) -> None:
    response = client.get("/", params=params, auth=AUTH)
    assert response.status_code == 400
    assert alert(response.text) == message


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("2025-01-31T13:45:00Z", "2025-01-31T13:45:00"),
        ("2025-01-31T15:45:00+02:00", "2025-01-31T13:45:00"),
        ("2025-01-31", "2025-01-31T00:00:00"),
        ("2025-01-31T13:45:07.250", "2025-01-31T13:45:07.250"),
        ("2025-01-31T13:45", "2025-01-31T13:45:00"),
        ("not a time", "not a time"),
    ],
)
def test_from_and_to_fields_show_what_a_datetime_local_input_keeps(
    client: TestClient, given: str, shown: str
) -> None:
    # a browser shows an empty datetime-local field for a value with an offset or a
    # date alone, and the next Apply would silently drop the filter
    for name in ("since", "until"):
        html = client.get("/", params={name: given}, auth=AUTH).text
        assert field(html, name) == shown


def test_a_normalised_time_selects_the_same_deliveries(
    client: TestClient, receiver: WebhookReceiver
) -> None:
    deliver(receiver, envelope("n-1"))
    [record] = receiver.inbox.search().items  # type: ignore[union-attr]
    offset = record.received_at.astimezone(datetime.UTC).isoformat()  # ends +00:00
    first = client.get("/", params={"since": offset}, auth=AUTH).text
    assert record.id in first
    again = client.get("/", params={"since": field(first, "since")}, auth=AUTH).text
    assert record.id in again


def test_a_body_with_a_lone_surrogate_escape_has_a_detail_page(
    client: TestClient, receiver: WebhookReceiver
) -> None:
    outcome = receiver.process(LONE_SURROGATE, sign(LONE_SURROGATE, SECRET, ORG))
    assert outcome.status == 400
    [record] = receiver.inbox.search().items  # type: ignore[union-attr]
    response = client.get(f"/d/{record.id}", auth=AUTH)
    assert response.status_code == 200
    assert "a \\ud800 b" in response.text
    assert client.get(f"/d/{record.id}/body", auth=AUTH).content == LONE_SURROGATE


# -- inbox serve --root-path -----------------------------------------------------------


@pytest.mark.parametrize(("given", "prefix"), [("/hooks/admin/", "/hooks/admin"), ("", "")])
def test_serve_root_path_makes_links_point_below_the_proxy_prefix(
    tmp_path: Path, served: list[tuple[Any, dict[str, Any]]], given: str, prefix: str
) -> None:
    store = f"sqlite:{tmp_path / 'x.sqlite3'}"
    args = ["inbox", "serve", "--store", store, "--basic-auth", "u:p", "--root-path", given]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    app, options = served[-1]
    assert options["root_path"] == prefix
    # what uvicorn hands the app once the proxy stripped the prefix
    with TestClient(app, root_path=prefix) as test_client:
        html = test_client.get("/", auth=("u", "p")).text
    assert f'href="{prefix}/static/dashboard.css"' in html
    assert f'href="{prefix}/overview"' in html
    assert f'action="{prefix}/"' in html


@pytest.mark.parametrize("given", ["hooks", "http://proxy/hooks", "/a b", "/a?x=1"])
def test_serve_refuses_a_root_path_that_is_no_url_path(
    tmp_path: Path, served: list[tuple[Any, dict[str, Any]]], given: str
) -> None:
    store = f"sqlite:{tmp_path / 'x.sqlite3'}"
    args = ["inbox", "serve", "--store", store, "--basic-auth", "u:p", "--root-path", given]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "--root-path" in result.output
    assert served == []
