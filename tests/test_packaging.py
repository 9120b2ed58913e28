"""Packaging guard-rails: the adapters ship, the core stays framework-free."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import service_webhooks

ROOT = Path(__file__).parents[1]


def test_all_is_sorted_and_every_name_exists() -> None:
    names = service_webhooks.__all__

    def isort_style(name: str) -> tuple[int, str]:  # ruff RUF022: CONSTANTS, Classes, rest
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert names == sorted(names, key=isort_style)
    assert len(set(names)) == len(names)
    for name in names:
        assert hasattr(service_webhooks, name), name


def test_every_lazy_export_is_public_and_resolves() -> None:
    exports = set(service_webhooks._EXPORTS)
    assert exports | {"__version__"} == set(service_webhooks.__all__)
    for name in exports:
        module = importlib.import_module(service_webhooks._EXPORTS[name], "service_webhooks")
        assert getattr(service_webhooks, name) is getattr(module, name)
    with pytest.raises(AttributeError):
        service_webhooks.NoSuchName  # noqa: B018


def test_importing_the_package_imports_no_submodule_until_used() -> None:
    code = (
        "import sys, service_webhooks.testing.pytest_plugin;"
        "print(sorted(m for m in sys.modules if m.startswith('service_webhooks')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == (
        "['service_webhooks', 'service_webhooks.testing', 'service_webhooks.testing.pytest_plugin']"
    )


def test_the_version_is_read_from_the_metadata_on_first_use_only() -> None:
    """``importlib.metadata`` took most of ``import service_webhooks`` (tens of ms):
    it is imported when ``__version__`` is first read, not before."""
    code = (
        "import sys\n"
        "for name in [m for m in sys.modules if m.startswith('importlib.metadata')]:\n"
        "    del sys.modules[name]\n"
        "import service_webhooks\n"
        "print('importlib.metadata' in sys.modules)\n"
        "print(service_webhooks.__version__)\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    from importlib.metadata import version

    assert result.stdout.split() == ["False", version("service-webhooks"), "True"]


def test_importing_the_core_loads_no_web_framework() -> None:
    code = (
        "import sys, service_webhooks, service_webhooks._receiver;"
        "bad = [m for m in ('starlette', 'flask', 'werkzeug', 'django', 'fastapi', 'uvicorn',"
        " 'httpx', 'click', 'rich') if m in sys.modules];"
        "print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_adapters_import_as_service_webhooks_adapters_only() -> None:
    code = (
        "import importlib.util, service_webhooks.adapters.asgi;"
        "print(importlib.util.find_spec('adapters') is None)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
    )
    assert result.stdout.strip() == "True"


# Not sources: what a build must neither read (setuptools puts whatever an old build/lib
# holds, modules deleted since included, into the wheel) nor write into (the work tree).
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", ".tox", "build", "dist", "site", "*.egg-info", "__pycache__", ".*_cache",
    "*.sqlite3", "*.sqlite3-*", ".coverage",
)  # fmt: skip


def build_wheel(outdir: Path) -> Path:
    """The wheel built from a clean copy of the repository, in ``outdir``."""
    source = outdir / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(outdir), str(source)],
        check=True,
        capture_output=True,
    )
    [wheel] = outdir.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built once for this module's tests."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.mark.e2e
def test_built_wheel_contains_every_adapter_module(wheel: Path, tmp_path: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "service_webhooks/adapters/" + str(path.relative_to(ROOT / "adapters"))
        for path in (ROOT / "adapters").rglob("*.py")
    }
    assert expected
    assert expected <= names, sorted(expected - names)
    core = {str(path.relative_to(ROOT)) for path in (ROOT / "service_webhooks").rglob("*.py")}
    assert core <= names, sorted(core - names)
    stray = {name for name in names if name.endswith(".py")} - expected - core
    assert stray == set()
    dashboard = ROOT / "service_webhooks" / "dashboard"
    data = {str(path.relative_to(ROOT)) for path in dashboard.rglob("*.*") if path.suffix != ".py"}
    data = {name for name in data if "__pycache__" not in name}
    assert data
    assert data <= names, sorted(data - names)
    assert "service_webhooks/py.typed" in names
    assert not any(name.startswith(("adapters/", "tests/", "docs/")) for name in names)
    # and the unpacked wheel imports its adapters (ahead of the editable install on sys.path)
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(wheel).extractall(unpacked)
    code = (
        "import service_webhooks, service_webhooks.adapters.asgi, service_webhooks.adapters.flask;"
        "import service_webhooks.adapters.django.apps;"
        "print(service_webhooks.adapters.asgi.__file__)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=unpacked
    )
    assert result.stdout.strip() == str(unpacked / "service_webhooks" / "adapters" / "asgi.py")


def wheel_venv(wheel: Path, where: Path) -> Path:
    """A venv in ``where`` with ``wheel`` installed (unpacked) as a user gets it, not editable:
    this interpreter's other packages are reachable through a ``.pth`` line, but not its
    editable install of this project (the ``.pth`` files there are not run). Returns its
    ``bin`` directory, with a ``gunicorn`` script."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    here = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "dependencies.pth").write_text(here + "\n", encoding="utf-8")
    zipfile.ZipFile(wheel).extractall(purelib)
    script = where / "bin" / "gunicorn"
    script.write_text(
        f"#!{python}\nimport sys\nfrom gunicorn.app.wsgiapp import run\nsys.exit(run())\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return where / "bin"


def fenced_after(page: Path, heading: str) -> str:
    """The first fenced block of ``page`` after the line ``heading``."""
    text = page.read_text(encoding="utf-8")
    after = text[text.index(f"\n{heading}\n") :]
    return after.split("```", 2)[1].split("\n", 1)[1]


@pytest.mark.e2e
def test_the_documented_flask_gunicorn_command_runs_with_the_wheel_installed(
    wheel: Path, tmp_path: Path
) -> None:
    """docs/flask.md's production command, typed in the repository as the page says, with
    the wheel installed: gunicorn loads its ``-c python:service_webhooks.adapters.gunicorn``
    and the app (``--check-config``). Run from the root, the root's ``service_webhooks/``
    folder (no ``adapters``) would shadow the installed package."""
    bin_dir = wheel_venv(wheel, tmp_path / "venv")
    command = fenced_after(ROOT / "docs" / "flask.md", "## Production: gunicorn")
    assert "gunicorn -c python:service_webhooks.adapters.gunicorn" in command
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GUNICORN_CMD_ARGS": "--check-config",  # load the configuration and the app, then exit
        "SERVICE_WEBHOOKS_STORE": "memory",  # the example's store: no file in the repository
    }
    result = subprocess.run(
        ["bash", "-e", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def import_without(blocked: tuple[str, ...], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where importing any of ``blocked`` fails, as
    it does when an extra is not installed (``sys.modules[name] = None``). It runs in
    ``/``: from a source tree, its ``service_webhooks/`` would shadow the installed one."""
    block = "".join(f"sys.modules[{name!r}] = None\n" for name in blocked)
    return subprocess.run(
        [sys.executable, "-c", f"import sys\n{block}{code}"],
        capture_output=True,
        text=True,
        cwd="/",
    )


# (what a user imports, the modules an extra brings that are missing, that extra)
MISSING_EXTRAS = [
    ("import service_webhooks.cli", ("click",), "cli"),
    ("import service_webhooks.cli", ("httpx",), "cli"),  # flask and celery bring click
    ("import service_webhooks.cli", ("rich",), "cli"),
    ("import service_webhooks.cli", ("uvicorn",), "cli"),
    ("import service_webhooks.adapters.django", ("django",), "django"),
    ("import service_webhooks.adapters.django.urls", ("django",), "django"),
    ("from service_webhooks.adapters.django import receiver", ("django",), "django"),
    ("import service_webhooks.api", ("httpx",), "http"),
    ("import service_webhooks.delivery", ("httpx",), "http"),
    ("import service_webhooks.dashboard", ("jinja2",), "dashboard"),
    ("import service_webhooks.dashboard", ("starlette",), "dashboard"),
    ("import service_webhooks.observability", ("opentelemetry",), "otel"),
    ("import service_webhooks.handoff", ("celery",), "celery"),
    ("from service_webhooks.stores import RedisStore", ("redis",), "redis"),
    ("from service_webhooks.stores import PostgresStore", ("psycopg",), "postgres"),
    ("from service_webhooks.inbox import PostgresInbox", ("psycopg",), "postgres"),
    (
        "from service_webhooks.stores import store_from_url; store_from_url('postgresql://h/db')",
        ("psycopg",),
        "postgres",
    ),
    ("import service_webhooks.adapters.flask", ("flask",), "flask"),
    ("import service_webhooks.adapters.flask", ("werkzeug",), "flask"),
    ("import service_webhooks.adapters.flask_cli", ("flask",), "flask"),
    (
        "from service_webhooks import WebhookReceiver\n"
        "from service_webhooks.adapters.asgi import webhook_routes\n"
        "webhook_routes(WebhookReceiver(secrets='whsec-x', store='memory'))",
        ("starlette",),
        "asgi",
    ),
    ("import service_webhooks.testing.fake_api", ("httpx",), "http,asgi"),
    ("import service_webhooks.testing.fake_api", ("starlette",), "http,asgi"),
    (
        "from service_webhooks.testing.fake_api import FakeAPI\nFakeAPI().serve().__enter__()",
        ("uvicorn",),
        "cli",
    ),
]


@pytest.mark.parametrize(("code", "blocked", "extra"), MISSING_EXTRAS)
def test_a_missing_extra_is_named_in_the_import_error(
    code: str, blocked: tuple[str, ...], extra: str
) -> None:
    result = import_without(blocked, code)
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("ImportError: "), result.stderr
    # one wording everywhere: what needs the extra, the missing module, the command
    extras = " and ".join(f"'{name}'" for name in extra.split(","))
    assert f" needs the {extras} extra" in last_line
    assert last_line.endswith(f" ({blocked[0]} missing): pip install 'service-webhooks[{extra}]'")


DEVELOPMENT_EXTRAS = {"test", "bench", "fuzz", "lint", "docs"}


def test_the_install_section_of_the_docs_names_every_user_extra() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    page = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    install = page.split("```console", 1)[1].split("```", 1)[0]
    missing = [name for name in extras if name not in DEVELOPMENT_EXTRAS]
    missing = [name for name in missing if f"[{name}]" not in install]
    assert missing == []


def test_the_build_requirement_reads_the_license_fields() -> None:
    """``license = "MIT"`` and ``license-files`` (PEP 639) are read by setuptools 77 and
    later; an older one, in a build without isolation, fails on ``project.license``."""
    import re
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert isinstance(pyproject["project"]["license"], str)
    [setuptools] = [r for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")]
    floor = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", setuptools)
    assert floor, setuptools
    assert int(floor[1]) >= 77


def test_require_extra_names_the_missing_modules_and_the_extra() -> None:
    from service_webhooks.adapters import require_extra

    require_extra("asgi", "json")  # installed: nothing happens
    with pytest.raises(ImportError) as raised:
        require_extra("flask", "json", "no_such_module_here")
    assert str(raised.value) == (
        "service_webhooks.adapters.flask needs the 'flask' extra (no_such_module_here missing):"
        " pip install 'service-webhooks[flask]'"
    )


def test_the_core_and_the_adapters_word_a_missing_extra_alike() -> None:
    """The adapters may not import the core's private helper: the same text, pinned."""
    from service_webhooks._extras import missing_extra, require_extra
    from service_webhooks.adapters import require_extra as adapters_require_extra

    require_extra("asgi", "json", what="x")  # installed: nothing happens
    with pytest.raises(ImportError) as adapter:
        adapters_require_extra("flask", "json", "no_such_module_here")
    with pytest.raises(ImportError) as core:
        require_extra(
            "flask", "json", "no_such_module_here", what="service_webhooks.adapters.flask"
        )
    assert str(core.value) == str(adapter.value)
    assert str(missing_extra("http,asgi", "no_such_a", "no_such_b", what="X")) == (
        "X needs the 'http' and 'asgi' extras (no_such_a, no_such_b missing):"
        " pip install 'service-webhooks[http,asgi]'"
    )
    broken = ImportError("libpq not found")  # installed, but its import fails
    assert str(missing_extra("postgres", "json", what="Y", cause=broken)) == (
        "Y needs the 'postgres' extra (libpq not found): pip install 'service-webhooks[postgres]'"
    )


def test_the_dashboard_names_each_missing_module_of_its_extra() -> None:
    """Without the extra at all (a core-only install), both modules, not only the first."""
    result = import_without(("jinja2", "starlette"), "import service_webhooks.dashboard")
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: service_webhooks.dashboard needs the 'dashboard' extra"
        " (jinja2, starlette missing): pip install 'service-webhooks[dashboard]'"
    )


CLI_MISSING = (
    "Error: the service-webhooks command needs the 'cli' extra (click missing):"
    " pip install 'service-webhooks[cli]'\n"
)


def _console_script() -> str:
    """``from MODULE import FUNCTION; FUNCTION()``: what the installed script runs."""
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["service-webhooks"].partition(":")
    return f"from {module} import {function}\n{function}()"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(_console_script(), id="script"),
        pytest.param("import runpy\nrunpy.run_module('service_webhooks', run_name='__main__')",
                     id="python-m"),
    ],
)  # fmt: skip
def test_the_command_without_the_cli_extra_names_it_in_one_line(code: str) -> None:
    """The script is installed whatever the extras: without ``cli``, one line on stderr
    naming it (exit 1), not a traceback from the command's imports."""
    result = import_without(("click",), code)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", CLI_MISSING)


def test_the_console_script_runs_the_command_with_the_extra() -> None:
    code = "import sys\nsys.argv = ['service-webhooks', '--version']\n" + _console_script()
    result = import_without((), code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("service-webhooks, version ")


def test_an_inbox_command_without_the_postgres_extra_names_it_in_one_line() -> None:
    """``inbox list --store postgresql://…``: the extra named, as ``listen`` names it."""
    code = (
        "from service_webhooks.cli import main\n"
        "main(['inbox', 'list', '--store', 'postgresql://u:pw@127.0.0.1:1/db'])"
    )
    result = import_without(("psycopg",), code)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "Error: cannot open the inbox at postgresql://u:***@127.0.0.1:1/db: ImportError: a"
        " PostgreSQL store or inbox needs the 'postgres' extra (psycopg missing):"
        " pip install 'service-webhooks[postgres]'\n"
    )
