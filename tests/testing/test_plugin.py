"""The pytest plugin as a user sees it: installed by the entry point, fixtures usable
in a project's own tests (run in-process by ``pytester``)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
import pytest
from flask import Flask
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from service_webhooks import WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp
from service_webhooks.adapters.flask import webhook_blueprint

SECRET = "whsec-my-app-test-secret"
received = []
receiver = WebhookReceiver(secrets=SECRET, store="memory")
receiver.on("note.created", lambda event: received.append(event.data.id))


@pytest.fixture
def webhook_secret():
    return SECRET  # the app's test secret


def test_starlette(deliver_webhook):
    client = TestClient(Starlette(routes=[Route("/webhooks", WebhookApp(receiver))]))
    response = deliver_webhook(client, "/webhooks", "note.created",
                               {"id": "n-1", "author": "a@b.c", "text": "hi"})
    assert response.status_code == 200
    assert response.json()["reason"] == "processed"


def test_flask(deliver_webhook):
    app = Flask(__name__)
    app.register_blueprint(webhook_blueprint(receiver))
    response = deliver_webhook(app.test_client(), "/webhooks", "note.created",
                               {"id": "n-2", "author": "a@b.c", "text": "hi"})
    assert response.status_code == 200
    assert received == ["n-1", "n-2"]


def test_signer_and_receiver(webhook_signer, webhook_receiver):
    assert repr(webhook_signer) == "Signer(secret=<redacted>, organization_id='o-TEST-na1')"
    body, headers = webhook_signer.delivery("note.created", {"id": "x", "author": "a", "text": "t"})
    assert webhook_receiver.process(body, headers["Service-Signature"]).status == 200
"""


@pytest.fixture(autouse=True)
def _ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_fixtures_in_a_users_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=3)


def test_fixtures_are_listed_with_their_docs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_empty="def test_nothing(): pass\n")
    result = pytester.runpytest("--fixtures", "-p", "no:cacheprovider")
    listed = result.stdout.str()
    for name in (
        "webhook_secret",
        "webhook_organization_id",
        "webhook_signer",
        "deliver_webhook",
        "adeliver_webhook",
        "webhook_receiver",
    ):
        assert name in listed
    assert "from service_webhooks" in listed


PERSISTENT_STORE_TESTS = """
import os

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from service_webhooks import WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp

receiver = WebhookReceiver(secrets="whsec-rerun", store="sqlite:" + os.environ["SW_RERUN_DB"])
receiver.on("note.created", lambda event: None)
app = Starlette(routes=[Route("/webhooks", WebhookApp(receiver))])


def test_note_created(deliver_webhook, webhook_secret):
    response = deliver_webhook(TestClient(app), "/webhooks", "note.created",
                               {"id": "n-1", "author": "a@b.c", "text": "hi"})
    assert response.json()["reason"] == "processed"
"""


def test_a_second_run_against_a_persistent_store_is_processed_again(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``deliver_webhook`` sends a fresh body per call, so a rerun is not a duplicate."""
    store = pytester.path / "store.sqlite3"
    monkeypatch.setenv("SW_RERUN_DB", str(store))
    pytester.makeconftest(
        "import pytest\n\n@pytest.fixture\ndef webhook_secret():\n    return 'whsec-rerun'\n"
    )
    pytester.makepyfile(test_rerun=PERSISTENT_STORE_TESTS)
    for _ in range(2):  # two processes, as two `pytest` runs would be
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
        result.assert_outcomes(passed=1)
    assert store.exists()


def test_turning_the_plugin_off_and_on_as_the_page_says(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_signer="def test_it(webhook_signer):\n    assert webhook_signer\n")
    off = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:service_webhooks")
    off.assert_outcomes(errors=1)
    assert "fixture 'webhook_signer' not found" in off.stdout.str()
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    on = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "service_webhooks")
    on.assert_outcomes(passed=1)
    pytester.makeconftest('pytest_plugins = ["service_webhooks.testing.pytest_plugin"]\n')
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    twice = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert "Plugin already registered under a different name" in twice.stderr.str()
