"""``inbox serve`` behind a real reverse proxy that rewrites ``Host``, as nginx's
``proxy_pass http://127.0.0.1:8001`` does without ``proxy_set_header Host``.

The proxy (stdlib, below) listens on its own loopback port and forwards every request
to the dashboard with ``Host: 127.0.0.1:<dashboard port>``. A replay form posted with
the origin of the page the browser loaded (the proxy's) is refused until the dashboard
is started with ``--trusted-origin`` naming it.
"""

from __future__ import annotations

import http.client
import http.server
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service_webhooks import WebhookReceiver
from service_webhooks.inbox import ReceivedDelivery

from .conftest import (
    PASSWORD,
    SECRET,
    USER,
    authorize_browser,
    deliver,
    envelope,
    receiver_env,
    stop,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

CLI = str(Path(sys.executable).parent / "service-webhooks")
AUTH = (USER, PASSWORD)
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
     "upgrade", "host", "content-length"}
)  # fmt: skip


class HostRewritingProxy:
    """A reverse proxy on a free loopback port: every request goes to ``127.0.0.1:port``
    of the backend with ``Host`` set to that address; the other headers, the body and
    the answer pass as they are. ``seen`` keeps the headers of each request received."""

    def __init__(self, backend_port: int) -> None:
        self.backend = f"127.0.0.1:{backend_port}"
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.forward(self)

            do_POST = do_HEAD = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def forward(self, request: http.server.BaseHTTPRequestHandler) -> None:
        self.seen.append((request.command, request.path, dict(request.headers.items())))
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = self.backend  # what the browser asked for is lost here
        backend = http.client.HTTPConnection(self.backend, timeout=30)
        try:
            backend.request(request.command, request.path, body=body, headers=headers)
            answer = backend.getresponse()
            content = answer.read()
        finally:
            backend.close()
        request.send_response_only(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in HOP_BY_HOP:
                request.send_header(name, value)
        request.send_header("Content-Length", str(len(content)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(content)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class Deployment:
    """A failed delivery in a SQLite inbox, ``inbox serve`` over it (restarted with other
    options by :meth:`serve`) on ``port``, and the proxy in front of it."""

    def __init__(self, tmp_path: Path, port: int) -> None:
        self.tmp_path = tmp_path
        self.port = port
        self.store = f"sqlite:{tmp_path / 'hooks.sqlite3'}"
        self.flag = tmp_path / "fixed.flag"
        self.receiver = WebhookReceiver(SECRET, store=self.store, inbox=self.store)

        @self.receiver.on("note.created")
        def note_created(event: Any) -> None:
            raise RuntimeError("the handler is not fixed yet")

        deliver(self.receiver, envelope("n-proxied"))
        self.record: ReceivedDelivery = self.receiver.inbox.search().items[0]  # type: ignore[union-attr]
        self.process: subprocess.Popen[bytes] | None = None
        self.proxy = HostRewritingProxy(port)

    def serve(self, *options: str) -> None:
        """(Re)start ``inbox serve`` on the same port, as an operator would."""
        self.stop()
        command = [
            CLI, "inbox", "serve", "--store", self.store, "--receiver", "dash_receiver:receiver",
            "--port", str(self.port), "--basic-auth", f"{USER}:{PASSWORD}", *options,
        ]  # fmt: skip
        env = receiver_env(self.store, self.store, self.flag)
        self.process = subprocess.Popen(command, env=env, cwd=self.tmp_path)
        wait_for_port(self.process, self.port, "inbox serve")

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def replays(self) -> list[str]:
        record = self.receiver.inbox.get(self.record.id)  # type: ignore[union-attr]
        assert record is not None
        return [replay.reason for replay in record.replays]


@pytest.fixture
def deployment(tmp_path: Path, free_port: int) -> Iterator[Deployment]:
    deployed = Deployment(tmp_path, free_port)
    try:
        yield deployed
    finally:
        deployed.stop()
        deployed.proxy.close()


def post_replay(deployment: Deployment) -> httpx.Response:
    """What a browser does: load the detail page through the proxy, press Replay."""
    base = deployment.proxy.origin
    with httpx.Client(base_url=base, auth=AUTH, timeout=30) as client:
        page = client.get(f"/d/{deployment.record.id}")
        assert page.status_code == 200
        match = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page.text)
        assert match, "no Replay form on the page"
        return client.post(
            f"/d/{deployment.record.id}/replay",
            data={"csrf_token": match[1]},
            headers={"Origin": base, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate"},
        )


def test_a_replay_through_a_host_rewriting_proxy_needs_the_trusted_origin(
    deployment: Deployment,
) -> None:
    deployment.flag.touch()  # the handler is fixed: a replay that runs succeeds
    public = deployment.proxy.origin
    deployment.serve()
    refused = post_replay(deployment)
    assert refused.status_code == 403
    assert f"--trusted-origin {public}" in refused.text  # the operator is told the fix
    assert deployment.replays() == []
    _, _, headers = deployment.proxy.seen[-1]
    assert headers["Origin"] == public  # the proxy passed the browser's headers on

    deployment.serve("--trusted-origin", public)
    accepted = post_replay(deployment)
    assert accepted.status_code == 303
    assert accepted.headers["location"] == f"/d/{deployment.record.id}#replays"
    assert deployment.replays() == ["processed"]


def test_a_browser_replays_through_the_proxy(
    deployment: Deployment, chrome: Callable[..., Any]
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    public = deployment.proxy.origin
    deployment.serve("--trusted-origin", public)
    driver = chrome()
    authorize_browser(driver)
    driver.get(f"{public}/d/{deployment.record.id}")
    assert "500 handler_failed" in driver.find_element(By.ID, "current-outcome").text
    deployment.flag.touch()
    driver.find_element(By.ID, "replay").click()
    WebDriverWait(driver, 10).until(lambda current: current.current_url.endswith("#replays"))
    assert driver.current_url == f"{public}/d/{deployment.record.id}#replays"
    assert "200 processed" in driver.find_element(By.ID, "current-outcome").text
    assert deployment.replays() == ["processed"]
    [(_, _, headers)] = [seen for seen in deployment.proxy.seen if seen[0] == "POST"]
    # the browser's own judgement passes the proxy: the form is same-origin. Chromium
    # sends Origin: null (the pages are Referrer-Policy: no-referrer); other browsers
    # and clients send the page's origin, which --trusted-origin accepts
    assert headers["Sec-Fetch-Site"] == "same-origin"
    assert headers["Origin"] in ("null", public)
