"""The dashboard in a real browser (headless Chromium via Selenium).

Two deployments: ``service-webhooks inbox serve`` on SQLite (a subprocess), and the
dashboard mounted in a FastAPI app under uvicorn on PostgreSQL. In each, a person logs
in, filters to failed deliveries, opens one whose payload is hostile HTML (it shows as
text and no dialog opens), fixes the handler, replays, and sees the new outcome. Each
inbox also holds one delivery of an event with a 5,000-character name (answered 200
``unhandled``), the oldest.
"""

from __future__ import annotations

import re
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
LONG_EVENT = "note." + "x" * 5000  # no handler: recorded as 200 unhandled


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

    deliver(receiver, envelope("n-long", name=LONG_EVENT))
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

    long_body = envelope("n-long", name=LONG_EVENT)
    headers = {"Service-Signature": sign(long_body, SECRET, "o-OTHER")}
    assert httpx.post(f"{base}/webhooks", content=long_body, headers=headers).status_code == 200
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


def _contrast(first: str, second: str) -> float:
    """WCAG 2 contrast ratio of two computed colours (``rgb(...)``/``rgba(...)``)."""

    def luminance(colour: str) -> float:
        red, green, blue = (int(part) / 255 for part in re.findall(r"[\d.]+", colour)[:3])
        linear = [
            c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (red, green, blue)
        ]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(first), luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _in_both_schemes(driver: Any) -> Iterator[str]:
    """``"light"``, then ``"dark"``: the browser reports that colour scheme meanwhile."""
    for scheme in ("light", "dark"):
        driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
        )
        yield scheme


def _detail_urls(driver: Any, base: str) -> list[str]:
    from selenium.webdriver.common.by import By

    driver.get(base + "/")
    links = driver.find_elements(By.CSS_SELECTOR, "a[data-id]")
    return [base + "/d/" + str(link.get_attribute("data-id")) for link in links]


def _sideways(driver: Any) -> int:
    """How far the whole page scrolls sideways (CSS pixels)."""
    width: int = driver.execute_script(
        "return document.documentElement.scrollWidth - window.innerWidth"
    )
    return width


@pytest.mark.parametrize("width", [375, 640])  # a phone; 1280 pixels zoomed to 200 %
def test_no_page_scrolls_sideways_and_no_text_overlaps(
    server: tuple[str, Path, WebhookReceiver], chrome: Callable[..., Any], width: int
) -> None:
    """A 5,000-character event name made its delivery's page 46,000 pixels wide (the
    metadata did not wrap), and on a phone the list's cards drew the time over the
    32-digit delivery ID beside it."""
    from selenium.webdriver.common.by import By

    base, _, _ = server
    driver = chrome(width=max(width, 500))  # headless windows are 500 wide at least
    if width < 500:
        phone(driver, width)
    authorize_browser(driver)
    driver.get(base + "/")
    assert driver.execute_script("return window.innerWidth") == width
    for row in driver.find_elements(By.CSS_SELECTOR, "table.deliveries tbody tr"):
        cells = [cell for cell in row.find_elements(By.TAG_NAME, "td") if cell.is_displayed()]
        for cell in cells:  # its text within its box (a time does not wrap)
            inside = driver.execute_script(
                "return arguments[0].scrollWidth <= arguments[0].clientWidth", cell
            )
            assert inside, f"{cell.text!r} is wider than its cell in {row.text!r}"
        boxes = [cell.rect for cell in cells]
        for n, one in enumerate(boxes):
            for other in boxes[n + 1 :]:
                apart = (
                    one["x"] + one["width"] <= other["x"]
                    or other["x"] + other["width"] <= one["x"]
                    or one["y"] + one["height"] <= other["y"]
                    or other["y"] + other["height"] <= one["y"]
                )
                assert apart, f"cells overlap: {one} {other} in {row.text!r}"
    urls = _detail_urls(driver, base)
    assert len(urls) == 5
    for url in [base + "/", base + "/overview", base + "/?event=" + LONG_EVENT, *urls]:
        driver.get(url)
        assert driver.execute_script("return window.innerWidth") == width
        assert _sideways(driver) <= 0, url


