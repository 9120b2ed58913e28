"""The layer rule, read statically from every import (docs/architecture.md, "Layers").

* The core (``service_webhooks/*.py``, ``_``-prefixed or not, and ``service_webhooks/stores/``)
  imports no adapter, CLI, dashboard, test kit, delivery emulator or API client, and no web
  framework, template engine or HTTP client, at module level or inside a function. Only the
  optional integration modules ``handoff`` (Celery) and ``observability`` (OpenTelemetry)
  import those extras.
* An adapter (``adapters/**``, installed as ``service_webhooks.adapters``) takes from
  ``service_webhooks`` public modules and names only: no module path segment and no
  imported name starting with ``_``. Its own relative imports are its business.

Imports are parsed with :mod:`ast`, so a module that cannot be imported here (a missing
extra) is still checked, and nothing is executed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "service_webhooks"
ADAPTERS = ROOT / "adapters"

ABOVE_THE_CORE = (
    "service_webhooks.adapters",
    "service_webhooks.cli",
    "service_webhooks.dashboard",
    "service_webhooks.testing",
    "service_webhooks.delivery",
    "service_webhooks.api",
)
WEB = ("starlette", "fastapi", "flask", "werkzeug", "django", "httpx", "jinja2")
OPTIONAL = ("celery", "opentelemetry")  # only for the two integration modules
INTEGRATIONS = ("service_webhooks/handoff.py", "service_webhooks/observability.py")


def _module_name(path: Path) -> str:
    """The dotted name a file installs as (``adapters/`` is ``service_webhooks.adapters``)."""
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[0] == "adapters":
        parts.insert(0, "service_webhooks")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[tuple[int, str, str | None]]:
    """Every import in ``path`` as ``(line, absolute module, imported name or None)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    nodes = sorted(ast.walk(tree), key=lambda node: getattr(node, "lineno", 0))
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                yield node.lineno, target, alias.name


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def _core_files() -> list[Path]:
    return sorted(
        [
            *(path for path in PACKAGE.glob("*.py") if path.name != "__main__.py"),  # cli's
            *(PACKAGE / "stores").glob("*.py"),
            *(PACKAGE / "inbox").glob("*.py"),
        ]
    )


def _adapter_files() -> list[Path]:
    return sorted(ADAPTERS.rglob("*.py"))


def _core_violations(path: Path) -> list[str]:
    integration = path.relative_to(ROOT).as_posix() in INTEGRATIONS
    banned = ABOVE_THE_CORE + WEB + (() if integration else OPTIONAL)
    found = []
    for line, module, name in _imports(path):
        # ``from service_webhooks import cli`` names a sub-package as well.
        targets = [module] if name is None else [module, f"{module}.{name}"]
        for target in targets:
            if _within(target, banned):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
                break
    return found


def _adapter_violations(path: Path) -> list[str]:
    found = []
    for line, module, name in _imports(path):
        if not _within(module, ("service_webhooks",)):
            continue  # a third-party or standard-library module
        if _within(module, ("service_webhooks.adapters",)):
            continue  # the adapter's own modules, private ones included
        if any(part.startswith("_") for part in module.split(".")):
            found.append(f"{path.relative_to(ROOT)}:{line} imports private module {module}")
        elif name is not None and name.startswith("_"):
            found.append(f"{path.relative_to(ROOT)}:{line} imports private name {module}.{name}")
    return found


def test_the_walk_sees_every_layer() -> None:
    core = {path.relative_to(ROOT).as_posix() for path in _core_files()}
    assert {"service_webhooks/_receiver.py", "service_webhooks/stores/_base.py"} <= core
    assert "service_webhooks/cli/__init__.py" not in core
    adapters = {path.relative_to(ROOT).as_posix() for path in _adapter_files()}
    assert {"adapters/asgi.py", "adapters/flask.py", "adapters/django/views.py"} <= adapters


def test_the_import_reader_resolves_relative_and_nested_imports() -> None:
    # The two rule checks below are only as good as this reader: prove it on known input.
    views = ADAPTERS / "django" / "views.py"
    seen = {(module, name) for _, module, name in _imports(views)}
    assert ("service_webhooks.adapters.django.conf", "get_config") in seen
    conf = {(module, name) for _, module, name in _imports(ADAPTERS / "django" / "conf.py")}
    assert ("service_webhooks.adapters.django.store", "TransactionalReceiver") in conf  # in a def


def test_the_rules_catch_what_they_forbid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    core = tmp_path / "service_webhooks" / "_core.py"
    core.parent.mkdir()
    core.write_text(
        "from . import cli\n"
        "def f():\n    import flask.json\n"
        "from .stores import MemoryStore\n"
        "import celery\n"
    )
    assert [v.split(" imports ")[1] for v in _core_violations(core)] == [
        "service_webhooks.cli",
        "flask.json",
        "celery",
    ]
    adapter = tmp_path / "adapters" / "web.py"
    adapter.parent.mkdir()
    adapter.write_text(
        "from service_webhooks._receiver import WebhookReceiver\n"
        "from service_webhooks import _EXPORTS, WebhookReceiver\n"
        "from service_webhooks.stores import MemoryStore\n"
        "from ._stream import read_capped\n"
        "from .. import _outcome\n"
    )
    assert [v.split(" imports ")[1] for v in _adapter_violations(adapter)] == [
        "private module service_webhooks._receiver",
        "private name service_webhooks._EXPORTS",
        "private name service_webhooks._outcome",
    ]


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_core_imports_nothing_above_it(path: Path) -> None:
    assert _core_violations(path) == []


def test_adapters_use_public_names_only() -> None:
    found = [violation for path in _adapter_files() for violation in _adapter_violations(path)]
    assert found == []
