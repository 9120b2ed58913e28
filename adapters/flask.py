"""Flask adapter: a blueprint bound to a receiver, and the ``init_app`` extension.

Thin by design (STYLE.md habit 2): the view reads the method, the ``Service-Signature``
header and at most ``limit + 1`` raw bytes from the WSGI input stream itself (never
``request.data`` or ``request.form``: form parsing would empty them), calls the core
and writes its :class:`~service_webhooks._outcome.Outcome` as the response. ``limit`` is
the receiver's ``max_body_size`` (1 MiB, spec §6.1), or Flask's ``MAX_CONTENT_LENGTH``
when that is smaller. Chunked bodies work under a server that terminates the input
stream (gunicorn sets ``wsgi.input_terminated``). Handlers run inside the view, so
inside the app context: ``current_app`` and ``g`` are usable.

Explicit receiver::

    receiver = WebhookReceiver(secrets=...)
    app.register_blueprint(webhook_blueprint(receiver, url="/webhooks"))

Extension, configured from ``app.config`` (keys in :data:`CONFIG_KEYS`)::

    webhooks = ServiceWebhooks()

    @webhooks.on("note.created")
    def note_created(event): ...

    def create_app():
        app = Flask(__name__)
        app.config["SERVICE_WEBHOOKS_SECRETS"] = "whsec-..."
        webhooks.init_app(app)
        return app
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Blueprint, Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed
from werkzeug.wsgi import get_input_stream

from service_webhooks._dispatch import Router
from service_webhooks._exceptions import ConfigurationError
from service_webhooks._outcome import Outcome
from service_webhooks._receiver import WebhookReceiver

from ._stream import read_capped

__all__ = ["CONFIG_KEYS", "EXTENSION_KEY", "ServiceWebhooks", "webhook_blueprint"]

EXTENSION_KEY = "service_webhooks"
"""Where :meth:`ServiceWebhooks.init_app` keeps the app's receiver: ``app.extensions[KEY]``."""

CONFIG_KEYS: Mapping[str, str] = {
    "SERVICE_WEBHOOKS_SECRETS": "secrets",
    "SERVICE_WEBHOOKS_TOLERANCE": "tolerance",
    "SERVICE_WEBHOOKS_STORE": "store",
    "SERVICE_WEBHOOKS_MAX_BODY_SIZE": "max_body_size",
    "SERVICE_WEBHOOKS_IDEMPOTENCY_KEY": "idempotency_key",
    "SERVICE_WEBHOOKS_LEASE": "lease",
    "SERVICE_WEBHOOKS_RETENTION": "retention",
    "SERVICE_WEBHOOKS_UNHANDLED_STATUS": "unhandled_status",
}
"""``app.config`` key -> :class:`~service_webhooks.WebhookReceiver` argument. Only
``SERVICE_WEBHOOKS_SECRETS`` is required; ``SERVICE_WEBHOOKS_URL`` (default
``"/webhooks"``) is the rule the blueprint answers on."""

_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def webhook_blueprint(
    receiver: WebhookReceiver, *, url: str = "/webhooks", name: str = "service_webhooks"
) -> Blueprint:
    """A blueprint answering deliveries on ``url`` with ``receiver``.

    Every method reaches the view so the core answers 405 itself (spec §6.1: POST);
    ``url`` has no trailing-slash redirect (a 3xx is always a bug, spec §7).

    Args:
        receiver: The configured receiver.
        url: The rule, relative to the blueprint's ``url_prefix``.
        name: The blueprint name (unique per app).

    Raises:
        TypeError: ``receiver`` is not a :class:`~service_webhooks.WebhookReceiver`.
    """
    if not isinstance(receiver, WebhookReceiver):
        raise TypeError("webhook_blueprint needs a WebhookReceiver")
    return _blueprint(lambda: receiver, url, name)


