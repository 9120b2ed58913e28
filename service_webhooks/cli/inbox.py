"""``service-webhooks inbox list|show|replay|prune|serve``: what arrived, and running it again.

Every command reads the inbox beside an idempotency store (``--store URL`` or
``$SERVICE_WEBHOOKS_STORE``; default ``sqlite:service_webhooks.sqlite3``, the
receiver's own default), see :mod:`service_webhooks.inbox`. ``replay`` runs the
handlers of your receiver (``--receiver MODULE:ATTR``) on stored bodies, under the same
idempotency rules as a delivery. ``serve`` runs the web dashboard
(:mod:`service_webhooks.dashboard`) over it.

Exit code: 0 on success; 1 when a record is not found or a replay did not succeed
(not 2xx); 2 on a usage error.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import ipaddress
import os
import re
import secrets
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import click
from rich.table import Column

from service_webhooks import ConfigurationError, WebhookReceiver
from service_webhooks._extras import missing_extra
from service_webhooks._recording import NO_INBOX
from service_webhooks._storage_url import POSTGRES_SCHEMES, quoted_scheme, scheme_of, sqlite_path
from service_webhooks.inbox import (
    Inbox,
    InboxPage,
    InboxQuery,
    ReceivedDelivery,
    SyncInbox,
    inbox_from_url,
)
from service_webhooks.inbox.backend import DEFAULT_PAGE_SIZE, check_bounds
from service_webhooks.inbox.commands import (
    TABLE_COLUMNS,
    check_replay_selection,
    dry_run_line,
    find,
    json_line,
    replay_line,
    replay_selection,
    replay_total,
    selection,
    show_lines,
    table_row,
)
from service_webhooks.stores import redact_url

from ._output import cannot_open, echo_json, print_table
from ._output import console as make_console
from ._serve import bind, log_config, serve_until_stopped

__all__ = ["inbox"]

STORE_ENVVAR = "SERVICE_WEBHOOKS_STORE"
DEFAULT_STORE = "sqlite:service_webhooks.sqlite3"

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_ROOT_PATH = re.compile(r"(/[A-Za-z0-9._~-]+)+")  # serve --root-path: /a/b, no trailing /

store_option = click.option(
    "--store",
    default=DEFAULT_STORE,
    show_default=True,
    envvar=STORE_ENVVAR,
    show_envvar=True,
    metavar="URL",
    help="The store whose inbox to read: 'sqlite:PATH' (the same file) or 'postgresql://…'.",
)


def _open(store: str, *, create: bool = False, schema: bool = False) -> Inbox:
    """The inbox at ``store``; a missing SQLite file (unless ``create``: the dashboard
    may start before its receiver) or an unreachable database is an error (exit 1) that
    says why, never an empty inbox made on the spot, and so is a ``postgresql://`` URL
    without the ``postgres`` extra (the extra named). A store that keeps no inbox between
    processes (``memory``, ``sqlite::memory:``, Redis) is a usage error (exit 2).

    Only ``schema`` (``replay``) creates the inbox's table in an existing database. Else
    a database without it (another application's, e.g. a Django project's
    ``db.sqlite3``) is left as it is: an error (exit 1), or with ``create`` (``serve``)
    a note and an inbox shown empty until a receiver creates its table."""
    text = store.strip()
    scheme = scheme_of(text)
    try:
        path = sqlite_path(text, "inbox") if scheme == "sqlite" else None
        if scheme == "memory" or path == ":memory:":
            kept = "memory store" if scheme == "memory" else "in-memory SQLite database"
            raise click.BadParameter(
                f"the {kept} keeps no inbox: use sqlite:PATH or postgresql://…",
                param_hint="--store",
            )
        if scheme != "sqlite" and scheme not in POSTGRES_SCHEMES:  # not "use memory"
            raise click.BadParameter(
                f"no inbox for URL{quoted_scheme(text)}: use sqlite:PATH or postgresql://…",
                param_hint="--store",
            )
        if path is not None and not create and not os.path.exists(path):
            raise click.ClickException(
                f"no inbox at {path}: the file does not exist (pass the --store URL "
                "your receiver records into)"
            )
        inbox = inbox_from_url(store, create_schema=False)
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--store") from error
    except ImportError as error:  # postgresql:// without the postgres extra: its message
        raise cannot_open("inbox", store, error) from error
    if path is not None and not os.path.exists(path):
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):  # else every page would fail, one by one
            raise click.ClickException(
                f"cannot create the inbox at {path}: the directory {folder} does not exist"
            )
        return inbox  # serve: a new file, made with the table on the first page
    try:
        if scheme in POSTGRES_SCHEMES:
            from service_webhooks.inbox import PostgresInbox  # psycopg: installed, it opened

            if isinstance(inbox, PostgresInbox):
                inbox.ping()  # libpq's own reason at once, not the pool's timeout
                if schema:
                    inbox.create_schema()
        if schema or _has_table(inbox):
            return inbox
    except Exception as error:  # the database is unreachable, refused, or not one
        _close(inbox)
        raise cannot_open("inbox", store, error) from error
    where = path if path is not None else redact_url(text)
    table = getattr(inbox, "table", "inbox")
    if not create:
        _close(inbox)  # refused: nothing else would close it before the exit
        raise click.ClickException(
            f"no inbox in {where}: it has no {table} table (pass the --store URL your "
            "receiver records into; a Django project keeps its inbox in its own database "
            "table: see its admin)"
        )
    click.echo(
        f"note: {where} has no {table} table yet: the dashboard shows no delivery until "
        "a receiver records one there",
        err=True,
    )
    return _Unrecorded(inbox)


@contextlib.contextmanager
def _opened(store: str, *, schema: bool = False) -> Iterator[Inbox]:
    """:func:`_open`'s inbox, closed on leaving, an error included. Else a failing
    command's traceback kept it to the interpreter's exit, where Python 3.13 reports its
    connection still open (``ResourceWarning: unclosed database``)."""
    inbox = _open(store, schema=schema)
    try:
        yield inbox
    finally:
        _close(inbox)


def _close(inbox: Inbox) -> None:
    """Close ``inbox`` if it can be closed (SQLite and PostgreSQL inboxes)."""
    close = getattr(inbox, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):  # an error to report is on its way
            close()


def _has_table(inbox: Inbox) -> bool:
    """Whether the database of ``inbox`` has its table, asked without changing the
    database (SQLite and PostgreSQL inboxes can tell; any other is taken as ready)."""
    has_table = getattr(inbox, "has_table", None)
    return True if has_table is None else bool(has_table())


class _Unrecorded(SyncInbox):
    """``serve``'s inbox in a database without the inbox's table: empty, never creating
    the table, until a receiver has created it (asked again on each page)."""

    def __init__(self, inbox: Inbox) -> None:
        super().__init__()
        self._inbox = inbox
        self._made = False

    def _target(self) -> Inbox | None:
        self._made = self._made or _has_table(self._inbox)
        return self._inbox if self._made else None

    def get(self, delivery_id: str) -> ReceivedDelivery | None:
        inbox = self._target()
        return None if inbox is None else inbox.get(delivery_id)

    def search(
        self,
        query: InboxQuery | None = None,
        *,
        limit: int = DEFAULT_PAGE_SIZE,
        cursor: str | None = None,
    ) -> InboxPage:
        inbox = self._target()
        if inbox is None:
            return InboxPage((), None)
        return inbox.search(query, limit=limit, cursor=cursor)

    def counts(
        self, *, since: datetime.datetime | None = None, until: datetime.datetime | None = None
    ) -> dict[str, int]:
        inbox = self._target()
        return {} if inbox is None else inbox.counts(since=since, until=until)

    def slowest(
        self,
        *,
        limit: int = 10,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
    ) -> list[ReceivedDelivery]:
        inbox = self._target()
        return [] if inbox is None else inbox.slowest(limit=limit, since=since, until=until)


def parse_duration(text: str, hint: str) -> float:
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise click.BadParameter("a duration such as 30d, 12h or 90m", param_hint=hint)
    return float(match[1]) * _UNITS[match[2]]


def _query(
    statuses: Sequence[str], event: str | None, organization: str | None, since: str | None
) -> InboxQuery:
    """The filters as every inbox command reads them (a ``6xx`` is no reason); a bad
    one is a usage error (exit 2)."""
    try:
        return selection(statuses, event, organization, since)
    except ValueError as error:
        raise click.UsageError(str(error)) from None


def _find(inbox: Inbox, prefix: str) -> ReceivedDelivery:
    """The one record whose ID starts with ``prefix``: not hex is a usage error (exit 2),
    none or several an error (exit 1)."""
    try:
        return find(inbox, prefix)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    except LookupError as error:
        raise click.ClickException(str(error)) from None


@click.group()
def inbox() -> None:
    """Inspect the inbox of received deliveries, replay them, prune it."""


@inbox.command("list")
@store_option
@click.option(
    "--status",
    "statuses",
    multiple=True,
    metavar="S",
    help="A reason (processed, handler_failed, unhandled…) or a class (2xx, 4xx, 5xx); "
    "repeat for several reasons.",
)
@click.option("--event", default=None, help="Only this eventName.")
@click.option("--organization", default=None, help="Only this organization ID.")
@click.option("--since", default=None, metavar="WHEN", help="30m, 2h, 7d ago, or an ISO time.")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Most rows."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, newest first.")
def list_command(
    store: str,
    statuses: Sequence[str],
    event: str | None,
    organization: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List received deliveries, newest first."""
    query = _query(statuses, event, organization, since)
    with _opened(store) as source:
        page = source.search(query, limit=limit)
    if as_json:
        for record in page.items:
            echo_json(json_line(record))
        return
    columns: list[Column | str] = [
        Column(TABLE_COLUMNS[0], no_wrap=True),  # whole: its first digits are the time
        *TABLE_COLUMNS[1:],
    ]
    rows = [table_row(record) for record in page.items]
    print_table(make_console(), columns, rows, title="Received deliveries")


