"""Fixtures of the dashboard tests: deliveries recorded through a real receiver, servers
started as subprocesses, and a headless Chromium driven by Selenium."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from service_webhooks import WebhookReceiver, sign

HERE = Path(__file__).parent
SECRET = "whsec-dashboard-0123456789abcdef"
ORG = "o-DASH-na1"
USER, PASSWORD = "admin", "s3cret-pw"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HOSTILE = '<script>alert(1)</script> and "><img src=x onerror=alert(1)>'


def envelope(note_id: str, text: str = "hello", name: str = "note.created") -> bytes:
    data = {"id": note_id, "author": "ana@example.com", "text": text}
    return json.dumps({"eventName": name, "version": 1, "data": data}).encode()


def deliver(receiver: WebhookReceiver, body: bytes, org: str = ORG) -> Any:
    return receiver.process(body, sign(body, SECRET, org))


def wait_for_port(process: subprocess.Popen[bytes], port: int, what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"{what} did not start") from None
            time.sleep(0.05)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def receiver_env(store: str, inbox: str, flag: Path) -> dict[str, str]:
    pythonpath = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return dict(
        os.environ,
        SW_SECRET=SECRET,
        SW_STORE=store,
        SW_INBOX=inbox,
        SW_FLAG=str(flag),
        SW_DASHBOARD_AUTH=f"{USER}:{PASSWORD}",
        PYTHONPATH=pythonpath,
    )


@pytest.fixture
def chrome(tmp_path: Path, unavailable: Callable[[str, str], Any]) -> Iterator[Callable[..., Any]]:
    """``chrome(width=1280, height=900)``: a fresh headless Chromium (Selenium driver)."""
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        unavailable("Chromium", f"{CHROMIUM} or {CHROMEDRIVER} is not installed")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        unavailable("Selenium", "the selenium package is not installed")
    drivers: list[Any] = []

    def start(width: int = 1280, height: int = 900) -> Any:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in (
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", f"--user-data-dir={tmp_path / f'chrome-{len(drivers)}'}",
            f"--window-size={width},{height}",
        ):  # fmt: skip
            options.add_argument(argument)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        drivers.append(driver)
        return driver

    yield start
    for driver in drivers:
        driver.quit()


def authorize_browser(driver: Any, user: str = USER, password: str = PASSWORD) -> None:
    """Send Basic credentials with every request of ``driver`` (Chrome DevTools)."""
    import base64

    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}}
    )


def phone(driver: Any, width: int = 390, height: int = 844) -> None:
    """Lay pages out as a phone of ``width`` CSS pixels would (Chrome DevTools)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 2, "mobile": True},
    )
