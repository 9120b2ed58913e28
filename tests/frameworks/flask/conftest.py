"""Helpers for the Flask adapter tests: the status-contract rows, a gunicorn runner and
a raw-socket client for oversized bodies.

Every row of the status contract (docs/status-codes.md) is one function below taking a
:class:`Target` (a way to send one request, and to hold a claim in the app's store);
``status_row`` is parametrized over all of them, so each driver (the framework's test
client, a real server) runs every row.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import sw_contract
import sw_flask_app

ORG = "o-FLASK-na1"
BIN = Path(sys.executable).parent


def load_app_module() -> ModuleType:
    """The test app's module (``tests/helpers/sw_flask_app.py``)."""
    return sw_flask_app


SECRET: str = sw_flask_app.SECRET
# gunicorn runs the test app from the helpers folder
APP_DIR = Path(sw_flask_app.__file__).parent
APP = "sw_flask_app:create_app()"

# The status-contract rows and server helpers (tests/helpers/sw_contract.py), bound here
# so tests reach them through the ``kit`` fixture and pytest finds pytest_generate_tests.
contract = sw_contract
Answer, Target, Server = contract.Answer, contract.Target, contract.Server
sqlite_claim = contract.sqlite_claim
envelope, signed, expect = contract.envelope, contract.signed, contract.expect
free_port, start_server, stop_server = (
    contract.free_port,
    contract.start_server,
    contract.stop_server,
)
gunicorn_argv, stream_oversized = contract.gunicorn_argv, contract.stream_oversized
pytest_generate_tests = contract.pytest_generate_tests
SIGNATURE_HEADER, MAX_BODY_SIZE = contract.SIGNATURE_HEADER, contract.MAX_BODY_SIZE
sign, default_idempotency_key = contract.sign, contract.default_idempotency_key


# -- fixtures --------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _contract_settings() -> None:
    """Each test module of this suite runs with this suite's app settings."""
    contract.configure(org=ORG, secret=SECRET)


@pytest.fixture(scope="session")
def kit() -> ModuleType:
    """This module, so tests reach the helpers above (test folders are not packages)."""
    return sys.modules[__name__]


@pytest.fixture
def app_paths(tmp_path: Path) -> tuple[str, str]:
    """(store file shared with the app, store path in a missing directory)."""
    return str(tmp_path / "store.sqlite3"), str(tmp_path / "missing" / "store.sqlite3")


@pytest.fixture(scope="module")
def gunicorn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """The test app under gunicorn (1 worker, 4 threads); yields (server, store path)."""
    tmp = tmp_path_factory.mktemp("flask-gunicorn")
    store = str(tmp / "store.sqlite3")
    env = {"SW_TEST_STORE": store, "SW_TEST_BROKEN_STORE": str(tmp / "missing" / "x.sqlite3")}
    port = free_port()
    argv = [*gunicorn_argv(APP, port), "--chdir", str(APP_DIR)]
    server = start_server(argv, cwd=APP_DIR, env=env, log=tmp / "gunicorn.log", port=port)
    yield server, store
    stop_server(server)