class ServiceWebhooks:
    """The Flask extension: one handler registry, one receiver per app.

    Register handlers on the extension (``on``, ``on_any``, ``on_error``, ``remove``,
    as on :class:`~service_webhooks.WebhookReceiver`) before or after ``init_app``;
    every app's receiver shares them. The app is never stored on the extension.

    Args:
        app: Initialise this app at once (else call :meth:`init_app`).
        receiver: Use this receiver for every app instead of building one from config.
    """

    def __init__(self, app: Flask | None = None, *, receiver: WebhookReceiver | None = None):
        self.receiver = receiver
        self.router = receiver.router if receiver is not None else Router()
        self.on = self.router.on
        self.on_any = self.router.on_any
        self.on_error = self.router.on_error
        self.remove = self.router.remove
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Build the app's receiver from ``app.config`` and register the view.

        Raises:
            ConfigurationError: ``SERVICE_WEBHOOKS_SECRETS`` is missing, or a value is
                out of range (messages never show a secret).
        """
        receiver = self.receiver
        if receiver is None:
            receiver = self.receiver_from_config(app.config, router=self.router)
        app.extensions[EXTENSION_KEY] = receiver
        url = app.config.get("SERVICE_WEBHOOKS_URL", "/webhooks")
        app.register_blueprint(_blueprint(_current_receiver, url, EXTENSION_KEY))

    @staticmethod
    def receiver_from_config(
        config: Mapping[str, Any], *, router: Router | None = None
    ) -> WebhookReceiver:
        """A receiver from the ``SERVICE_WEBHOOKS_*`` keys of ``config`` (:data:`CONFIG_KEYS`),
        dispatching through ``router`` (its handlers) when given."""
        if config.get("SERVICE_WEBHOOKS_SECRETS") is None:
            raise ConfigurationError("set app.config['SERVICE_WEBHOOKS_SECRETS']")
        options = {arg: config[key] for key, arg in CONFIG_KEYS.items() if key in config}
        return WebhookReceiver(**options, router=router)


def _current_receiver() -> WebhookReceiver:
    receiver: WebhookReceiver = current_app.extensions[EXTENSION_KEY]
    return receiver


def _blueprint(get_receiver: Callable[[], WebhookReceiver], url: str, name: str) -> Blueprint:
    if not url.startswith("/"):
        raise ValueError("url must start with '/'")
    blueprint = Blueprint(name, __name__)

    def deliver() -> Response:
        return _respond(_handle(get_receiver()))

    blueprint.add_url_rule(
        url, "deliver", deliver, methods=_METHODS, provide_automatic_options=False
    )

    @blueprint.before_app_request
    def other_methods() -> Response | None:
        """A method outside the rule's list (PROPFIND, TRACE, ...) on this URL: the core's
        405, not Werkzeug's HTML page; every other request passes untouched."""
        if not isinstance(request.routing_exception, MethodNotAllowed):
            return None
        try:
            endpoint, _ = current_app.url_map.bind_to_environ(request.environ).match(method="POST")
        except HTTPException:
            return None
        if current_app.view_functions.get(endpoint) is not deliver:
            return None
        outcome = get_receiver().precheck(request.method)
        return None if outcome is None else _respond(outcome)

    return blueprint


def _handle(receiver: WebhookReceiver) -> Outcome:
    limit = receiver.max_body_size
    if request.max_content_length is not None:
        limit = min(limit, request.max_content_length)  # Flask's own cap is smaller: honour it
    outcome = receiver.precheck(request.method, request.content_length, max_body_size=limit)
    if outcome is not None:
        return outcome
    body = read_capped(get_input_stream(request.environ), limit + 1)
    outcome = receiver.precheck(request.method, len(body), max_body_size=limit)
    if outcome is not None:  # a body without Content-Length ran over the cap
        return outcome
    signature = ",".join(request.headers.getlist(receiver.signature_header)) or None
    headers = request.headers  # Content-Type and User-Agent are kept in the inbox
    return receiver.process(
        body,
        signature,
        method=request.method,
        content_type=headers.get("Content-Type"),
        user_agent=headers.get("User-Agent"),
    )


def _respond(outcome: Outcome) -> Response:
    return current_app.response_class(
        outcome.body,
        status=outcome.status,
        headers=list(outcome.headers),
        content_type=outcome.content_type,
    )
