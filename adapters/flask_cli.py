"""``flask service-webhooks list|show|replay``: the app receiver's inbox from Flask's CLI.

Added to the app by :meth:`~service_webhooks.adapters.flask.ServiceWebhooks.init_app`
(Flask's conventions: an ``AppGroup`` on ``app.cli``); see the inbox docs page. They
print what ``service-webhooks inbox list|show|replay`` prints when piped: the same table
lines, JSON objects and replay lines (:mod:`service_webhooks.inbox.commands`).
"""

from __future__ import annotations

from typing import Any

from service_webhooks import WebhookReceiver
from service_webhooks.inbox import Inbox, SQLiteInbox
from service_webhooks.inbox.commands import (
    check_replay_selection,
    dry_run_line,
    find,
    json_line,
    replay_line,
    replay_selection,
    replay_total,
    selection,
    show_lines,
    table_lines,
)

from . import require_extra

try:
    import click
    from flask import current_app
    from flask.cli import AppGroup
except ImportError:  # pragma: no cover - exercised only without the extra
    require_extra("flask", "flask", "werkzeug")
    raise

from .flask import EXTENSION_KEY

__all__ = ["cli"]


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
    inbox = receiver.inbox
    if isinstance(inbox, SQLiteInbox) and not inbox.path.exists():  # never made on the spot
        raise click.ClickException(
            f"no inbox at {inbox.path.absolute()}: the file does not exist (a relative "
            "sqlite: path is taken from the working directory: run the command where the "
            "app runs, or configure an absolute path)"
        )
    return receiver, inbox


def _select(*filters: Any) -> Any:
    """The query for the filters; a bad one is a usage error (exit 2), worded as by
    ``service-webhooks inbox``."""
    try:
        return selection(*filters)
    except ValueError as error:
        raise click.UsageError(str(error)) from None


def _find(inbox: Inbox, prefix: str) -> Any:
    try:
        return find(inbox, prefix)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    except LookupError as error:
        raise click.ClickException(str(error.args[0])) from error


@cli.command("list")
@_status
@click.option("--event", help="Only this eventName.")
@click.option("--organization", help="Only this organization ID.")
@_since
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, newest first.")
def list_command(
    statuses: tuple[str, ...],
    event: str | None,
    organization: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List received deliveries, newest first (a header line, then tab-separated rows)."""
    _, inbox = _inbox()
    page = inbox.search(_select(statuses, event, organization, since), limit=limit)
    lines = [json_line(record) for record in page.items] if as_json else table_lines(page.items)
    for line in lines:
        click.echo(line)


@cli.command("show")
@click.argument("delivery_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="The whole record as one JSON object.")
def show_command(delivery_id: str, as_json: bool) -> None:
    """Show one delivery (ID or a unique prefix): answer, error, replays, payload."""
    _, inbox = _inbox()
    record = _find(inbox, delivery_id)
    click.echo(json_line(record, full=True) if as_json else "\n".join(show_lines(record)))


@cli.command("replay")
@click.argument("delivery_ids", metavar="[ID]...", nargs=-1, required=False)
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
    filters = {"--status": statuses, "--event": event, "--organization": organization}
    try:
        check_replay_selection(delivery_ids, filters, since)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if delivery_ids:
        records = [_find(inbox, prefix) for prefix in delivery_ids]
    else:
        records = replay_selection(inbox, _select(statuses, event, organization, since))
    if dry_run:
        for record in records:
            click.echo(dry_run_line(record))
        click.echo(replay_total(len(records)), err=True)
        return
    failed = 0
    for record in records:
        try:
            outcome = receiver.replay(record.id, force=force)
        except KeyError:  # pruned since it was selected
            click.echo(f"{record.id}\tnot in the receiver's inbox", err=True)
            failed += 1
            continue
        failed += not outcome.ok
        click.echo(replay_line(record, outcome))
    click.echo(replay_total(len(records), failed), err=True)
    if failed:
        raise click.ClickException(f"{failed} replay(s) did not succeed")
