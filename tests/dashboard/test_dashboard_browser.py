"""The dashboard in a real browser (headless Chromium via Selenium).

Two deployments: ``service-webhooks inbox serve`` on SQLite (a subprocess), and the
dashboard mounted in a FastAPI app under uvicorn on PostgreSQL. In each, a person logs
in, filters to failed deliveries, opens one whose payload is hostile HTML (it shows as
text and no dialog opens), fixes the handler, replays, and sees the new outcome.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service_webhooks import WebhookReceiver

from .conftest import (
    HOSTILE,
    PASSWORD,
    SECRET,
    USER,
    authorize_browser,
    deliver,
    envelope,
    phone,
    receiver_env,
    stop,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

CLI = str(Path(sys.executable).parent / "service-webhooks")


def _sqlite_server(
    request: pytest.FixtureRequest, port: int, flag: Path
) -> tuple[str, WebhookReceiver]:
    """``inbox serve`` over a SQLite file; deliveries come from a receiver in this process."""
    path = request.getfixturevalue("tmp_path") / "hooks.sqlite3"
    store = f"sqlite:{path}"
    env = receiver_env(store, store, flag)
    receiver = WebhookReceiver(SECRET, store=store, inbox=store)

    @receiver.on("note.created")
    def note_created(event: Any) -> None:
        raise RuntimeError("the handler is not fixed yet")

    for n in range(3):  # failures from another organization, filtered out below
        deliver(receiver, envelope(f"n-other-{n}"), org="o-OTHER")
    deliver(receiver, envelope("n-hostile", HOSTILE))
    command = [
        CLI, "inbox", "serve", "--store", store,
        "--receiver", "dash_receiver:receiver", "--host", "127.0.0.1", "--port", str(port),
        "--basic-auth", f"{USER}:{PASSWORD}",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, cwd=request.getfixturevalue("tmp_path"))
    request.addfinalizer(lambda: stop(process))
    wait_for_port(process, port, "inbox serve")
    return f"http://127.0.0.1:{port}", receiver


def _postgres_server(
    request: pytest.FixtureRequest, port: int, flag: Path
) -> tuple[str, WebhookReceiver]:
    """A FastAPI app (webhooks + the dashboard mounted) under uvicorn, inbox on PostgreSQL."""
    from service_webhooks.inbox import PostgresInbox

    url: str = request.getfixturevalue("postgres_url")
    table = f"service_webhooks_dash_{uuid.uuid4().hex[:12]}"
    inbox = PostgresInbox(url, table=table)
    inbox.create_schema()

    def clean() -> None:
        inbox.drop_schema()
        inbox.close()

    request.addfinalizer(clean)
    env = receiver_env("memory", f"{url}?inbox_table={table}", flag)
    command = [
        sys.executable, "-m", "uvicorn", "dash_receiver:app", "--host", "127.0.0.1",
        "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env)
    request.addfinalizer(lambda: stop(process))
    wait_for_port(process, port, "uvicorn")
    base = f"http://127.0.0.1:{port}"
    from service_webhooks import sign

    for n, (text, org) in enumerate(
        [("hello", "o-OTHER"), ("hello", "o-OTHER"), ("hello", "o-OTHER"), (HOSTILE, None)]
    ):
        body = envelope(f"n-{n}" if org else "n-hostile", text)
        answer = httpx.post(
            f"{base}/webhooks",
            content=body,
            headers={"Service-Signature": sign(body, SECRET, org or "o-DASH-na1")},
        )
        assert answer.status_code == 500
    return f"{base}/webhooks/admin", WebhookReceiver(SECRET, store="memory", inbox=inbox)


SERVERS: dict[str, Callable[..., tuple[str, WebhookReceiver]]] = {
    "inbox-serve-sqlite": _sqlite_server,
    "fastapi-postgres": _postgres_server,
}


@pytest.fixture(params=sorted(SERVERS))
def server(
    request: pytest.FixtureRequest, free_port: int, tmp_path: Path
) -> Iterator[tuple[str, Path, WebhookReceiver]]:
    flag = tmp_path / "fixed.flag"
    base, receiver = SERVERS[request.param](request, free_port, flag)
    return base, flag, receiver


def _navigated(driver: Any, arrived: Callable[[str], bool]) -> None:
    """Wait (up to 10 s) for the page a click led to: its URL passes ``arrived``."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(lambda current: arrived(current.current_url))