@inbox.command("show")
@store_option
@click.argument("delivery_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="The whole record as one JSON object.")
def show(store: str, delivery_id: str, as_json: bool) -> None:
    """Show one delivery: its answer, error, replays and payload (ID may be a prefix)."""
    with _opened(store) as source:
        record = _find(source, delivery_id)
    if as_json:
        echo_json(json_line(record, full=True))
        return
    click.echo("\n".join(show_lines(record)))


def _load_receiver(spec: str) -> WebhookReceiver:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise click.BadParameter(
            "MODULE:ATTR, e.g. myapp.webhooks:receiver", param_hint="--receiver"
        )
    sys.path.insert(0, ".")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as error:
        raise click.BadParameter(f"cannot load {spec}: {error}", param_hint="--receiver") from error
    finally:
        sys.path.remove(".")
    if not isinstance(target, WebhookReceiver):
        raise click.BadParameter(f"{spec} is not a WebhookReceiver", param_hint="--receiver")
    return target


@inbox.command("replay")
@store_option
@click.argument("delivery_ids", metavar="[ID]...", nargs=-1, required=False)
@click.option(
    "--status",
    "statuses",
    multiple=True,
    metavar="S",
    help="Replay every delivery answered with this reason or class (as in list); repeatable.",
)
@click.option("--since", default=None, metavar="WHEN", help="With --status: received since.")
@click.option(
    "--receiver",
    "receiver_spec",
    default=None,
    metavar="MODULE:ATTR",
    help="Your WebhookReceiver (its handlers, store and inbox), e.g. myapp.hooks:receiver; "
    "required unless --dry-run.",
)
@click.option("--force", is_flag=True, help="Run the handlers even of processed deliveries.")
@click.option("--dry-run", is_flag=True, help="Only print what would be replayed.")
def replay(
    store: str,
    delivery_ids: Sequence[str],
    statuses: Sequence[str],
    since: str | None,
    receiver_spec: str | None,
    force: bool,
    dry_run: bool,
) -> None:
    """Run the handlers again on stored deliveries: IDs, or a --status selection.

    The receiver must record into the same inbox (the one --store names); each replay
    is added to its record. A processed delivery is a duplicate unless --force.
    """
    try:
        check_replay_selection(delivery_ids, {"--status": statuses}, since)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    if receiver_spec is None and not dry_run:  # a dry run runs no handler: none needed
        raise click.UsageError("Missing option '--receiver' (required unless --dry-run).")
    with _opened(store, schema=True) as source:  # as the receiver it loads would
        if delivery_ids:
            records = [_find(source, delivery_id) for delivery_id in delivery_ids]
        else:
            records = replay_selection(source, _query(statuses, None, None, since))
    if dry_run:
        for record in records:
            click.echo(dry_run_line(record))
        click.echo(replay_total(len(records)), err=True)
        return
    assert receiver_spec is not None  # checked above
    receiver = _load_receiver(receiver_spec)
    if receiver.inbox is None:
        raise click.UsageError(f"{NO_INBOX}: nothing to replay")
    failed = missing = 0
    for record in records:
        try:
            outcome = receiver.replay(record.id, force=force)
        except KeyError:
            click.echo(f"{record.id}\tnot in the receiver's inbox", err=True)
            failed += 1
            missing += 1
            continue
        failed += not outcome.ok
        click.echo(replay_line(record, outcome))
    click.echo(replay_total(len(records), failed), err=True)
    if records and missing == len(records):  # not one: another inbox, not a prune
        click.echo(_other_inbox_hint(receiver_spec, store), err=True)
    if failed:
        sys.exit(1)


def _other_inbox_hint(receiver_spec: str, store: str) -> str:
    """What ``replay`` adds when none of the selected deliveries is in the receiver's
    inbox: the receiver records somewhere else than ``--store`` (a prune deletes a few
    of them, not every one), so no handler ran and retrying as it is changes nothing."""
    return (
        f"none of them is in the inbox of {receiver_spec}: it records into another inbox "
        f"than --store {redact_url(store.strip())}; pass the --store URL it records into "
        "(or load a receiver that records into this one)"
    )


@inbox.command("prune")
@store_option
@click.option(
    "--retention",
    default="30d",
    show_default=True,
    metavar="DURATION",
    help="Delete deliveries older than this (30d: the service's own audit log, spec §6.3).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Then delete the oldest until the total size (bodies and tracebacks) is at most this.",
)
@click.option("--all", "purge_all", is_flag=True, help="Delete every delivery (a purge).")
def prune(store: str, retention: str, max_bytes: int | None, purge_all: bool) -> None:
    """Delete old deliveries (by age, then by total size), or all of them."""
    seconds = parse_duration(retention, "--retention")
    try:  # 0d, or one past what a date holds (every prune would raise OverflowError)
        check_bounds(seconds, max_bytes)
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--retention") from None
    with _opened(store) as target:
        if purge_all:
            deleted = target.purge()
        else:
            target.retention = seconds
            target.max_bytes = max_bytes
            deleted = target.prune()
    click.echo(f"deleted {deleted} deliveries")


AUTH_ENVVAR = "SERVICE_WEBHOOKS_DASHBOARD_AUTH"
ORIGINS_ENVVAR = "SERVICE_WEBHOOKS_DASHBOARD_TRUSTED_ORIGINS"


def _bare_host(host: str) -> str:
    """``host`` without the brackets a URL puts around an IPv6 address (``[::1]``), which
    the loopback check accepted but no interface is named (the bind failed)."""
    host = host.strip()
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


@inbox.command("serve")
@store_option
@click.option(
    "--receiver",
    "receiver_spec",
    default=None,
    metavar="MODULE:ATTR",
    help="Your WebhookReceiver, to show a Replay button (it must record into this inbox).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8001, show_default=True)
@click.option(
    "--basic-auth",
    default=None,
    envvar=AUTH_ENVVAR,
    show_envvar=True,
    metavar="USER:PASSWORD",
    help="HTTP Basic credentials. Required with a --host other than loopback; without "
    "them a random password is made and printed.",
)
@click.option(
    "--title", default="Webhook inbox", show_default=True, help="Shown in the page header."
)
@click.option(
    "--root-path",
    default="",
    metavar="PATH",
    help="The path prefix a reverse proxy serves the dashboard under and strips "
    "(e.g. /webhooks/admin): its links and forms point below it.",
)
@click.option(
    "--trusted-origin",
    "trusted_origins",
    multiple=True,
    envvar=ORIGINS_ENVVAR,
    show_envvar=True,
    metavar="ORIGIN",
    help="The scheme://host[:port] browsers reach the dashboard at through a reverse "
    "proxy that rewrites the Host header (e.g. https://ops.example.com): replay forms "
    "from it are accepted. Repeatable; the variable takes several, separated by spaces.",
)
def serve(
    store: str,
    receiver_spec: str | None,
    host: str,
    port: int,
    basic_auth: str | None,
    title: str,
    root_path: str,
    trusted_origins: tuple[str, ...],
) -> None:
    """Serve the inbox dashboard (list, detail and replay, overview) over HTTP.

    Needs the 'dashboard' extra. Every request needs the Basic credentials; a host
    other than 127.0.0.1, ::1 or localhost is refused without --basic-auth.
    """
    given, host = host, _bare_host(host)  # [::1], as in a URL: the address itself binds
    if not basic_auth and not _is_loopback(host):
        raise click.UsageError(
            f"--host {given} is reachable from other machines: give credentials with "
            f"--basic-auth USER:PASSWORD (or ${AUTH_ENVVAR}), or listen on 127.0.0.1"
        )
    if basic_auth is not None:
        user, colon, password = basic_auth.partition(":")
        if not (user and colon and password):
            raise click.BadParameter("USER:PASSWORD, both non-empty", param_hint="--basic-auth")
        if user != user.strip() or password != password.strip():  # never shown: a password
            raise click.BadParameter(
                "USER:PASSWORD with whitespace around the user or the password (a newline "
                "read from a file?): a browser would never send it; strip it",
                param_hint="--basic-auth",
            )
    prefix = _root_path(root_path)
    try:
        import uvicorn

        from service_webhooks.dashboard import dashboard
        from service_webhooks.dashboard._origins import parse_trusted_origins
    except ImportError as error:
        missing = missing_extra(
            "dashboard", "jinja2", "starlette", what="the dashboard", cause=error
        )
        raise click.ClickException(str(missing)) from error
    try:
        origins = parse_trusted_origins(trusted_origins)
    except ConfigurationError as error:
        raise click.BadParameter(
            str(error).removeprefix("trusted origin "), param_hint="--trusted-origin"
        ) from error
    receiver = _load_receiver(receiver_spec) if receiver_spec else None
    if receiver is not None and receiver.inbox is None:
        raise click.UsageError(f"{NO_INBOX}: it cannot replay from the dashboard")
    inbox = _open(store, create=True)  # before a password is made for nothing
    try:  # before a password is made: a port in use is exit 1, port 0 is resolved
        sock = bind(host, port)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error}") from error
    port = sock.getsockname()[1]
    credentials = basic_auth
    if credentials is None:
        credentials = "admin:" + secrets.token_urlsafe(12)
        click.echo(f"no --basic-auth given: log in as {credentials}", err=True)
    app = dashboard(
        inbox,
        receiver=receiver,
        basic_auth=credentials,
        title=title,
        trusted_origins=origins,
    )
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"inbox dashboard on http://{shown}:{port}/ (Ctrl-C to stop)", err=True)
    if prefix:
        click.echo(f"its links point below {prefix}/ (your proxy strips it)", err=True)
    if origins:
        click.echo(f"replay forms are accepted from {', '.join(origins)} too", err=True)
    config = uvicorn.Config(
        app,
        log_config=log_config(level="WARNING"),
        log_level="warning",
        server_header=False,
        root_path=prefix,
    )
    serve_until_stopped(uvicorn.Server(config), sock)  # Ctrl-C or SIGTERM: exit 0


def _root_path(text: str) -> str:
    """``--root-path`` as the ASGI ``root_path``: ``""``, or ``/a/b`` (a leading slash,
    no trailing one); a full URL, a query or a character a URL path cannot hold as is is
    a usage error (exit 2)."""
    prefix = text.strip().rstrip("/")
    if not prefix:
        return ""
    if not prefix.startswith("/") or not _ROOT_PATH.fullmatch(prefix):
        raise click.BadParameter(
            "a URL path such as /webhooks/admin (letters, digits and - . _ ~ / only)",
            param_hint="--root-path",
        )
    return prefix
