"""Django adapter tests: a test project configured once per process, its databases, the
status-contract rows, and runners for gunicorn (WSGI) and uvicorn (ASGI).

The project (``project/``: ``sw_testproject`` settings and ``sw_testapp`` handlers)
runs in-process and under the real servers, sharing one SQLite file and, when
PostgreSQL answers on 127.0.0.1:5432, one uniquely named database dropped at exit.
Every row of the status contract (docs/status-codes.md) is a function below taking a
:class:`Target`; ``status_row`` is parametrized over all of them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
import sw_contract

HERE = Path(__file__).parent
PROJECT = HERE / "project"
BIN = Path(sys.executable).parent
ORG = "o-DJANGO-na1"
SECRET = "whsec-django-0123456789abcdef0123456789abcdef"

# -- the project, configured before any test module imports a model ----------------------

_TMP = Path(tempfile.mkdtemp(prefix="sw-django-"))
PG_NAME = f"sw_django_{uuid.uuid4().hex[:12]}"
PG_ERROR = ""


def _create_pg_database() -> bool:
    global PG_ERROR
    try:
        import psycopg

        with psycopg.connect(
            "host=127.0.0.1 port=5432 user=postgres dbname=test", connect_timeout=3, autocommit=True
        ) as connection:
            connection.execute(f'CREATE DATABASE "{PG_NAME}"')
    except Exception as error:
        PG_ERROR = f"{type(error).__name__}: {error}"
        return False
    return True


def _drop_pg_database() -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect(
        "host=127.0.0.1 port=5432 user=postgres dbname=test", connect_timeout=3, autocommit=True
    ) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{PG_NAME}" WITH (FORCE)')


ENV = {
    "DJANGO_SETTINGS_MODULE": "sw_testproject.settings",
    "SW_DJANGO_SQLITE": str(_TMP / "db.sqlite3"),
    "SW_DJANGO_DOWN": str(_TMP / "missing" / "db.sqlite3"),
    "SW_DJANGO_DEFAULT": "sqlite",
}
if _create_pg_database():
    ENV["SW_DJANGO_PG"] = PG_NAME
    atexit.register(_drop_pg_database)
atexit.register(shutil.rmtree, _TMP, True)
os.environ.update(ENV)
sys.path.insert(0, str(PROJECT))

import django  # noqa: E402
from django.core.management import call_command  # noqa: E402

django.setup()
for _alias in ("default", "pg") if "SW_DJANGO_PG" in ENV else ("default",):
    call_command("migrate", database=_alias, verbosity=0)

from django.db import connections  # noqa: E402

from service_webhooks.adapters.django import models  # noqa: E402

connections.close_all()
for _name in ENV:  # configured now; subprocesses (other tests' workers) must not inherit it
    os.environ.pop(_name, None)


# The status-contract rows and server helpers (tests/helpers/sw_contract.py), bound here
# so tests reach them through the ``kit`` fixture and pytest finds pytest_generate_tests.
contract = sw_contract
Answer, Target, Server = contract.Answer, contract.Target, contract.Server
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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Drop this run's PostgreSQL database (atexit does it too, should this not run)."""
    if "SW_DJANGO_PG" in ENV:
        _drop_pg_database()


# -- fixtures --------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _contract_settings() -> None:
    """Each test module of this suite runs with this suite's app settings."""
    contract.configure(org=ORG, secret=SECRET, path="/webhooks/", broken_path="/broken/")


@pytest.fixture(scope="session")
def kit() -> ModuleType:
    """This module, so tests reach the helpers above (test folders are not packages)."""
    return sys.modules[__name__]


@pytest.fixture(params=["sqlite", "postgresql"])
def alias(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database alias of the test project (SQLite, then PostgreSQL), its inbox table
    emptied before and after; a module may define its own ``alias``."""
    name = "default" if request.param == "sqlite" else request.getfixturevalue("pg")
    models.ReceivedDeliveryRecord.objects.using(name).all().delete()
    yield name
    models.ReceivedDeliveryRecord.objects.using(name).all().delete()
    connections.close_all()


@pytest.fixture
def pg(unavailable: Callable[[str, str], None]) -> str:
    """The PostgreSQL database alias, or skip/fail (``unavailable``) without the server."""
    if "SW_DJANGO_PG" not in ENV:
        unavailable("PostgreSQL on 127.0.0.1:5432", PG_ERROR)
    return "pg"


def claim_in(alias: str) -> Callable[[str], None]:
    """Holds a live claim on a key in ``alias`` (as another worker would)."""
    from service_webhooks.adapters.django.store import DjangoStore

    def claim(key: str) -> None:
        DjangoStore(using=alias).claim(key, f"other-{uuid.uuid4().hex}", 120.0)

    return claim


def run_server(kind: str, tmp: Path, *, default: str = "sqlite", threads: int = 4) -> Server:
    """The test project under gunicorn (``wsgi``) or uvicorn (``asgi``)."""
    port = free_port()
    if kind == "wsgi":
        argv = gunicorn_argv("sw_testproject.wsgi:application", port, threads=threads)
    else:
        argv = [
            str(BIN / "uvicorn"), "sw_testproject.asgi:application", "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "warning", "--no-access-log",
        ]  # fmt: skip
    env = {**ENV, "SW_DJANGO_DEFAULT": default, "PYTHONPATH": str(PROJECT)}
    return start_server(argv, cwd=PROJECT, env=env, log=tmp / f"{kind}.log", port=port)


@pytest.fixture(scope="module", params=["wsgi", "asgi"], ids=["gunicorn", "uvicorn"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The project on a real server: gunicorn (1 worker, 4 threads) or uvicorn."""
    running = run_server(request.param, tmp_path_factory.mktemp(request.param))
    yield running
    stop_server(running)
