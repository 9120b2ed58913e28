"""How the extension and the blueprint fit into a Flask app: ``init_app`` once per app,
misspelt ``SERVICE_WEBHOOKS_*`` keys, ``SERVICE_WEBHOOKS_INBOX`` from the environment, a
blueprint's subdomain, and the app-wide hooks docs/flask.md tells users to open
(CSRF, a login wall)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, Response, redirect, request

from service_webhooks import ConfigurationError, WebhookReceiver, sign
from service_webhooks.adapters.flask import EXTENSION_KEY, ServiceWebhooks, webhook_blueprint
from service_webhooks.inbox import MemoryInbox

SECRET = "whsec-flask-setup-0123456789abcdef0123456789abcdef"


def delivery() -> tuple[bytes, dict[str, str]]:
    data = {"id": uuid.uuid4().hex, "author": "a@example.com", "text": "hi"}
    body = json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()
    return body, {"Service-Signature": sign(body, SECRET, "o-1")}


def configured(name: str = "setup", **config: Any) -> Flask:
    app = Flask(name)
    app.config.update(
        SERVICE_WEBHOOKS_SECRETS=SECRET, SERVICE_WEBHOOKS_STORE="memory", SECRET_KEY="k"
    )
    app.config.update(config)
    return app


def test_init_app_twice_is_refused_and_leaves_the_app_as_it_was() -> None:
    app = configured()
    ServiceWebhooks().init_app(app)
    receiver = app.extensions[EXTENSION_KEY]
    app.config["SERVICE_WEBHOOKS_SECRETS"] = "whsec-another"
    for extension in (ServiceWebhooks(), ServiceWebhooks(receiver=receiver)):
        with pytest.raises(RuntimeError, match="already called for app 'setup'"):
            extension.init_app(app)
    assert app.extensions[EXTENSION_KEY] is receiver  # not swapped by the failed call
    body, headers = delivery()
    assert app.test_client().post("/webhooks", data=body, headers=headers).status_code == 200


@pytest.mark.parametrize("strict", [True, "true"])
def test_strict_refuses_a_handler_registered_on_the_extension_before_init_app(
    strict: Any,
) -> None:
    """``SERVICE_WEBHOOKS_STRICT`` applies to the extension's handlers: one registered for
    an unknown event name (a typo) stops ``init_app``, and the app is left as it was."""
    webhooks = ServiceWebhooks()
    webhooks.on("note.craeted")(lambda event: None)
    app = configured(SERVICE_WEBHOOKS_STRICT=strict)
    with pytest.raises(ConfigurationError, match=r"'note\.craeted'.*'note\.created'"):
        webhooks.init_app(app)
    assert EXTENSION_KEY not in app.extensions
    assert "service_webhooks" not in app.blueprints


def test_strict_refuses_a_handler_registered_on_the_extension_after_init_app() -> None:
    webhooks = ServiceWebhooks()
    webhooks.init_app(configured(SERVICE_WEBHOOKS_STRICT=True))
    with pytest.raises(ConfigurationError, match=r"'note\.craeted'"):
        webhooks.on("note.craeted")(lambda event: None)
    webhooks.on("note.created")(lambda event: None)  # a known name still registers


def test_without_strict_an_unknown_name_only_warns(caplog: pytest.LogCaptureFixture) -> None:
    webhooks = ServiceWebhooks()
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        webhooks.on("note.craeted")(lambda event: None)
    webhooks.init_app(configured(SERVICE_WEBHOOKS_STRICT="false"))
    webhooks.on("note.creatd")(lambda event: None)
    assert "'note.craeted', which is not a known event name" in caplog.text


def test_a_misspelt_key_is_logged_naming_the_closest_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = configured(SERVICE_WEBHOOKS_TOLERENCE=10, SERVICE_WEBHOOKS_STORAGE="memory")
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        ServiceWebhooks(app)
    messages = [record.getMessage() for record in caplog.records]
    assert any(
        "'SERVICE_WEBHOOKS_TOLERENCE'" in m and "did you mean 'SERVICE_WEBHOOKS_TOLERANCE'" in m
        for m in messages
    ), messages
    assert any("'SERVICE_WEBHOOKS_STORAGE'" in m for m in messages), messages
    assert app.extensions[EXTENSION_KEY].tolerance == 300  # ignored, as the warning says


def test_known_keys_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    app = configured(SERVICE_WEBHOOKS_URL="/in", SERVICE_WEBHOOKS_TOLERANCE="60")
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        ServiceWebhooks(app)
    assert not caplog.records


def test_a_url_without_a_leading_slash_names_the_key() -> None:
    app = configured(SERVICE_WEBHOOKS_URL="webhooks")
    with pytest.raises(ConfigurationError, match="SERVICE_WEBHOOKS_URL"):
        ServiceWebhooks(app)
    assert EXTENSION_KEY not in app.extensions


@pytest.mark.parametrize("value", ["/webhooks ", "/webhooks\n", "/web hooks"])
def test_a_url_with_whitespace_names_the_key(value: str) -> None:
    # "/webhooks " from the environment made a rule no delivery ever reaches (404s)
    app = configured(SERVICE_WEBHOOKS_URL=value)
    with pytest.raises(ConfigurationError, match=r"SERVICE_WEBHOOKS_URL'\] .* no whitespace"):
        ServiceWebhooks(app)
    assert EXTENSION_KEY not in app.extensions


def test_booleans_from_prefixed_env_are_numbers_and_accepted(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # from_prefixed_env() parses "0" and "1" as JSON: the keys got int 0/1 and refused them
    monkeypatch.setenv("FLASK_SERVICE_WEBHOOKS_SUCCESS_BODY", "0")
    monkeypatch.setenv("FLASK_SERVICE_WEBHOOKS_STRICT", "1")
    monkeypatch.setenv("FLASK_SERVICE_WEBHOOKS_INBOX", "0")
    app = configured(SERVICE_WEBHOOKS_STORE=f"sqlite:{tmp_path / 'store.sqlite3'}")
    app.config.from_prefixed_env()
    ServiceWebhooks(app)
    receiver = app.extensions[EXTENSION_KEY]
    assert (receiver.success_body, receiver.router.strict, receiver.inbox) == (False, True, None)
    app = configured(SERVICE_WEBHOOKS_SUCCESS_BODY=2)
    with pytest.raises(ConfigurationError, match="success_body must be True or False"):
        ServiceWebhooks(app)


@pytest.mark.parametrize("value", ["false", "OFF", " 0 "])
def test_inbox_false_from_the_environment_turns_it_off(tmp_path: Any, value: str) -> None:
    app = configured(
        SERVICE_WEBHOOKS_STORE=f"sqlite:{tmp_path / 'store.sqlite3'}", SERVICE_WEBHOOKS_INBOX=value
    )
    ServiceWebhooks(app)
    assert app.extensions[EXTENSION_KEY].inbox is None


def test_inbox_true_from_the_environment_keeps_it_beside_the_store(tmp_path: Any) -> None:
    app = configured(
        SERVICE_WEBHOOKS_STORE=f"sqlite:{tmp_path / 'store.sqlite3'}", SERVICE_WEBHOOKS_INBOX="true"
    )
    ServiceWebhooks(app)
    assert app.extensions[EXTENSION_KEY].inbox is not None


def test_the_blueprint_answers_on_its_subdomain_only() -> None:
    app = Flask("sub", subdomain_matching=True)
    app.config["SERVER_NAME"] = "example.test"
    receiver = WebhookReceiver(secrets=SECRET, store="memory", inbox=False)
    app.register_blueprint(webhook_blueprint(receiver), url_prefix="/hooks", subdomain="api")
    client = app.test_client()
    for path in ("/hooks/webhooks", "/hooks/webhooks/"):
        body, headers = delivery()
        on_api = client.post(path, data=body, headers=headers, base_url="http://api.example.test")
        assert (on_api.status_code, on_api.json) == (200, {"status": 200, "reason": "unhandled"})
        elsewhere = client.post(path, data=body, headers=headers, base_url="http://example.test")
        assert elsewhere.status_code == 404


def test_the_documented_login_wall_exemption_lets_deliveries_through() -> None:
    app = configured(SERVICE_WEBHOOKS_INBOX=MemoryInbox())

    @app.before_request
    def require_login() -> Any:
        if request.blueprint == "service_webhooks":  # as docs/flask.md shows
            return None
        return redirect("/login")

    ServiceWebhooks(app)
    body, headers = delivery()
    client = app.test_client()
    assert client.post("/webhooks", data=body, headers=headers).status_code == 200
    assert client.get("/elsewhere").status_code == 302


def test_the_documented_csrf_exemption_lets_deliveries_through() -> None:
    csrf_module = pytest.importorskip("flask_wtf.csrf")
    app = configured()
    csrf = csrf_module.CSRFProtect(app)
    ServiceWebhooks(app)
    body, headers = delivery()
    client = app.test_client()
    assert client.post("/webhooks", data=body, headers=headers).status_code == 400  # the token
    csrf.exempt(app.blueprints["service_webhooks"])
    assert client.post("/webhooks", data=body, headers=headers).status_code == 200


_BEFORE_VIEW = {
    "get_data": lambda: request.get_data(),
    "get_json": lambda: request.get_json(silent=True),
    "data": lambda: request.data,
    "json": lambda: request.json,
    "form": lambda: request.form,  # a JSON body: werkzeug opens the stream, reads nothing
    "values": lambda: request.values,
    "stream": lambda: request.stream,
}


@pytest.mark.parametrize("read", list(_BEFORE_VIEW.values()), ids=list(_BEFORE_VIEW))
def test_a_hook_reading_the_body_before_the_view_leaves_it_to_the_receiver(
    read: Callable[[], object],
) -> None:
    """A ``before_request`` hook of the app (request logging, an audit) reads the body
    through werkzeug: the view takes werkzeug's copy, not the spent server stream (it got
    nothing, and answered 401, which the service never retries)."""
    app = configured()

    @app.before_request
    def hook() -> None:
        read()

    ServiceWebhooks(app)
    body, headers = delivery()
    headers["Content-Type"] = "application/json"
    response = app.test_client().post("/webhooks", data=body, headers=headers)
    assert (response.status_code, response.json) == (200, {"status": 200, "reason": "unhandled"})


def test_hooks_after_the_view_read_the_exact_body() -> None:
    app = configured()
    seen: list[bytes] = []

    @app.after_request
    def after(response: Response) -> Response:
        seen.append(request.get_data())
        return response

    @app.teardown_request
    def teardown(error: BaseException | None) -> None:
        seen.append(request.get_data())

    ServiceWebhooks(app)
    body, headers = delivery()
    assert app.test_client().post("/webhooks", data=body, headers=headers).status_code == 200
    assert seen == [body, body]


def test_a_body_read_before_the_view_and_not_kept_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``request.stream.read()`` keeps no copy: nothing is left for the receiver (401),
    and the log says why instead of only "signature"."""
    app = configured()

    @app.before_request
    def hook() -> None:
        request.stream.read()

    ServiceWebhooks(app)
    body, headers = delivery()
    with caplog.at_level(logging.WARNING, logger="service_webhooks"):
        response = app.test_client().post("/webhooks", data=body, headers=headers)
    assert response.status_code == 401
    assert "read a delivery's body before the webhook view" in caplog.text
    assert "request.get_data()" in caplog.text


def test_variable_parts_of_the_rule_and_its_prefix_reach_the_hooks_not_the_view() -> None:
    """``url_prefix="/<tenant>"`` (or a variable in ``url``) made every delivery a 500:
    Flask passed the value to the view, which took no argument."""
    app = Flask("tenants")
    receiver = WebhookReceiver(secrets=SECRET, store="memory", inbox=False)
    seen: list[dict[str, Any] | None] = []
    app.before_request(lambda: seen.append(request.view_args))
    app.register_blueprint(webhook_blueprint(receiver), url_prefix="/<tenant>")
    app.register_blueprint(webhook_blueprint(receiver, url="/hooks/<int:n>", name="numbered"))
    client = app.test_client()
    for path in ("/acme/webhooks", "/acme/webhooks/", "/hooks/7", "/hooks/7/"):
        body, headers = delivery()
        answer = client.post(path, data=body, headers=headers)
        assert (answer.status_code, answer.json) == (200, {"status": 200, "reason": "unhandled"})
    assert seen == [{"tenant": "acme"}] * 2 + [{"n": 7}] * 2
