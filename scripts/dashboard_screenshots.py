"""Screenshots of the inbox dashboard for docs/dashboard.md (headless Chromium).

Fills a throwaway SQLite inbox with a day of made-up deliveries (a few failures with
real tracebacks), serves the dashboard on 127.0.0.1 with uvicorn in a thread, and saves
``docs/img/dashboard-{list,detail,overview,phone}.png``. Needs the ``test`` extra
(selenium) and ``/usr/bin/chromium`` with ``/usr/bin/chromedriver``.

    .venv/bin/python scripts/dashboard_screenshots.py [OUTPUT_DIR]
"""

from __future__ import annotations

import base64
import datetime
import json
import random
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from service_webhooks import WebhookReceiver, sign
from service_webhooks.dashboard import dashboard
from service_webhooks.inbox import ReceivedDelivery, SQLiteInbox

SECRET = "whsec-screenshots-0123456789abcdef"  # noqa: S105 - a made-up one
USER, PASSWORD = "ops", "screenshots"
EVENTS = ["note.created", "note.updated", "note.deleted", "privacy.erasure_requested"]
ORGS = ["o-ACME-na1", "o-GLOBEX-eu1", "o-INITECH-na1"]


def fill(inbox: SQLiteInbox, receiver: WebhookReceiver) -> None:
    rng = random.Random(7)
    now = datetime.datetime.now(datetime.UTC)
    for n in range(400):
        moment = now - datetime.timedelta(seconds=rng.uniform(0, 24 * 3600) ** 1.0)
        event = rng.choice(EVENTS)
        roll = rng.random()
        status, reason = (200, "processed")
        if roll < 0.06:
            status, reason = (500, "handler_failed")
        elif roll < 0.09:
            status, reason = (200, "duplicate")
        elif roll < 0.11:
            status, reason = (422, "unprocessable")
        body = json.dumps(
            {"eventName": event, "version": 1, "data": {"id": f"n-{n}", "text": "hello"}}
        ).encode()
        inbox.record(
            ReceivedDelivery(
                id=f"{rng.getrandbits(128):032x}",
                received_at=moment,
                organization_id=rng.choice(ORGS),
                event_name=event,
                version=1,
                idempotency_key=f"{rng.getrandbits(256):064x}",
                body=body,
                content_type="application/json",
                user_agent="Service-Webhooks/2.4",
                status=status,
                reason=reason,
                handler_time=rng.lognormvariate(-4, 1) if reason != "duplicate" else None,
                error_type="TimeoutError" if reason == "handler_failed" else None,
            )
        )
    body = json.dumps(
        {
            "eventName": "note.created",
            "version": 1,
            "data": {
                "id": "n-4711",
                "author": "ana@example.com",
                "text": "Quarterly numbers <script>alert(1)</script>"
                ' "><img src=x onerror=alert(1)>',
                "tags": ["finance", "q3"],
            },
        }
    ).encode()
    receiver.process(body, sign(body, SECRET, "o-ACME-na1"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def browser(width: int, height: int, mobile: bool = False) -> Any:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", f"--user-data-dir={tempfile.mkdtemp(prefix='chrome-')}",
        "--hide-scrollbars", "--force-color-profile=srgb",
    ):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
    )
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}}
    )
    return driver


def main(output: Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="dashboard-shots-"))
    inbox = SQLiteInbox(workdir / "inbox.sqlite3")
    receiver = WebhookReceiver(SECRET, store="memory", inbox=inbox)

    @receiver.on("note.created")
    def note_created(event: Any) -> None:
        raise TimeoutError("the search index did not answer within 5 s")

    fill(inbox, receiver)
    failed = inbox.search(limit=1).items[0]
    app = dashboard(receiver=receiver, basic_auth=(USER, PASSWORD), title="Acme webhooks")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    try:
        driver = browser(1280, 900)
        driver.get(base + "/")
        driver.save_screenshot(str(output / "dashboard-list.png"))
        driver.get(f"{base}/d/{failed.id}")
        driver.find_element(By.ID, "payload")
        driver.save_screenshot(str(output / "dashboard-detail.png"))
        driver.get(base + "/overview")
        driver.save_screenshot(str(output / "dashboard-overview.png"))
        driver.quit()
        phone = browser(390, 844, mobile=True)
        phone.get(base + "/?outcome=5xx")
        phone.save_screenshot(str(output / "dashboard-phone.png"))
        phone.quit()
    finally:
        server.should_exit = True
        thread.join(10)
        inbox.close()
    for name in ("list", "detail", "overview", "phone"):
        print(output / f"dashboard-{name}.png")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / "docs" / "img")
