"""Every fenced ``python`` code block of ``docs/*.md`` and ``README.md`` runs.

One test per block, with the id ``file:line`` (the line of the opening fence). Blocks
of one file run in order in one shared namespace, as a reader types them: a block may
use names an earlier block of the same file defined. A failing block fails its own
test; the later blocks of that file still run (their namespace may then be short).

A block that cannot run on its own (a settings fragment, a call to a server this
machine does not have) is marked on the line before its fence with
``<!-- not-run: reason -->``; the reason is required and checked.

What the blocks may rely on:

* top-level ``await`` (``async with``, ``async for``): such a block runs in a fresh
  event loop;
* a temporary working directory (``sqlite:`` stores and files land there);
* the environment variables the pages tell readers to set: ``SERVICE_WEBHOOKS_SECRET``,
  ``SERVICE_API_KEY`` and ``SERVICE_API_BASE_URL``, the last one pointing at the fake
  API (``service_webhooks.testing.fake_api``) served on 127.0.0.1 when a file uses it.

Nothing else: no network beyond 127.0.0.1, no Redis or PostgreSQL.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run\b:?(?P<reason>.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    not_run: str | None  # the reason, when marked; "" when marked without one

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of ``path`` whose info string is ``python``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].lower()
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        if info in {"python", "py"}:
            marker = NOT_RUN.match(lines[start - 1]) if start else None
            reason = marker["reason"].strip() if marker else None
            yield Block(path, start + 1, "\n".join(body) + "\n", reason)


ALL = [block for path in FILES for block in blocks(path)]
RUN = [block for block in ALL if block.not_run is None]


def run(code: str, namespace: dict[str, Any], filename: str) -> None:
    """Execute ``code`` in ``namespace``; top-level ``await`` runs in a new loop."""
    compiled = compile(code, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        result = eval(compiled, namespace)  # noqa: S307 - the docs' own code
        asyncio.run(result)
    else:
        exec(compiled, namespace)  # noqa: S102 - the docs' own code


@pytest.fixture(scope="module")
def namespaces() -> dict[Path, dict[str, Any]]:
    """One namespace per file, shared by its blocks in order."""
    return {}


@pytest.fixture(scope="module")
def fake_api_url() -> Iterator[str]:
    """The fake API on 127.0.0.1, for pages that call the API client."""
    from service_webhooks.testing.fake_api import FakeAPI

    with FakeAPI(api_key="test-key").serve() as base_url:
        yield base_url


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("docs")


@pytest.mark.parametrize("block", RUN, ids=[block.id for block in RUN])
def test_block_runs(
    block: Block,
    namespaces: dict[Path, dict[str, Any]],
    workdir: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cwd = workdir / block.path.stem  # one directory per file, shared by its blocks
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("SERVICE_WEBHOOKS_SECRET", "whsec-docs-example-0123456789abcdef")
    monkeypatch.setenv("SERVICE_API_KEY", "test-key")
    if "SERVICE_API_BASE_URL" in block.path.read_text(encoding="utf-8"):
        monkeypatch.setenv("SERVICE_API_BASE_URL", request.getfixturevalue("fake_api_url"))
    namespace = namespaces.setdefault(block.path, {"__name__": f"docs_{block.path.stem}"})
    run(block.code, namespace, block.id)


def test_blocks_found() -> None:
    """The collector sees the blocks (guards against a broken fence pattern)."""
    assert len(RUN) >= 20


@pytest.mark.parametrize(
    "block",
    [block for block in ALL if block.not_run is not None],
    ids=[block.id for block in ALL if block.not_run is not None],
)
def test_not_run_marker_has_a_reason(block: Block) -> None:
    assert block.not_run, f"{block.id}: write the reason: <!-- not-run: why -->"