def test_a_long_event_name_does_not_push_the_answers_out_of_sight(
    server: tuple[str, Path, WebhookReceiver], chrome: Callable[..., Any]
) -> None:
    """The list shows 120 characters of an event name: unbroken, they widened the table
    past the window, and every row's answer was to be scrolled to."""
    from selenium.webdriver.common.by import By

    base, _, _ = server
    driver = chrome()
    authorize_browser(driver)
    driver.get(base + "/")
    table = driver.find_element(By.CSS_SELECTOR, ".table-wrap")
    assert driver.execute_script(
        "return arguments[0].scrollWidth <= arguments[0].clientWidth", table
    )
    assert _sideways(driver) <= 0


def test_from_and_to_fields_are_wide_enough_for_their_value(
    server: tuple[str, Path, WebhookReceiver], chrome: Callable[..., Any]
) -> None:
    """A date and a time with seconds need about 240 pixels; in a filter column of 170
    (or 150 on a phone) the time was cut off after the minutes."""
    from selenium.webdriver.common.by import By

    base, _, _ = server
    for width in (1280, 375):
        driver = chrome(width=max(width, 500))
        if width < 500:
            phone(driver, width)
        authorize_browser(driver)
        driver.get(base + "/?since=2025-01-31T13:45:00&until=2025-12-31T23:59:59")
        for field in driver.find_elements(By.CSS_SELECTOR, "input[type=datetime-local]"):
            shown, needed = driver.execute_script(
                "const copy = arguments[0].cloneNode(); copy.style.width = 'auto';"
                "document.body.append(copy);"
                "const needed = copy.getBoundingClientRect().width; copy.remove();"
                "return [arguments[0].getBoundingClientRect().width, needed];",
                field,
            )
            assert shown >= needed, (width, field.get_attribute("name"), shown, needed)


def test_status_colours_and_the_focus_ring_have_enough_contrast(
    server: tuple[str, Path, WebhookReceiver], chrome: Callable[..., Any]
) -> None:
    """WCAG 2.1 AA, light and dark: an outcome badge's text 4.5:1 on its background
    (green was 4.4:1), and the focus indicator 3:1 on the page (the yellow ring alone
    was 1.5:1 on the light background)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    base, _, _ = server
    driver = chrome()
    authorize_browser(driver)
    for scheme in _in_both_schemes(driver):
        for path in ("/", "/overview"):
            driver.get(base + path)
            badges = driver.find_elements(By.CSS_SELECTOR, ".badge")
            assert {badge.get_attribute("class") for badge in badges} == {
                "badge badge-ok",
                "badge badge-bad",
            }
            for badge in badges:
                ratio = _contrast(
                    badge.value_of_css_property("color"),
                    badge.value_of_css_property("background-color"),
                )
                assert ratio >= 4.5, (scheme, badge.text, ratio)
        page = driver.find_element(By.TAG_NAME, "body").value_of_css_property("background-color")
        ActionChains(driver).send_keys(Keys.TAB).perform()  # the skip link
        ActionChains(driver).send_keys(Keys.TAB).perform()  # Deliveries, on the page's colour
        focused = driver.switch_to.active_element
        assert focused.text == "Deliveries"
        ring = [focused.value_of_css_property("outline-color")]
        ring += re.findall(r"rgba?\([^)]*\)", focused.value_of_css_property("box-shadow"))
        assert max(_contrast(colour, page) for colour in ring) >= 3, (scheme, ring, page)


def test_the_chart_tells_failures_by_more_than_colour_and_shows_its_numbers(
    server: tuple[str, Path, WebhookReceiver], chrome: Callable[..., Any]
) -> None:
    """The per-hour chart drew succeeded bars green and failed ones red (1.3:1 against
    each other), with the counts only in hover tooltips: failed bars are now hatched,
    in the legend too, and the counts are a table a keyboard opens and a screen reader
    reads."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    base, _, _ = server
    driver = chrome()
    authorize_browser(driver)
    for scheme in _in_both_schemes(driver):
        driver.get(base + "/overview")
        bars = [
            bar
            for bar in driver.find_elements(By.CSS_SELECTOR, ".chart svg .bar-bad")
            if float(bar.get_attribute("height") or 0) > 0
        ]
        assert bars, "the fixture's failures draw no failed bar"
        ok_bar = driver.find_element(By.CSS_SELECTOR, ".chart svg .bar-ok")
        ok_fill = ok_bar.value_of_css_property("fill")
        assert ok_fill.startswith("rgb")  # solid
        for bar in bars:  # a pattern, not a plain colour
            assert bar.value_of_css_property("fill").startswith("url("), (scheme, bar)
        stripes = [
            rect.value_of_css_property("fill")
            for rect in driver.find_elements(By.CSS_SELECTOR, "pattern#hatch-bad rect")
        ]
        assert len(stripes) == 2
        assert _contrast(*stripes) >= 3, (scheme, stripes)  # the hatching is visible
        # the legend draws the same two fills
        legend = driver.find_elements(By.CSS_SELECTOR, ".chart figcaption rect")
        assert [rect.value_of_css_property("fill") for rect in legend] == [
            ok_fill,
            bars[0].value_of_css_property("fill"),
        ]
    # the figure names both kinds of bar by more than colour, and points at the table
    name = driver.find_element(By.CSS_SELECTOR, ".chart svg").accessible_name
    assert "hatched" in name, name
    assert "table" in name, name

    # the numbers: a table behind a summary the keyboard reaches and opens
    table = driver.find_element(By.CSS_SELECTOR, "#chart-data table")
    assert not table.is_displayed()
    keys = ActionChains(driver)
    for _ in range(60):
        keys.send_keys(Keys.TAB).perform()
        if driver.switch_to.active_element.tag_name == "summary":
            break
    else:
        raise AssertionError("the chart's numbers are not reachable with Tab")
    keys.send_keys(Keys.ENTER).perform()
    assert table.is_displayed()
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 24
    titles = driver.find_elements(By.CSS_SELECTOR, ".chart svg g > title")
    for row, title in zip(rows, titles, strict=True):
        hour, ok, failed = (cell.text for cell in row.find_elements(By.CSS_SELECTOR, "th, td"))
        label = title.get_attribute("textContent")
        assert label == f"{hour} UTC: {ok} succeeded, {failed} failed"
    assert sum(int(row.text.split()[-1]) for row in rows) >= 4  # the fixture's failures
    assert table.accessible_name == "Deliveries per hour over the last 24 hours"


