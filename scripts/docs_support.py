"""Build support for the documentation site (mkdocs.yml loads this file twice).

1. As an mkdocs hook (``hooks:`` in mkdocs.yml), :func:`on_startup` lays out the package
   for griffe, mkdocstrings' loader. ``adapters/`` installs as
   ``service_webhooks.adapters`` through a ``package-dir`` mapping, which griffe does
   not follow (it finds ``service_webhooks/`` and no ``adapters`` inside it). So the
   hook builds ``build/docs-src/service_webhooks/``: one symlink per entry of
   ``service_webhooks/`` plus ``adapters -> ../../../adapters``, the same tree as the
   wheel's, and the python handler reads it (``paths: [build/docs-src]``). Nothing is
   copied or installed; it works from a clean clone.
2. As a griffe extension (``extensions:`` of the python handler), :class:`SphinxRoles`
   rewrites the reST roles the docstrings use (``:class:`~pkg.Name```) into
   cross-references that link when the target is documented on the site and render as
   plain code otherwise, so ``mkdocs build --strict`` stays free of warnings.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS_SRC = ROOT / "build" / "docs-src"


def build_source_tree(root: Path = ROOT, target: Path = DOCS_SRC) -> Path:
    """Lay out ``target/service_webhooks`` as the wheel does, with symlinks."""
    package = target / "service_webhooks"
    if target.exists():
        shutil.rmtree(target)
    package.mkdir(parents=True)
    for entry in sorted((root / "service_webhooks").iterdir()):
        if entry.name in {"__pycache__", "adapters"}:
            continue
        (package / entry.name).symlink_to(os.path.relpath(entry, package))
    (package / "adapters").symlink_to(os.path.relpath(root / "adapters", package))
    return target


def on_startup(command: str, dirty: bool) -> None:
    """mkdocs hook: lay out the tree before mkdocstrings globs its ``paths``."""
    build_source_tree()


_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")


def _role_replacer(module: str, package: str) -> Any:
    """A ``re.sub`` callback resolving names as Python would inside ``module``."""

    def replace(match: re.Match[str]) -> str:
        short, target = match.group(1), match.group(2).strip()
        if target.startswith("."):  # relative to the docstring's package
            dots = len(target) - len(target.lstrip("."))
            base = package.rsplit(".", dots - 1)[0] if dots > 1 else package
            target = f"{base}.{target.lstrip('.')}" if base else target.lstrip(".")
        elif module and not target.startswith("service_webhooks") and target[:1].isupper():
            target = f"{module}.{target}"  # a name defined next to the docstring
        shown = target.rsplit(".", 1)[-1] if short else target
        if not target.startswith("service_webhooks"):
            return f"`{shown}`"
        return f'<autoref identifier="{target}" optional><code>{shown}</code></autoref>'

    return replace


_RULE = re.compile(r"^( *)=+(?: +=+)+ *$")


def _convert_tables(lines: list[str]) -> list[str]:
    """reST simple tables (``===  ===`` rules) to Markdown pipe tables."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        rule = _RULE.match(lines[i])
        if not rule:
            out.append(lines[i])
            i += 1
            continue
        spans = [m.span() for m in re.finditer(r"=+", lines[i])]
        rows: list[list[str]] = []
        i += 1
        while i < len(lines) and not (_RULE.match(lines[i]) and len(rows) > 1):
            if not _RULE.match(lines[i]) and lines[i].strip():
                line = lines[i].ljust(spans[-1][1])
                cells = [
                    line[a : (spans[n + 1][0] if n + 1 < len(spans) else None)]
                    for n, (a, _) in enumerate(spans)
                ]
                rows.append([c.strip().replace("|", "\\|") for c in cells])
            i += 1
        i += 1  # the closing rule
        indent = rule.group(1)
        out.append(indent + "| " + " | ".join(rows[0]) + " |")
        out.append(indent + "|" + "---|" * len(spans))
        out.extend(indent + "| " + " | ".join(r) + " |" for r in rows[1:])
    return out


def convert_roles(text: str, module: str = "", package: str = "") -> str:
    """reST to Markdown for what the docstrings use: roles (optional autorefs for
    library names, code for the rest), double backticks, ``::`` and simple tables."""
    text = "\n".join(_convert_tables(text.split("\n")))
    text = _ROLE.sub(_role_replacer(module, package), text)
    text = re.sub(r"(\S) ?::\n", r"\1:\n", text)  # "as follows::" -> "as follows:"
    text = re.sub(r"^::\n", "", text, flags=re.MULTILINE)
    return text.replace("``", "`")


try:
    import griffe
except ImportError:  # pragma: no cover - only mkdocstrings imports this as an extension
    pass
else:

    class SphinxRoles(griffe.Extension):
        """Rewrite reST roles and double backticks in every docstring."""

        def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
            if obj.docstring is None:
                return
            module = obj.module
            package = module.path if module.is_init_module else module.path.rpartition(".")[0]
            obj.docstring.value = convert_roles(obj.docstring.value, module.path, package)
