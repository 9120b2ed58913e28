"""Flask adapter: a blueprint bound to a receiver, and the ``init_app`` extension.

Read, call, write: the view hands the method, the header lines the receiver reads
(from the ``environ``) and the WSGI input stream (never ``request.data`` or
``request.form``: form parsing would empty them; werkzeug's copy when a hook of the app
read the body first, see :class:`~._flask_body.RequestBody`) to
:meth:`~service_webhooks.WebhookReceiver.handle`, which reads at most ``limit + 1``
bytes and decides the answer, and writes its :class:`~service_webhooks.Outcome`.
``limit`` is the receiver's ``max_body_size`` (1 MiB, spec §6.1), or Flask's
``MAX_CONTENT_LENGTH`` when that is smaller. The rule answers every HTTP method (the
core says 405) and both ``/webhooks`` and ``/webhooks/`` (the service follows no
redirect, spec §7); nothing runs on requests to other URLs. Chunked bodies work under
a server that terminates the input stream (gunicorn sets ``wsgi.input_terminated``).
Handlers run inside the view, so inside the app context: ``current_app`` and ``g``
are usable.

Explicit receiver::

    receiver = WebhookReceiver(secrets=...)
    app.register_blueprint(webhook_blueprint(receiver, url="/webhooks"))

Extension, configured from ``app.config`` (keys in :data:`CONFIG_KEYS`); it also adds
``flask service-webhooks list|show|replay`` (:data:`cli`) over the receiver's inbox::

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

import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

from service_webhooks import SETTINGS, ConfigurationError, Router, WebhookReceiver, as_resolver

from . import require_extra
from ._settings import check_secrets_setting, named_settings, unknown_settings
from ._wsgi import environ_headers

try:
    from flask import Blueprint, Flask, Request, Response, request
    from flask.blueprints import BlueprintSetupState
    from werkzeug.routing import Rule
except ImportError:  # pragma: no cover - exercised only without the extra
    require_extra("flask", "flask", "werkzeug")
    raise

from ._flask_body import RequestBody  # needs Flask: after the extra's check

__all__ = ["CONFIG_KEYS", "EXTENSION_KEY", "ServiceWebhooks", "webhook_blueprint"]

logger = logging.getLogger("service_webhooks")

EXTENSION_KEY = "service_webhooks"
"""Where :meth:`ServiceWebhooks.init_app` keeps the app's receiver: ``app.extensions[KEY]``."""

CONFIG_KEYS: Mapping[str, str] = {f"SERVICE_WEBHOOKS_{key}": arg for key, arg in SETTINGS.items()}
"""``app.config`` key -> :class:`~service_webhooks.WebhookReceiver` argument. Only
``SERVICE_WEBHOOKS_SECRETS`` is required; ``SERVICE_WEBHOOKS_URL`` (default
``"/webhooks"``) is the rule the blueprint answers on. A string (from the environment)
for a numeric key is converted to the number, and for ``SUCCESS_BODY`` or ``STRICT``
``true/false/1/0/yes/no/on/off`` (any case) to a bool; any other string for those keys is
a :class:`~service_webhooks.ConfigurationError` naming the key. For ``INBOX`` those words
are ``True``/``False`` too; any other string is an inbox URL. The numbers ``0`` and ``1``
(what ``from_prefixed_env()`` makes of ``"0"`` and ``"1"``) are ``False`` and ``True``
for those three keys."""


