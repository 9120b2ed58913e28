"""The Flask adapter through Flask's test client and through gunicorn (spec §5.2, §6.1, §7)."""

from __future__ import annotations

import ast
import io
import time
from collections.abc import Iterator
from importlib import metadata
from types import ModuleType
from typing import Any

import httpx
import pytest
from flask import Flask
from flask.testing import FlaskClient

from service_webhooks import MAX_BODY_SIZE, WebhookReceiver
from service_webhooks._exceptions import ConfigurationError
from service_webhooks.adapters.flask import (
    EXTENSION_KEY,
    ServiceWebhooks,
    webhook_blueprint,
)


@pytest.fixture
def app(kit: ModuleType, app_paths: tuple[str, str]) -> Flask:
    flask_app: Flask = kit.load_app_module().create_app(*app_paths)
    return flask_app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def client_target(kit: ModuleType, client: FlaskClient, store_path: str) -> Any:
    def send(method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> Any:
        response = client.open(path, method=method, headers=headers, data=body)
        return kit.Answer(response.status_code, _lower(response.headers), response.data)

    return kit.Target(send, kit.sqlite_claim(store_path))


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


# -- every row of the status contract ---------------------------------------------------


def test_status_contract_through_the_test_client(
    kit: ModuleType, client: FlaskClient, app_paths: tuple[str, str], status_row: Any
) -> None:
    status_row(client_target(kit, client, app_paths[0]))


@pytest.mark.e2e
def test_status_contract_through_gunicorn(
    kit: ModuleType, gunicorn: tuple[Any, str], status_row: Any
) -> None:
    server, store_path = gunicorn
    with httpx.Client(base_url=server.url, timeout=10) as http:

        def send(method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> Any:
            response = http.request(method, path, headers=headers, content=body)
            return kit.Answer(response.status_code, _lower(response.headers), response.content)

        status_row(kit.Target(send, kit.sqlite_claim(store_path)))


@pytest.mark.e2e
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_oversized_body_streamed_to_gunicorn_is_413(
    kit: ModuleType, gunicorn: tuple[Any, str], chunked: bool
) -> None:
    server, _ = gunicorn
    assert kit.stream_oversized(server.port, "/webhooks", chunked=chunked) == 413


@pytest.mark.e2e
def test_chunked_delivery_within_the_limit_is_processed_by_gunicorn(
    kit: ModuleType, gunicorn: tuple[Any, str]
) -> None:
    server, _ = gunicorn
    body = kit.envelope()

    def chunks() -> Iterator[bytes]:
        yield body[:10]
        yield body[10:]

    headers = {kit.SIGNATURE_HEADER: kit.signed(body)}
    response = httpx.post(server.url + "/webhooks", content=chunks(), headers=headers)
    assert "content-length" not in response.request.headers  # really chunked
    assert (response.status_code, response.json()["reason"]) == (200, "processed")


# -- Flask specifics --------------------------------------------------------------------


def test_handlers_run_inside_the_app_context(kit: ModuleType, client: FlaskClient) -> None:
    module = kit.load_app_module()
    body = kit.envelope()
    before = len(module.seen)
    response = client.post("/webhooks", data=body, headers={kit.SIGNATURE_HEADER: kit.signed(body)})
    assert response.status_code == 200
    assert module.seen[before:] == [("note.created", "webhook_app", "set-by-before-request")]


def test_a_form_encoded_delivery_is_read_raw_not_parsed(
    kit: ModuleType, client: FlaskClient
) -> None:
    body = kit.envelope()
    headers = {
        kit.SIGNATURE_HEADER: kit.signed(body),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    response = client.post("/webhooks", data=body, headers=headers)
    assert (response.status_code, response.json["reason"]) == (200, "processed")


def test_a_chunked_body_without_content_length_is_read_up_to_the_cap(
    kit: ModuleType, client: FlaskClient
) -> None:
    def post(body: bytes) -> Any:
        environ = {"wsgi.input_terminated": True}
        headers = {kit.SIGNATURE_HEADER: kit.signed(body), "Transfer-Encoding": "chunked"}
        return client.post(
            "/webhooks", input_stream=_Stream(body), headers=headers, environ_overrides=environ
        )

    response = post(kit.envelope())
    assert (response.status_code, response.json["reason"]) == (200, "processed")
    huge = _Stream(kit.envelope(text="x" * (4 * MAX_BODY_SIZE)))
    headers = {kit.SIGNATURE_HEADER: "o:x,t:1,v:AAAA", "Transfer-Encoding": "chunked"}
    response = client.post(
        "/webhooks",
        input_stream=huge,
        headers=headers,
        environ_overrides={"wsgi.input_terminated": True},
    )
    assert response.status_code == 413
    assert huge.taken == MAX_BODY_SIZE + 1  # never read past the cap


class _Stream(io.BytesIO):
    """A body stream that records how much the adapter read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.taken += len(chunk)
        return chunk


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_flask_max_content_length_is_honoured_when_smaller(
    kit: ModuleType, app: Flask, client: FlaskClient, chunked: bool
) -> None:
    app.config["MAX_CONTENT_LENGTH"] = 2000
    small, large = kit.envelope(), kit.envelope(text="x" * 2000)
    for body, status in ((small, 200), (large, 413)):
        headers = {kit.SIGNATURE_HEADER: kit.signed(body)}
        if chunked:
            headers["Transfer-Encoding"] = "chunked"
            response = client.post(
                "/webhooks", input_stream=_Stream(body), headers=headers,
                environ_overrides={"wsgi.input_terminated": True},
            )  # fmt: skip
        else:
            response = client.post("/webhooks", data=body, headers=headers)
        assert response.status_code == status
        assert response.content_type == "application/json"


def test_trailing_slash_is_answered_not_redirected(kit: ModuleType, client: FlaskClient) -> None:
    body = kit.envelope()
    response = client.post(
        "/webhooks/", data=body, headers={kit.SIGNATURE_HEADER: kit.signed(body)}
    )
    assert (response.status_code, response.json["reason"]) == (200, "processed")  # never a 3xx


@pytest.mark.parametrize("path", ["/hooks/in//", "/hooks//in", "/hooks/in///", "/hooks//in/"])
def test_repeated_slashes_are_not_redirected(kit: ModuleType, path: str) -> None:
    # werkzeug merges repeated slashes with a 308 by default: a 3xx is never sent (spec §7)
    if int(metadata.version("werkzeug").split(".")[0]) < 3:
        pytest.skip("werkzeug 2.x merges slashes whatever the rule says (documented)")
    receiver = WebhookReceiver(kit.SECRET, store="memory")
    app = Flask("slashes")
    app.register_blueprint(webhook_blueprint(receiver, url="/in"), url_prefix="/hooks")
    body = kit.envelope()
    response = app.test_client().post(
        path, data=body, headers={kit.SIGNATURE_HEADER: kit.signed(body)}
    )
    assert response.status_code == 404, response.headers.get("Location")


def test_blueprint_with_an_explicit_receiver_and_url_prefix(kit: ModuleType) -> None:
    receiver = WebhookReceiver(kit.SECRET, store="memory")
    calls: list[str] = []
    receiver.on("note.created", lambda event: calls.append(event.name))
    app = Flask("explicit")
    app.register_blueprint(webhook_blueprint(receiver, url="/in"), url_prefix="/hooks")
    body = kit.envelope()
    response = app.test_client().post(
        "/hooks/in", data=body, headers={kit.SIGNATURE_HEADER: kit.signed(body)}
    )
    assert (response.status_code, calls) == (200, ["note.created"])
    with pytest.raises(TypeError):
        webhook_blueprint(object())  # type: ignore[arg-type]


def test_init_app_reads_config_and_keeps_state_in_app_extensions(kit: ModuleType) -> None:
    webhooks = ServiceWebhooks()
    calls: list[str] = []

    @webhooks.on("note.created")
    def handler(event: Any) -> None:
        calls.append(event.name)

    apps = []
    for name, tolerance in (("one", 10), ("two", 600)):
        app = Flask(name)
        app.config.update(
            SERVICE_WEBHOOKS_SECRETS=kit.SECRET,
            SERVICE_WEBHOOKS_STORE="memory",
            SERVICE_WEBHOOKS_TOLERANCE=tolerance,
            SERVICE_WEBHOOKS_URL="/in",
        )
        webhooks.init_app(app)
        apps.append(app)
    assert not hasattr(webhooks, "app")
    one, two = (app.extensions[EXTENSION_KEY] for app in apps)
    assert (one.tolerance, two.tolerance) == (10, 600)
    body = kit.envelope()
    old = kit.signed(body, timestamp=int(time.time()) - 60)
    assert (
        apps[0]
        .test_client()
        .post("/in", data=body, headers={kit.SIGNATURE_HEADER: old})
        .status_code
        == 401
    )
    assert (
        apps[1]
        .test_client()
        .post("/in", data=body, headers={kit.SIGNATURE_HEADER: old})
        .status_code
        == 200
    )
    assert calls == ["note.created"]  # handlers registered on the extension reach every app


def test_init_app_without_secrets_fails_at_startup() -> None:
    with pytest.raises(ConfigurationError, match="SERVICE_WEBHOOKS_SECRETS"):
        ServiceWebhooks(Flask("nosecret"))


def test_secrets_run_together_in_one_string_fail_at_startup(monkeypatch: Any) -> None:
    """``FLASK_SERVICE_WEBHOOKS_SECRETS="new old"`` is not a rotation but one secret with a
    space in it, which no delivery matches: every one answered 401, never retried."""
    new, old = "whsec-new-0123456789abcdef0123456789abcdef", "whsec-old-0123456789abcdef01234567"
    monkeypatch.setenv("FLASK_SERVICE_WEBHOOKS_SECRETS", f"{new} {old}")
    app = Flask("runtogether")
    app.config.from_prefixed_env()
    with pytest.raises(ConfigurationError, match=r"SERVICE_WEBHOOKS_SECRETS.*whitespace") as error:
        ServiceWebhooks(app)
    assert new not in str(error.value)
    assert old not in str(error.value)
    assert EXTENSION_KEY not in app.extensions
    monkeypatch.setenv("FLASK_SERVICE_WEBHOOKS_SECRETS", f'["{new}", "{old}"]')  # the rotation
    rotated = Flask("rotation")
    rotated.config.from_prefixed_env()
    rotated.config["SERVICE_WEBHOOKS_STORE"] = "memory"
    ServiceWebhooks(rotated)
    passphrase = Flask("passphrase")  # a space meant as part of the secret: a list of one
    passphrase.config.update(SERVICE_WEBHOOKS_SECRETS=[f"{new} x"], SERVICE_WEBHOOKS_STORE="memory")
    ServiceWebhooks(passphrase)


def test_the_adapter_module_stays_small() -> None:
    import service_webhooks.adapters.flask as module

    assert module.__file__ is not None
    with open(module.__file__, encoding="utf-8") as source:
        assert lines_of_code(source.read()) < 200


def lines_of_code(source: str) -> int:
    """Lines that are not blank, comments or docstrings."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            docstrings.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return sum(
        1
        for number, line in enumerate(source.splitlines(), 1)
        if line.strip() and not line.strip().startswith("#") and number not in docstrings
    )


def test_the_example_app_answers_deliveries(
    kit: ModuleType, tmp_path: Any, monkeypatch: Any
) -> None:
    from pathlib import Path

    from sw_modules import load_file

    monkeypatch.setenv("SERVICE_WEBHOOKS_SECRET", kit.SECRET)
    monkeypatch.setenv("SERVICE_WEBHOOKS_STORE", f"sqlite:{tmp_path / 'example.sqlite3'}")
    path = Path(__file__).parents[3] / "examples" / "flask_app.py"
    module = load_file("sw_tests_example_flask_app", path)
    client = module.app.test_client()
    for name in ("note.created", "a.new.event"):  # the second reaches on_any
        body = kit.envelope(name)
        response = client.post(
            "/webhooks", data=body, headers={kit.SIGNATURE_HEADER: kit.signed(body)}
        )
        assert (response.status_code, response.json["reason"]) == (200, "processed")


def test_the_example_app_takes_a_rotation_from_the_clis_secret_variable(
    kit: ModuleType, tmp_path: Any, monkeypatch: Any
) -> None:
    """``SERVICE_WEBHOOKS_SECRET="new old"`` (as ``service-webhooks send`` reads it): both
    verify, not one secret with a space in it that no delivery matches (401, permanent)."""
    from pathlib import Path

    from sw_modules import load_file

    from service_webhooks.testing import Signer

    new, old = kit.SECRET, "whsec-flask-old-0123456789abcdef0123456789abcd"
    monkeypatch.setenv("SERVICE_WEBHOOKS_SECRET", f"{new} {old}")
    monkeypatch.setenv("SERVICE_WEBHOOKS_STORE", f"sqlite:{tmp_path / 'example.sqlite3'}")
    path = Path(__file__).parents[3] / "examples" / "flask_app.py"
    module = load_file("sw_tests_example_flask_rotation", path)
    client = module.app.test_client()
    for number, secret in enumerate((new, old)):
        body, headers = Signer(secret).delivery(
            "note.created", {"id": f"n-{number}", "author": "a@b.c", "text": "hi"}
        )
        response = client.post("/webhooks", data=body, headers=headers)
        assert (response.status_code, response.json["reason"]) == (200, "processed")


def test_any_other_method_gets_the_cores_405_and_other_routes_keep_werkzeugs(
    kit: ModuleType,
) -> None:
    receiver = WebhookReceiver(kit.SECRET, store="memory")
    app = Flask("methods")
    app.register_blueprint(webhook_blueprint(receiver, url="/in"), url_prefix="/hooks")

    @app.get("/page")
    def page() -> str:
        return "page"

    client = app.test_client()
    for method in ("PROPFIND", "TRACE", "BREW"):
        response = client.open("/hooks/in", method=method)
        assert (response.status_code, response.json) == (
            405,
            {"status": 405, "reason": "method_not_allowed"},
        )
        assert response.headers["Allow"] == "POST"
    other = client.open("/page", method="PROPFIND")  # not ours: Werkzeug's own answer
    assert other.status_code == 405
    assert other.mimetype == "text/html"
    assert client.get("/page").text == "page"
