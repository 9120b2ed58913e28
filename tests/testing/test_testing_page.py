"""The testing page's tests, run as a user's test files (``pytester``): they pass, also
twice in one session; they fail when no handler ran; the Flask one leaves no file in the
working directory; and the page says what pytest does with an async test and no plugin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"

FLASK_APP = """
from flask import Flask

from service_webhooks.adapters.flask import ServiceWebhooks

webhooks = ServiceWebhooks()


@webhooks.on("note.created")
def note_created(event):
    pass


def create_app(config):
    app = Flask(__name__)
    app.config.update(config)
    webhooks.init_app(app)
    return app
"""


def section_code(title: str) -> str:
    """The page's ``python`` blocks under ``## title``, joined as one test file."""
    section = PAGE.read_text(encoding="utf-8").split(f"\n## {title}\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    return "\n\n".join(re.findall(r"```python\n(.*?)```", section, re.S))


def count_tests(code: str) -> int:
    return len(re.findall(r"^(?:async )?def test_", code, re.M))


@pytest.fixture(autouse=True)
def _ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_the_starlette_tests_pass_also_when_run_twice(pytester: pytest.Pytester) -> None:
    """Twice: the app's receiver keeps its store for the session, as the page says."""
    code = section_code("Starlette / FastAPI")
    assert count_tests(code) >= 4
    pytester.makepyfile(test_page=code)
    result = pytester.runpytest(
        "test_page.py", "test_page.py", "--keep-duplicates", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=2 * count_tests(code))


def test_the_starlette_tests_fail_when_no_handler_runs(pytester: pytest.Pytester) -> None:
    """An unhandled event is answered 200 too: the page's tests check the reason."""
    code = section_code("Starlette / FastAPI")
    moved = code.replace('@receiver.on("note.created")', '@receiver.on("segment.trend.alert")')
    assert moved != code
    pytester.makepyfile(test_page=moved)
    _, _, failures = pytester.inline_run("-p", "no:cacheprovider").listoutcomes()
    failed = {report.nodeid.split("::")[-1] for report in failures}
    assert {"test_note_created", "test_a_retry_is_a_duplicate", "test_note_created_async"} <= failed


def test_the_flask_test_leaves_no_store_in_the_working_directory(
    pytester: pytest.Pytester,
) -> None:
    """Before, the page's app had the extension's default store, a SQLite file in the
    working directory: shared by every test, every run and every xdist worker."""
    pytester.makepyfile(myapp=FLASK_APP, test_page=section_code("Flask"))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert sorted(path.name for path in pytester.path.iterdir() if "sqlite" in path.name) == []


def test_the_page_says_what_pytest_does_with_an_async_test_and_no_plugin(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_async="async def test_it():\n    pass\n")
    result = pytester.runpytest("-p", "no:asyncio", "-p", "no:anyio", "-p", "no:cacheprovider")
    assert "async def functions are not natively supported" in result.stdout.str()
    does = "fails" if result.parseoutcomes().get("failed") else "skips"
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    assert f'pytest {does} the test with "async def functions are not natively supported"' in text


def test_the_async_test_passes_with_anyio_also_with_trio_installed(
    pytester: pytest.Pytester,
) -> None:
    """AnyIO's plugin runs an ``anyio`` test on every backend installed; under trio the
    ASGI adapter raises: the page's ``anyio_backend`` fixture keeps the test on asyncio."""
    pytest.importorskip("trio")
    code = section_code("Starlette / FastAPI")
    marked = code.replace("@pytest.mark.asyncio ", "@pytest.mark.anyio   ")
    assert marked != code
    pytester.makepyfile(test_page=marked)
    result = pytester.runpytest("-p", "no:asyncio", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=count_tests(code))