def test_log_in_filter_open_hostile_payload_replay_after_fix(
    server: tuple[str, Path, WebhookReceiver], chrome: Callable[..., Any]
) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base, flag, receiver = server
    assert httpx.get(base + "/").status_code == 401  # no credentials
    driver = chrome()
    authorize_browser(driver)
    driver.get(base + "/")
    assert driver.find_element(By.TAG_NAME, "h1").text == "Deliveries"
    # the stylesheet loaded (same origin, under the CSP): the header is laid out as flex
    header = driver.find_element(By.CSS_SELECTOR, "header.top")
    assert header.value_of_css_property("display") == "flex"

    # filter to failed deliveries from one organization, with the keyboard-reachable form
    Select(driver.find_element(By.ID, "f-outcome")).select_by_value("5xx")
    driver.find_element(By.ID, "f-org").send_keys("o-DASH-na1")
    driver.find_element(By.ID, "f-apply").click()
    _navigated(driver, lambda url: "outcome=5xx" in url)  # a click may return before the load
    assert "outcome=5xx" in driver.current_url
    rows = driver.find_elements(By.CSS_SELECTOR, "table.deliveries tbody tr")
    assert len(rows) == 1
    assert "500 handler_failed" in rows[0].text

    # open it: the payload is text, no script ran, no dialog
    rows[0].find_element(By.CSS_SELECTOR, "a[data-id]").click()
    _navigated(driver, lambda url: "/d/" in url)
    payload = driver.find_element(By.ID, "payload").text
    assert "<script>alert(1)</script>" in payload
    assert '"><img src=x onerror=alert(1)>' in payload
    with pytest.raises(NoAlertPresentException):
        _ = driver.switch_to.alert.text
    assert driver.find_elements(By.CSS_SELECTOR, "main img") == []
    assert "RuntimeError" in driver.find_element(By.ID, "traceback").text
    assert "500 handler_failed" in driver.find_element(By.ID, "current-outcome").text

    # fix the handler, replay, see the new outcome
    flag.touch()
    driver.find_element(By.ID, "replay").click()
    _navigated(driver, lambda url: url.endswith("#replays"))
    assert driver.current_url.endswith("#replays")
    assert "200 processed" in driver.find_element(By.ID, "current-outcome").text
    replays = driver.find_elements(By.CSS_SELECTOR, "tr.replay-row")
    assert len(replays) == 1
    assert "200 processed" in replays[0].text
    with pytest.raises(NoAlertPresentException):
        _ = driver.switch_to.alert.text
    record_id = driver.current_url.rsplit("/d/", 1)[1].split("#")[0]
    stored = receiver.inbox.get(record_id)  # type: ignore[union-attr]
    assert stored is not None
    assert [r.reason for r in stored.replays] == ["processed"]

    # the list shows the replayed outcome beside the original answer
    driver.get(base + "/?outcome=5xx&org=o-DASH-na1")
    row = driver.find_element(By.CSS_SELECTOR, "table.deliveries tbody tr")
    assert "→ 200 processed" in row.text


def test_a_replay_post_without_a_good_token_is_refused(
    server: tuple[str, Path, WebhookReceiver],
) -> None:
    base, flag, receiver = server
    flag.touch()
    inbox: Any = receiver.inbox
    record = inbox.search().items[0]
    auth = (USER, PASSWORD)
    for form in ({}, {"csrf_token": "0" * 64}):
        answer = httpx.post(f"{base}/d/{record.id}/replay", data=form, auth=auth)
        assert answer.status_code == 403
    assert httpx.post(f"{base}/d/{record.id}/replay", data={}).status_code == 401
    assert inbox.get(record.id).replays == ()


def test_readable_on_a_phone(
    server: tuple[str, Path, WebhookReceiver], chrome: Callable[..., Any]
) -> None:
    from selenium.webdriver.common.by import By

    base, _, _ = server
    driver = chrome()
    phone(driver)
    authorize_browser(driver)
    driver.get(base + "/")
    assert driver.execute_script("return window.innerWidth") == 390
    width = driver.execute_script("return document.documentElement.scrollWidth")
    assert width <= 390  # nothing wider than the screen: no sideways scrolling
    hidden = driver.find_element(By.CSS_SELECTOR, "th.wide")
    assert not hidden.is_displayed()
    driver.get(base + "/overview")
    assert driver.execute_script("return document.documentElement.scrollWidth") <= 390


def test_keyboard_alone_reaches_a_delivery_with_a_visible_focus(
    server: tuple[str, Path, WebhookReceiver], chrome: Callable[..., Any]
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    base, _, _ = server
    driver = chrome()
    authorize_browser(driver)
    driver.get(base + "/")
    keys = ActionChains(driver)
    keys.send_keys(Keys.TAB).perform()
    focused = driver.switch_to.active_element
    assert focused.text == "Skip to content"
    assert focused.value_of_css_property("outline-style") == "solid"
    for _ in range(40):  # Tab on until the first delivery link has the focus
        keys.send_keys(Keys.TAB).perform()
        focused = driver.switch_to.active_element
        if focused.get_attribute("data-id"):
            break
    else:
        raise AssertionError("no delivery link is reachable with Tab")
    assert focused.value_of_css_property("outline-style") == "solid"
    keys.send_keys(Keys.ENTER).perform()
    assert driver.find_element(By.ID, "payload").text