def webhook_blueprint(
    receiver: WebhookReceiver, *, url: str = "/webhooks", name: str = "service_webhooks"
) -> Blueprint:
    """A blueprint answering deliveries on ``url`` with ``receiver``.

    Every method reaches the view so the core answers 405 itself (spec §6.1: POST);
    ``url`` and ``url + "/"`` are both answered, never redirected (spec §7).

    Args:
        receiver: The configured receiver.
        url: The rule, relative to the blueprint's ``url_prefix``. Variable parts
            (``"/<tenant>"``, here or in the prefix) are left to the app's hooks, in
            ``request.view_args``.
        name: The blueprint name (unique per app).

    Raises:
        TypeError: ``receiver`` is not a :class:`~service_webhooks.WebhookReceiver`.
    """
    if not isinstance(receiver, WebhookReceiver):
        raise TypeError("webhook_blueprint needs a WebhookReceiver")
    return _blueprint(lambda app: receiver, url, name)


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

        A ``SERVICE_WEBHOOKS_*`` key that is none of :data:`CONFIG_KEYS` (nor ``_URL``),
        a misspelling such as ``SERVICE_WEBHOOKS_TOLERENCE``, is logged as a warning
        naming the closest known key: it would otherwise be ignored.

        Raises:
            ConfigurationError: ``SERVICE_WEBHOOKS_SECRETS`` is missing, a value is out
                of range (messages never show a secret), ``SERVICE_WEBHOOKS_URL``
                does not start with ``/`` or holds whitespace, or
                ``SERVICE_WEBHOOKS_STRICT`` is true and a handler registered on the
                extension names an unknown event (a typo such as ``note.craeted``).
                With ``STRICT`` true, registering such a handler on the extension
                raises from then on, for every app it serves (they share its handlers).
            RuntimeError: ``init_app`` was already called for this app (by this or
                another ``ServiceWebhooks``); the app is left as it was.
        """
        if EXTENSION_KEY in app.extensions:  # before any change to the app
            raise RuntimeError(
                f"ServiceWebhooks.init_app was already called for app {app.name!r}: "
                "one extension per app, initialised once"
            )
        _warn_unknown_keys(app.config)
        url = app.config.get("SERVICE_WEBHOOKS_URL", "/webhooks")
        if not isinstance(url, str) or not url.startswith("/") or url != "".join(url.split()):
            raise ConfigurationError(
                "app.config['SERVICE_WEBHOOKS_URL'] must start with '/' and hold no "
                f"whitespace, not {url!r}"
            )
        receiver = self.receiver
        strict = False
        if receiver is None:
            strict = _parsed(_STRICT, "strict", app.config.get(_STRICT, False)) is True
            if strict:  # before any change: the handlers already registered must be known
                _check_known(self.router)
            receiver = self.receiver_from_config(app.config, router=self.router)
        if strict:  # the extension's router, not one built from config: later ones too
            self.router.strict = True
        app.extensions[EXTENSION_KEY] = receiver
        app.register_blueprint(_blueprint(_current_receiver, url, EXTENSION_KEY))
        from .flask_cli import cli  # the inbox commands: their own module

        app.cli.add_command(cli)

    @staticmethod
    def receiver_from_config(
        config: Mapping[str, Any], *, router: Router | None = None
    ) -> WebhookReceiver:
        """A receiver from the ``SERVICE_WEBHOOKS_*`` keys of ``config`` (:data:`CONFIG_KEYS`),
        dispatching through ``router`` (its handlers) when given."""
        _check_secrets(config.get("SERVICE_WEBHOOKS_SECRETS"))
        given = {key: arg for key, arg in CONFIG_KEYS.items() if key in config}
        options = {arg: _parsed(key, arg, config[key]) for key, arg in given.items()}
        with named_settings({arg: f"app.config[{key!r}]" for key, arg in given.items()}):
            return WebhookReceiver(**options, router=router)


_STRICT = "SERVICE_WEBHOOKS_STRICT"


def _check_known(router: Router) -> None:
    """Under ``SERVICE_WEBHOOKS_STRICT``, refuse handlers registered on the extension for an
    unknown event name (registered before ``init_app``: the router was not strict yet).

    Raises:
        ConfigurationError: Naming the first such name and the closest known one.
    """
    unknown = router.unknown_event_names()
    if unknown:
        name, close = next(iter(unknown.items()))
        meant = f" (did you mean {close!r}?)" if close else ""
        raise ConfigurationError(
            f"app.config[{_STRICT!r}] is set and a handler is registered for {name!r}, which "
            f"is not a known event name{meant}: fix the name, or declare a new event with "
            f"router.declare({name!r}) before registering its handler"
        )


def _check_secrets(value: Any) -> None:
    """Refuse a ``SERVICE_WEBHOOKS_SECRETS`` no receiver could verify with, naming the key.

    Raises:
        ConfigurationError: Missing, or refused by :func:`service_webhooks.as_resolver`
            (the message names the key and never shows a secret); a number says that
            ``from_prefixed_env`` parsed a secret of digits as JSON; a ``str`` with
            whitespace inside is several secrets run together (``"new old"``, as the
            CLI's ``SERVICE_WEBHOOKS_SECRET`` holds them), which would verify nothing.
    """
    key = "app.config['SERVICE_WEBHOOKS_SECRETS']"
    if value is None:
        raise ConfigurationError(f"set {key}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ConfigurationError(
            f"{key} is a number: from_prefixed_env() parses values as JSON, so quote a "
            "secret made of digits ('\"123...\"') or set it as a str"
        )
    check_secrets_setting(value, key)
    try:
        as_resolver(value)
    except ConfigurationError as error:
        raise ConfigurationError(f"{key}: {error}") from None


_INTEGERS = frozenset({"max_body_size", "unhandled_status"})
_NUMBERS = frozenset({"tolerance", "lease", "retention"})
_BOOLEANS = frozenset({"success_body", "strict"})
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def _parsed(key: str, arg: str, value: Any) -> Any:
    """A config value as the receiver takes it: a string (from the environment) for a
    numeric or boolean key is converted; anything else is passed on as is.

    Raises:
        ConfigurationError: A string that is no such number or boolean, naming ``key``.
    """
    if type(value) is int and value in (0, 1) and (arg in _BOOLEANS or arg == "inbox"):
        return value == 1  # from_prefixed_env() parses "0" and "1" as JSON numbers
    if not isinstance(value, str):
        return value
    text = value.strip()
    if arg == "inbox" and text.lower() in _TRUE | _FALSE:  # an inbox URL is never these
        return text.lower() in _TRUE
    if arg in _BOOLEANS:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigurationError(
            f"app.config[{key!r}] must be a boolean: true/false, 1/0, yes/no or on/off, "
            f"not {value[:40]!r}"
        )
    try:
        if arg in _INTEGERS:
            return int(text)
        if arg in _NUMBERS:
            return float(text)  # seconds: the receiver takes any finite float
    except ValueError:
        expected = "an integer" if arg in _INTEGERS else "a number"
        raise ConfigurationError(
            f"app.config[{key!r}] must be {expected}, not {value[:40]!r}"
        ) from None
    return value


def _warn_unknown_keys(config: Mapping[str, Any]) -> None:
    known = [*CONFIG_KEYS, "SERVICE_WEBHOOKS_URL"]
    for key, close in unknown_settings(config, known, "SERVICE_WEBHOOKS_"):
        meant = f"; did you mean {close!r}?" if close else ""
        logger.warning("app.config[%r] is no service-webhooks setting, ignored%s", key, meant)


def _current_receiver(app: Flask) -> WebhookReceiver:
    receiver: WebhookReceiver = app.extensions[EXTENSION_KEY]
    return receiver


def _blueprint(receiver_of: Callable[[Flask], WebhookReceiver], url: str, name: str) -> Blueprint:
    if not url.startswith("/"):
        raise ValueError("url must start with '/'")
    blueprint = Blueprint(name, __name__)
    bare = url.rstrip("/")

    def register(state: BlueprintSetupState) -> None:
        app = cast(Flask, state.app)  # one view per app: that app's receiver, its responses

        def deliver(**view_args: object) -> Response:  # a prefix's "/<tenant>": the hooks'
            current = cast(Request, request._get_current_object())  # type: ignore[attr-defined]
            environ = current.environ
            body = RequestBody(current)
            outcome = receiver_of(app).handle(
                environ.get("REQUEST_METHOD", ""),  # as sent: request.method is upper-cased
                environ_headers(environ),  # not request.headers: see adapters/_wsgi.py
                body.read,
                max_body_size=current.max_content_length,  # Flask's cap, when smaller
            )
            body.keep()
            return app.response_class(
                outcome.body,
                status=outcome.status,
                headers=outcome.headers,
                content_type=outcome.content_type,
            )

        # werkzeug Rules with methods=None match every method (Flask's add_url_rule
        # would default to GET); one per spelling, so neither redirects to the other;
        # merge_slashes=False: werkzeug would answer "/webhooks//" with a 308 to
        # "/webhooks/" (a 3xx the service never follows, spec §7), now a plain 404
        prefix = (state.url_prefix or "").rstrip("/")
        endpoint = f"{state.name_prefix}.{state.name}.deliver".lstrip(".")
        for path in (prefix + bare or "/", prefix + bare + "/"):
            # subdomain: the blueprint's (register_blueprint(..., subdomain=)), as
            # Flask's own rules take it; None is the map's default
            app.url_map.add(
                Rule(
                    path,
                    endpoint=endpoint,
                    methods=None,
                    merge_slashes=False,
                    subdomain=state.subdomain,
                )
            )
        app.view_functions[endpoint] = deliver

    blueprint.record(register)
    return blueprint
