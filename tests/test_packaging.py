"""Packaging guard-rails: the adapters ship, the core stays framework-free."""

from __future__ import annotations

import importlib
import subprocess
import sys
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


@pytest.mark.e2e
def test_built_wheel_contains_every_adapter_module(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "service_webhooks/adapters/" + str(path.relative_to(ROOT / "adapters"))
        for path in (ROOT / "adapters").rglob("*.py")
    }
    assert expected
    assert expected <= names, sorted(expected - names)
    core = {str(path.relative_to(ROOT)) for path in (ROOT / "service_webhooks").rglob("*.py")}
    assert core <= names, sorted(core - names)
    assert "service_webhooks/py.typed" in names
    assert not any(name.startswith("adapters/") for name in names)
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
