"""Flask adapter: a blueprint bound to a receiver, and the ``init_app`` extension.

Read, call, write: the view hands the method, the headers and the WSGI input stream
(never ``request.data`` or ``request.form``: form parsing would empty them) to
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

from collections.abc import Callable, Mapping
from typing import Any

import click
import msgspec
from flask import Blueprint, Flask, Response, current_app, request
from flask.blueprints import BlueprintSetupState
from flask.cli import AppGroup
from werkzeug.routing import Rule
from werkzeug.wsgi import get_input_stream

from service_webhooks import SETTINGS, ConfigurationError, Outcome, Router, WebhookReceiver
from service_webhooks.inbox import Inbox
from service_webhooks.inbox.commands import every, find, record_line, selection, show_lines

__all__ = ["CONFIG_KEYS", "EXTENSION_KEY", "ServiceWebhooks", "cli", "webhook_blueprint"]

EXTENSION_KEY = "service_webhooks"
"""Where :meth:`ServiceWebhooks.init_app` keeps the app's receiver: ``app.extensions[KEY]``."""

CONFIG_KEYS: Mapping[str, str] = {f"SERVICE_WEBHOOKS_{key}": arg for key, arg in SETTINGS.items()}
"""``app.config`` key -> :class:`~service_webhooks.WebhookReceiver` argument. Only
``SERVICE_WEBHOOKS_SECRETS`` is required; ``SERVICE_WEBHOOKS_URL`` (default
``"/webhooks"``) is the rule the blueprint answers on."""


def webhook_blueprint(
    receiver: WebhookReceiver, *, url: str = "/webhooks", name: str = "service_webhooks"
) -> Blueprint:
    """A blueprint answering deliveries on ``url`` with ``receiver``.

    Every method reaches the view so the core answers 405 itself (spec §6.1: POST);
    ``url`` and ``url + "/"`` are both answered, never redirected (spec §7).

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
        app.cli.add_command(cli)

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
    bare = url.rstrip("/")

    def deliver() -> Response:
        receiver = get_receiver()
        limit = request.max_content_length  # Flask's own cap, when smaller: honour it
        stream = get_input_stream(request.environ)
        method = request.environ.get("REQUEST_METHOD", "")  # request.method is upper-cased
        outcome = receiver.handle(method, request.headers.items(), stream.read, max_body_size=limit)
        return _respond(outcome)

    def register(state: BlueprintSetupState) -> None:
        # werkzeug Rules with methods=None match every method (Flask's add_url_rule
        # would default to GET); one per spelling, so neither redirects to the other
        prefix = (state.url_prefix or "").rstrip("/")
        endpoint = f"{state.name_prefix}.{state.name}.deliver".lstrip(".")
        for path in (prefix + bare or "/", prefix + bare + "/"):
            state.app.url_map.add(Rule(path, endpoint=endpoint, methods=None))
        state.app.view_functions[endpoint] = deliver

    blueprint.record(register)
    return blueprint


def _respond(outcome: Outcome) -> Response:
    return current_app.response_class(
        outcome.body,
        status=outcome.status,
        headers=list(outcome.headers),
        content_type=outcome.content_type,
    )


# -- flask service-webhooks list|show|replay: the app receiver's inbox ---------------------

cli = AppGroup("service-webhooks", help="Received webhook deliveries: list, show, replay.")
"""The ``flask service-webhooks`` command group, added by :meth:`ServiceWebhooks.init_app`.

Every command reads the inbox of the app's receiver (``SERVICE_WEBHOOKS_INBOX``, see
:mod:`service_webhooks.inbox`); ``replay`` runs its handlers. Exit code 1 when a record
is not found or a replay did not succeed (not 2xx), 2 on a usage error."""

_status = click.option(
    "--status",
    "statuses",
    multiple=True,
    metavar="S",
    help="A reason (handler_failed, unhandled...) or a class (2xx, 4xx, 5xx); repeatable.",
)
_since = click.option("--since", metavar="WHEN", help="Received since: 30m, 2h, 7d or ISO time.")


def _inbox() -> tuple[WebhookReceiver, Inbox]:
    receiver = current_app.extensions.get(EXTENSION_KEY)
    if receiver is None:
        raise click.UsageError("ServiceWebhooks.init_app(app) was not called for this app")
    if receiver.inbox is None:
        raise click.UsageError("the app's receiver keeps no inbox (SERVICE_WEBHOOKS_INBOX)")
    return receiver, receiver.inbox


def _select(*filters: Any) -> Any:
    try:
        return selection(*filters)
    except ValueError as error:
        raise click.BadParameter(str(error)) from error


def _find(inbox: Inbox, prefix: str) -> Any:
    try:
        return find(inbox, prefix)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="ID") from error
    except LookupError as error:
        raise click.ClickException(str(error.args[0])) from error


@cli.command("list")
@_status
@click.option("--event", help="Only this eventName.")
@click.option("--organization", help="Only this organization ID.")
@_since
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_command(
    statuses: tuple[str, ...],
    event: str | None,
    organization: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List received deliveries, newest first (tab-separated)."""
    _, inbox = _inbox()
    page = inbox.search(_select(statuses, event, organization, since), limit=limit)
    for record in page.items:
        if as_json:
            fields = msgspec.structs.asdict(record)
            fields["body"] = record.body.decode("utf-8", "replace")
            click.echo(msgspec.json.encode(fields).decode())
        else:
            click.echo(record_line(record))


@cli.command("show")
@click.argument("delivery_id", metavar="ID")
def show_command(delivery_id: str) -> None:
    """Show one delivery (ID or a unique prefix): answer, error, replays, payload."""
    _, inbox = _inbox()
    click.echo("\n".join(show_lines(_find(inbox, delivery_id))))


@cli.command("replay")
@click.argument("delivery_ids", metavar="ID", nargs=-1)
@_status
@click.option("--event", help="Only this eventName.")
@click.option("--organization", help="Only this organization ID.")
@_since
@click.option("--force", is_flag=True, help="Run the handlers even of processed deliveries.")
@click.option("--dry-run", is_flag=True, help="Only print what would be replayed.")
def replay_command(
    delivery_ids: tuple[str, ...],
    statuses: tuple[str, ...],
    event: str | None,
    organization: str | None,
    since: str | None,
    force: bool,
    dry_run: bool,
) -> None:
    """Run the handlers again on deliveries: IDs, or a --status/--event selection."""
    receiver, inbox = _inbox()
    filters = (statuses, event, organization)
    if bool(delivery_ids) == any(filters):
        raise click.UsageError("give delivery IDs or filters (--status, --event...), not both")
    if delivery_ids:
        records = [_find(inbox, prefix) for prefix in delivery_ids]
    else:
        records = list(every(inbox, _select(*filters, since)))[::-1]  # arrival order
    failed = 0
    for record in records:
        if dry_run:
            click.echo(f"{record.id}\t{record.event_name or '-'}\t{record.reason}\twould replay")
            continue
        outcome = receiver.replay(record.id, force=force)
        failed += not outcome.ok
        click.echo(
            f"{record.id}\t{record.event_name or '-'}\t{record.reason} -> "
            f"{outcome.status} {outcome.reason}"
        )
    click.echo(f"{len(records)} {'would be replayed' if dry_run else 'replayed'}", err=True)
    if failed:
        raise click.ClickException(f"{failed} replay(s) did not succeed")
