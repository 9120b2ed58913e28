"""Trusted origins: replay forms through a reverse proxy that rewrites ``Host``.

Browsers send the page's origin (``https://ops.example.com``) while the dashboard
receives the ``Host`` the proxy set (``127.0.0.1:8001``). ``trusted_origins`` /
``inbox serve --trusted-origin`` lists the public origins; nothing else is loosened:
foreign origins, ``Sec-Fetch-Site: cross-site`` and ``X-Forwarded-Host`` stay refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from service_webhooks import ConfigurationError, WebhookReceiver
from service_webhooks.cli import main
from service_webhooks.dashboard import Dashboard, dashboard
from service_webhooks.inbox import MemoryInbox, ReceivedDelivery

from .conftest import PASSWORD, SECRET, USER, deliver, envelope

AUTH = (USER, PASSWORD)
PUBLIC = "https://ops.example.com"
INTERNAL = "http://127.0.0.1:8001"  # where the proxy sends requests: Host 127.0.0.1:8001
ORIGINS_ENVVAR = "SERVICE_WEBHOOKS_DASHBOARD_TRUSTED_ORIGINS"
REFUSED = "came from another site"
HINT = "a reverse proxy changes the Host header"


class Counting:
    """A receiver over a memory inbox whose handler counts its runs (fails the first)."""

    def __init__(self) -> None:
        self.calls = 0
        self.receiver = WebhookReceiver(SECRET, store="memory", inbox=MemoryInbox())

        @self.receiver.on("note.created")
        def handler(event: Any) -> None:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("fails once")

    def failed(self) -> ReceivedDelivery:
        deliver(self.receiver, envelope("n-1"))
        record = self.receiver.inbox.search().items[0]  # type: ignore[union-attr]
        assert record.reason == "handler_failed"
        return record


@pytest.fixture
def counting() -> Counting:
    return Counting()


def client_for(counting: Counting, **kwargs: Any) -> TestClient:
    app = dashboard(receiver=counting.receiver, basic_auth=AUTH, **kwargs)
    return TestClient(app, base_url=INTERNAL)


@pytest.fixture
def proxied(counting: Counting) -> Iterator[TestClient]:
    """The dashboard as the proxy reaches it, with ``PUBLIC`` trusted."""
    with client_for(counting, trusted_origins=[PUBLIC]) as client:
        yield client


def replay(client: TestClient, record: ReceivedDelivery, headers: dict[str, str]) -> Any:
    page = client.get(f"/d/{record.id}", auth=AUTH).text
    match = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page)
    assert match
    return client.post(
        f"/d/{record.id}/replay",
        data={"csrf_token": match[1]},
        headers=headers,
        auth=AUTH,
        follow_redirects=False,
    )


# -- what is accepted ------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},  # an HTTP client: the token alone decides
        {"Origin": "null", "Sec-Fetch-Site": "same-origin"},  # Chromium (no-referrer pages)
        {"Origin": INTERNAL, "Sec-Fetch-Site": "same-origin"},  # reached without the proxy
        {"Origin": PUBLIC, "Sec-Fetch-Site": "same-origin"},  # through the proxy
        {"Origin": PUBLIC},  # a browser that sends no Sec-Fetch-Site
    ],
    ids=["no-origin", "null-origin", "host-origin", "trusted-origin", "trusted-no-fetch-site"],
)
def test_a_form_from_the_dashboards_own_origins_replays(
    proxied: TestClient, counting: Counting, headers: dict[str, str]
) -> None:
    record = counting.failed()
    response = replay(proxied, record, headers)
    assert response.status_code == 303, response.text
    assert response.headers["location"] == f"/d/{record.id}#replays"
    assert counting.calls == 2


def test_without_trusted_origins_the_proxied_origin_is_refused(counting: Counting) -> None:
    # the reported case: the browser's Origin is the public one, Host the proxy's
    record = counting.failed()
    response = replay(
        client_for(counting), record, {"Origin": PUBLIC, "Sec-Fetch-Site": "same-origin"}
    )
    assert response.status_code == 403
    assert counting.calls == 1
    assert counting.receiver.inbox.get(record.id).replays == ()  # type: ignore[union-attr]


# -- what stays refused ----------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "https://evil.example"},
        {"Origin": "https://ops.example.com.evil.example"},
        {"Origin": "http://ops.example.com"},  # another scheme
        {"Origin": "https://ops.example.com:8443"},  # another port
        {"Origin": "https://ops.example.com:443"},  # not serialized: compared exactly
        {"Origin": "https://OPS.example.com"},
        {"Origin": "https://ops.example.com/"},
        {"Origin": PUBLIC, "Sec-Fetch-Site": "cross-site"},  # a trusted origin is no pass
        {"Origin": PUBLIC, "Sec-Fetch-Site": "same-site"},
        {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "https://evil.example", "X-Forwarded-Host": "evil.example"},
        {"Origin": "http://[x"},  # urlsplit raised ValueError: a 500
        {"Origin": "127.0.0.1:8001"},  # no scheme
        {"Origin": "ftp://127.0.0.1:8001"},
        {"Origin": "http://127.0.0.1:8001/d"},  # the Host's, with a path: no origin
    ],
    ids=[
        "foreign-cross-site",
        "foreign",
        "suffix",
        "scheme",
        "port",
        "default-port",
        "case",
        "slash",
        "trusted-cross-site",
        "trusted-same-site",
        "null-cross-site",
        "cross-site",
        "forwarded-host",
        "bad-ipv6",
        "no-scheme",
        "other-scheme",
        "host-with-path",
    ],
)
def test_other_forms_are_refused_and_replay_nothing(
    proxied: TestClient, counting: Counting, headers: dict[str, str]
) -> None:
    record = counting.failed()
    response = replay(proxied, record, headers)
    assert response.status_code == 403
    assert REFUSED in response.text
    assert counting.calls == 1
    assert counting.receiver.inbox.get(record.id).replays == ()  # type: ignore[union-attr]


def test_x_forwarded_host_is_not_trusted(counting: Counting) -> None:
    record = counting.failed()
    headers = {"Origin": PUBLIC, "X-Forwarded-Host": "ops.example.com"}
    for forwarded in ("ops.example.com", PUBLIC):
        headers["X-Forwarded-Host"] = forwarded
        assert replay(client_for(counting), record, headers).status_code == 403
    assert counting.calls == 1


def test_a_trusted_origin_still_needs_the_token(proxied: TestClient, counting: Counting) -> None:
    record = counting.failed()
    response = proxied.post(
        f"/d/{record.id}/replay",
        data={"csrf_token": "0" * 64},
        headers={"Origin": PUBLIC, "Sec-Fetch-Site": "same-origin"},
        auth=AUTH,
    )
    assert response.status_code == 403
    assert "security token is missing or wrong" in response.text
    assert counting.calls == 1


# -- the refusal tells the operator what to do -----------------------------------------


def test_a_same_origin_form_with_another_host_names_the_option(counting: Counting) -> None:
    record = counting.failed()
    headers = {"Origin": PUBLIC, "Sec-Fetch-Site": "same-origin"}
    response = replay(client_for(counting), record, headers)
    assert response.status_code == 403
    assert HINT in response.text
    assert f"--trusted-origin {PUBLIC}" in response.text
    assert "received the request for host &#39;127.0.0.1:8001&#39;" in response.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": PUBLIC},  # no Sec-Fetch-Site: any client could have sent it
        {"Origin": PUBLIC, "Sec-Fetch-Site": "cross-site"},
        {"Origin": "https://OPS.example.com", "Sec-Fetch-Site": "same-origin"},  # no browser's
        {"Origin": "https://x.example/path", "Sec-Fetch-Site": "same-origin"},
    ],
    ids=["no-fetch-site", "cross-site", "not-serialized", "not-an-origin"],
)
def test_no_hint_unless_the_browser_vouches_for_the_origin(
    counting: Counting, headers: dict[str, str]
) -> None:
    # a cross-site attacker's victim must not read "add https://evil.example"
    response = replay(client_for(counting), counting.failed(), headers)
    assert response.status_code == 403
    assert REFUSED in response.text
    assert HINT not in response.text
    assert "--trusted-origin" not in response.text


# -- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "normalized"),
    [
        (["https://ops.example.com"], ("https://ops.example.com",)),
        (["HTTPS://Ops.Example.COM:443/"], ("https://ops.example.com",)),
        (["http://127.0.0.1:80", "http://127.0.0.1:8080"], ("http://127.0.0.1", "http://127.0.0.1:8080")),
        (["http://[::1]:8001", " http://[::1]:8001 "], ("http://[::1]:8001",)),
        (("https://a.example", "https://b.example:8443"), ("https://a.example", "https://b.example:8443")),
        (iter(["https://xn--bcher-kva.example"]), ("https://xn--bcher-kva.example",)),
        ([], ()),
    ],
)  # fmt: skip
def test_trusted_origins_are_normalized_as_browsers_send_them(
    given: Any, normalized: tuple[str, ...]
) -> None:
    app = dashboard(MemoryInbox(), basic_auth=AUTH, trusted_origins=given)
    assert app.trusted_origins == normalized


def test_a_normalized_origin_matches_what_the_browser_sends(counting: Counting) -> None:
    record = counting.failed()
    with client_for(counting, trusted_origins=["HTTPS://OPS.EXAMPLE.COM:443/"]) as client:
        response = replay(client, record, {"Origin": PUBLIC, "Sec-Fetch-Site": "same-origin"})
    assert response.status_code == 303


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ops.example.com", "no scheme: give https://ops.example.com or http://"),
        ("https://ops.example.com/admin", "no path, query or fragment"),
        ("https://ops.example.com?a=1", "no path, query or fragment"),
        ("https://ops.example.com?", "no path, query or fragment"),
        ("https://ops.example.com#top", "no path, query or fragment"),
        ("https://*.example.com", "wildcards are not supported"),
        ("https://user:pw@ops.example.com", "no user or password"),
        ("ftp://ops.example.com", "not an origin: give scheme://host"),
        ("https://", "not an origin: give scheme://host"),
        ("https://:8443", "no host"),
        ("https://ops.example.com:99999", "not an origin"),
        ("https://ops.example.com:port", "not an origin"),
        ("https://ops.example.com:0", "port 0"),
        ("http://[::1", "not an origin"),
        ("http://[fe80::zz]:8001", "IPv6"),
        ("https://ops example.com", "not a host name or address"),
        ("https://ops..example.com", "not a host name or address"),
        ("null", "'null' is not an address"),
        ("", "no scheme"),
        ("https://bücher.example", "ASCII \\(punycode\\).*xn--bcher-kva.example for bücher"),
    ],
)
def test_a_value_that_is_no_origin_is_a_configuration_error(value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        dashboard(MemoryInbox(), basic_auth=AUTH, trusted_origins=[value])
    assert repr(value) in str(raised.value)  # names the value at fault


def test_one_string_or_a_non_string_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"a list of origins.*not one string"):
        dashboard(MemoryInbox(), basic_auth=AUTH, trusted_origins=PUBLIC)
    with pytest.raises(ConfigurationError, match="a string such as"):
        dashboard(MemoryInbox(), basic_auth=AUTH, trusted_origins=[8001])  # type: ignore[list-item]


# -- inbox serve --trusted-origin ------------------------------------------------------


def test_serve_takes_repeated_trusted_origins(
    tmp_path: Path, served: list[tuple[Any, dict[str, Any]]]
) -> None:
    store = f"sqlite:{tmp_path / 'x.sqlite3'}"
    args = ["inbox", "serve", "--store", store, "--basic-auth", "u:p"]
    origins = ["--trusted-origin", "https://OPS.example.com/", "--trusted-origin", "http://[::1]:9"]
    result = CliRunner().invoke(main, [*args, *origins])
    assert result.exit_code == 0, result.output
    app = served[-1][0]
    assert isinstance(app, Dashboard)
    assert app.trusted_origins == ("https://ops.example.com", "http://[::1]:9")
    assert "accepted from https://ops.example.com, http://[::1]:9" in result.output
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert served[-1][0].trusted_origins == ()
    assert "accepted from" not in result.output


def test_serve_reads_trusted_origins_from_the_environment(
    tmp_path: Path, served: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ORIGINS_ENVVAR, "https://a.example  https://b.example:8443")
    store = f"sqlite:{tmp_path / 'x.sqlite3'}"
    result = CliRunner().invoke(main, ["inbox", "serve", "--store", store, "--basic-auth", "u:p"])
    assert result.exit_code == 0, result.output
    assert served[-1][0].trusted_origins == ("https://a.example", "https://b.example:8443")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ops.example.com", "no scheme: give https://ops.example.com"),
        ("https://ops.example.com/webhooks/admin", "no path"),
        ("https://*.example.com", "wildcards"),
        ("null", "not an address"),
    ],
)
def test_serve_refuses_a_trusted_origin_that_is_no_origin(
    tmp_path: Path, served: list[tuple[Any, dict[str, Any]]], value: str, message: str
) -> None:
    path = tmp_path / "x.sqlite3"
    args = ["inbox", "serve", "--store", f"sqlite:{path}", "--basic-auth", "u:p"]
    result = CliRunner().invoke(main, [*args, "--trusted-origin", value])
    assert result.exit_code == 2
    assert "Invalid value for --trusted-origin" in result.output
    assert message in result.output
    assert served == []
    assert not path.exists()  # refused before opening anything