def test_a_replayed_answer_wraps_on_a_phone_and_leaves_the_event_room(
    server: tuple[str, Path, WebhookReceiver], chrome: Callable[..., Any]
) -> None:
    """A replayed delivery's answer is two badges; on a 375-pixel phone their card
    column took its full one-line width and squeezed the event name beside it to a
    few pixels, a letter per line."""
    from selenium.webdriver.common.by import By

    base, _, receiver = server
    inbox: Any = receiver.inbox
    record = inbox.search().items[0]  # the hostile note.created, failed
    receiver.replay(record.id)  # fails again (or unhandled): a second badge all the same
    driver = chrome(width=500)
    phone(driver, 375)
    authorize_browser(driver)
    driver.get(base + "/")
    assert driver.execute_script("return window.innerWidth") == 375
    row = driver.find_element(By.XPATH, "//tr[.//span[@class='replayed']]")
    width = row.rect["width"]
    event = row.find_element(By.CSS_SELECTOR, "td:nth-child(3)")
    answer = row.find_element(By.CSS_SELECTOR, "td:nth-child(5)")
    assert event.text.startswith("note.created")
    assert event.rect["width"] >= 0.4 * width, (event.rect, width)  # was about 50 px
    assert answer.rect["width"] <= 0.55 * width, (answer.rect, width)
    assert driver.execute_script(  # the badges within their cell: they wrapped
        "return arguments[0].scrollWidth <= arguments[0].clientWidth", answer
    )
    badges = answer.find_elements(By.CSS_SELECTOR, ".badge")
    assert len(badges) == 2
    assert badges[1].rect["y"] > badges[0].rect["y"]  # the replay's on a line of its own
    assert _sideways(driver) <= 0


def test_a_wrong_method_is_the_dashboards_page_with_allow(
    server: tuple[str, Path, WebhookReceiver],
) -> None:
    """Served on its own (``inbox serve``), a GET of a replay URL was Starlette's
    plain-text ``Method Not Allowed``, without the dashboard's page (mounted, it was
    the page already)."""
    base, _, receiver = server
    record = receiver.inbox.search().items[0]  # type: ignore[union-attr]
    answer = httpx.get(f"{base}/d/{record.id}/replay", auth=(USER, PASSWORD))
    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"
    assert answer.headers["content-type"].startswith("text/html")
    assert "<title>Method Not Allowed · Webhook inbox</title>" in answer.text
    assert "does not answer GET requests" in answer.text
    assert answer.headers["x-frame-options"] == "DENY"
    wrong = httpx.post(f"{base}/overview", auth=(USER, PASSWORD))
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "GET, HEAD"
    assert "does not answer POST requests" in wrong.text
