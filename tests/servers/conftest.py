"""Real servers for the ASGI adapter and ``service-webhooks listen``: uvicorn started on
a free 127.0.0.1 port with an app from ``asgi_apps.py``, and the console script.

The raw-socket helpers and the signing helpers are tests/helpers/sw_contract.py's,
configured with this suite's secret for each of its test modules.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sw_contract

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
ORG = "o-SERVERS-na1"
SECRET = "whsec-servers-0123456789abcdef0123456789abcdef"


contract = sw_contract
Server = Any


@pytest.fixture(scope="module", autouse=True)
def _contract_settings() -> None:
    """Each test module of this suite runs with this suite's settings."""
    contract.configure(org=ORG, secret=SECRET)


@pytest.fixture(scope="session")
def kit() -> ModuleType:
    """tests/helpers/sw_contract.py, set for this suite (its helpers and signing)."""
    return contract


@pytest.fixture(scope="session")
def serve() -> Callable[..., Server]:
    """``serve(app, tmp, *uvicorn_options)``: see :func:`uvicorn`."""
    return uvicorn


def uvicorn(app: str, tmp: Path, *options: str) -> Server:
    """``asgi_apps:<app>`` under uvicorn; handler runs are appended to ``tmp/calls``."""
    port = contract.free_port()
    argv = [
        str(BIN / "uvicorn"), f"asgi_apps:{app}", "--app-dir", str(HERE), "--host", "127.0.0.1",
        "--port", str(port), "--log-level", "warning", "--no-access-log", *options,
    ]  # fmt: skip
    env = {"SW_SECRET": SECRET, "SW_CALLS": str(tmp / "calls")}
    return contract.start_server(argv, cwd=HERE, env=env, log=tmp / "uvicorn.log", port=port)


@pytest.fixture(scope="module")
def listen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """``service-webhooks listen --port 0`` as a subprocess; yields its port."""
    tmp = tmp_path_factory.mktemp("listen")
    err = tmp / "stderr"
    with err.open("wb") as stderr:
        process = subprocess.Popen(
            [str(BIN / "service-webhooks"), "listen", "--port", "0", "--secret", SECRET],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=os.environ.copy(),
        )
    deadline = time.monotonic() + 20
    while not (match := re.search(r"listening on http://[^:]+:(\d+)", err.read_text())):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"listen did not start:\n{err.read_text()}")
        time.sleep(0.05)
    yield int(match.group(1))
    process.send_signal(signal.SIGINT)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
