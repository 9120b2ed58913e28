"""``service-webhooks api ...``: read history and operations, cancel an operation (spec §4).

::

    export SERVICE_API_KEY=... SERVICE_API_BASE_URL=https://api.example.com
    service-webhooks api privacy-history --limit 50 --all --json
    service-webhooks api operations --state PENDING --type DELETE_USER
    service-webhooks api cancel op-123
    service-webhooks api serve-fake --port 8081   # a local fake of the API to try them on

``--state`` and ``--type`` accept any value (spec §9: the service may add states and
types); the known ones are offered by shell completion and listed in ``--help``.
Tables go to stdout (plain tab-separated lines when stdout is not a terminal), JSON
lines (one resource per line, the API's field names) with
``--json``; progress and hints go to stderr. Exit status 1 on an API error, 2 on a
usage error. Tests may put an ``httpx.BaseTransport`` under the key
``"api_transport"`` of ``ctx.obj`` (``CliRunner.invoke(..., obj={...})``) to talk to an
in-process fake instead of the network.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
import httpx
from click.shell_completion import CompletionItem
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn
from rich.table import Column

from service_webhooks import ConfigurationError, WebhookError
from service_webhooks._extras import missing_extra
from service_webhooks._reporting import printable
from service_webhooks.api import (
    APIStatusError,
    Client,
    Operation,
    OperationState,
    OperationType,
    ParameterError,
    PrivacySettingsVersion,
    is_never,
)
from service_webhooks.api.pagination import Page, Pager

from ._as_sent import LastResponse, json_lines
from ._finite import FiniteRange
from ._output import console, echo_json, print_table
from ._serve import bind, log_config, serve_until_stopped

__all__ = ["api"]

F = TypeVar("F", bound=Callable[..., Any])


def _connection_options(command: F) -> F:
    options = [
        click.option(
            "--api-key",
            envvar="SERVICE_API_KEY",
            show_envvar=True,
            required=True,
            help="API key, sent as 'Authorization: Basic <key>'.",
        ),
        click.option(
            "--base-url",
            envvar="SERVICE_API_BASE_URL",
            show_envvar=True,
            required=True,
            help="URL the API paths are relative to.",
        ),
        click.option(
            "--timeout",
            type=FiniteRange(min=0, min_open=True),
            default=10.0,
            show_default=True,
            help="Seconds to wait for each step of a request (connect, each read).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


_OPTIONS = {"base_url": "--base-url", "api_key": "--api-key"}
"""The client's arguments its errors name, and the options that give them."""


@contextlib.contextmanager
def _client(
    api_key: str, base_url: str, timeout: float, recorder: LastResponse | None = None
) -> Iterator[Client]:
    """A client, its API errors turned into exit statuses 1 and 2; with ``recorder``,
    every response passes through it (``--json`` prints the bodies as sent)."""
    obj = click.get_current_context().obj
    transport = obj.get("api_transport") if isinstance(obj, dict) else None
    if transport is not None and not isinstance(transport, httpx.BaseTransport):
        raise click.UsageError("ctx.obj['api_transport'] must be an httpx.BaseTransport")
    try:
        with Client(api_key, base_url=base_url, timeout=timeout, transport=transport) as client:
            if recorder is not None:  # the client's own httpx.Client: proxies, pool, retries
                client._http.event_hooks["response"].append(recorder)
            yield client
    except (ParameterError, ConfigurationError) as error:
        # Refused before any request (an empty --state, a base URL with a query...):
        # a usage error, exit status 2, like a --limit over 100; named by its option
        message = str(error)
        for argument, option in _OPTIONS.items():
            if message.startswith(argument + " "):
                reason = message.removeprefix(argument + " ")
                raise click.BadParameter(reason, param_hint=option) from error
        raise click.UsageError(message) from error
    except WebhookError as error:
        raise click.ClickException(_error_message(error)) from error


def _error_message(error: WebhookError) -> str:
    """The error's text, plus the service's ``Retry-After`` when it sent one."""
    if isinstance(error, APIStatusError) and error.retry_after is not None:
        return f"{error}; the service asks to retry after {error.retry_after:g} s"
    return str(error)


def _when(value: datetime) -> str:
    if is_never(value):
        return "never"
    with contextlib.suppress(OverflowError):  # an offset at the edge of year 1
        value = value.astimezone(UTC)  # the columns say UTC
    return value.strftime("%Y-%m-%d %H:%M")


def _paged(pager: Pager[Any, Any], what: str) -> Iterator[Page[Any]]:
    """The pages of ``pager``, with a progress line on stderr (on a terminal only)."""
    stderr = Console(stderr=True)
    if not stderr.is_terminal:  # rich would still end its (unshown) line: an empty line
        yield from pager.pages()
        return
    progress = Progress(
        SpinnerColumn(), TextColumn("{task.description}"), console=stderr, transient=True
    )
    with progress:
        task = progress.add_task(f"fetching {what}", total=None)
        count = 0
        for page in pager.pages():
            yield page
            count += len(page.items)
            progress.update(
                task, description=f"{pager.pages_fetched} pages, {count} {what} fetched"
            )


Rows = tuple[list[Column | str], list[list[str]]]


def _emit(
    pages: Iterable[Page[Any]],
    recorder: LastResponse | None,
    field: str,
    table: Callable[[list[Any]], Rows],
) -> None:
    """Print the resources of ``pages``: with ``recorder`` (``--json``), each as the
    service sent it in the array ``field`` of the page's body; else as a table.

    When a page fails, what was fetched before it is still printed (JSON lines as they
    come; the table of the rows fetched), then the error goes on (exit status 1)."""
    if recorder is not None:
        for page in pages:  # the recorder holds this page's response until the next
            for line in json_lines(page.items, recorder.response, field):
                echo_json(line)
        return
    items: list[Any] = []
    try:
        for page in pages:
            items.extend(page.items)
    except Exception:
        if items:
            print_table(console(), *table(items))
        raise
    print_table(console(), *table(items))


def _completer(known: type[OperationState] | type[OperationType]) -> Any:
    """Shell completion offering the values known today (others are accepted too)."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        return [CompletionItem(m.value) for m in known if m.value.startswith(incomplete.upper())]

    return complete


def _hint_next(token: str | None) -> None:
    """The option giving the next page, quoted for a shell (a token may hold ``&``,
    ``;`` or spaces) and with control characters escaped (a token from the service
    must not send terminal escapes)."""
    if token:
        shown = shlex.quote(printable(token))
        click.echo(f"more results: --pagination-token {shown} (or --all)", err=True)


def _cell(text: str) -> str:
    """A text of the service for one table cell: on one line (a tab or a line break
    becomes a space), other control characters (an ANSI escape) written as Python
    escapes, so a value from the API never splits a row nor drives the terminal."""
    return printable(" ".join(text.splitlines()).replace("\t", " "))


def _versions_table(versions: list[PrivacySettingsVersion]) -> Rows:
    columns: list[Column | str] = [
        Column("last updated (UTC)", no_wrap=True),
        Column("by", overflow="fold"),
        "blocks",
        "ajax watches",
        Column("privacy mode", overflow="fold"),
        "drop IPs",
    ]
    rows = [
        [
            _when(version.metadata.last_updated),
            _cell(version.metadata.last_updated_by),
            str(len(version.element_blocks)),
            str(len(version.ajax_watches)),
            _cell(version.default_privacy_mode),
            "yes" if version.discard_ip_addresses else "no",
        ]
        for version in versions
    ]
    return columns, rows


def _operations_table(operations: list[Operation]) -> Rows:
    columns: list[Column | str] = [
        Column("id", no_wrap=True),
        Column("type", no_wrap=True),
        "state",
        Column("created (UTC)", no_wrap=True),
        Column("finished (UTC)", no_wrap=True),
        "%",
        Column("error", overflow="fold"),
    ]
    rows = [
        [
            _cell(op.id),
            _cell(op.type),
            _cell(op.state),
            _when(op.created_at),
            _when(op.finished_at),
            f"{op.estimate_pct_complete:g}",
            _cell(op.error_details),
        ]
        for op in operations
    ]
    return columns, rows


@click.group()
def api() -> None:
    """Read privacy settings history and operations, cancel operations (the API)."""


@api.command("privacy-history")
@_connection_options
@click.option(
    "--limit", type=click.IntRange(1, 100), default=20, show_default=True, help="Versions per page."
)
@click.option("--all", "fetch_all", is_flag=True, help="Follow every page.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--pagination-token", default=None, help="Start from this page.")
def privacy_history(
    api_key: str,
    base_url: str,
    timeout: float,
    limit: int,
    fetch_all: bool,
    as_json: bool,
    pagination_token: str | None,
) -> None:
    """List privacy settings versions, most recent first."""
    recorder = LastResponse() if as_json else None
    with _client(api_key, base_url, timeout, recorder) as client:
        if fetch_all:
            pager = client.privacy_settings.iter_history(
                limit=limit, pagination_token=pagination_token
            )
            _emit(_paged(pager, "versions"), recorder, "versions", _versions_table)
            return
        page = client.privacy_settings.history(limit=limit, pagination_token=pagination_token)
        _emit([page], recorder, "versions", _versions_table)
        _hint_next(page.next_pagination_token)


@api.command("operations")
@_connection_options
@click.option(
    "--state",
    metavar="STATE",
    shell_complete=_completer(OperationState),
    help="Only operations in this state; known: "
    + ", ".join(s.value for s in OperationState)
    + " (others are passed on as given).",
)
@click.option(
    "--type",
    "type_",
    metavar="TYPE",
    shell_complete=_completer(OperationType),
    help="Only operations of this type; known: "
    + ", ".join(t.value for t in OperationType)
    + " (others are passed on as given).",
)
@click.option("--limit", type=click.IntRange(1, 100), default=None, help="Operations per page.")
@click.option("--all", "fetch_all", is_flag=True, help="Follow every page.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--pagination-token", default=None, help="Start from this page.")
def operations(
    api_key: str,
    base_url: str,
    timeout: float,
    state: str | None,
    type_: str | None,
    limit: int | None,
    fetch_all: bool,
    as_json: bool,
    pagination_token: str | None,
) -> None:
    """List operations, optionally filtered by state and type."""
    recorder = LastResponse() if as_json else None
    with _client(api_key, base_url, timeout, recorder) as client:
        if fetch_all:
            pager = client.operations.iter(
                state=state, type=type_, limit=limit, pagination_token=pagination_token
            )
            _emit(_paged(pager, "operations"), recorder, "operations", _operations_table)
            return
        page = client.operations.list(
            state=state, type=type_, limit=limit, pagination_token=pagination_token
        )
        _emit([page], recorder, "operations", _operations_table)
        _hint_next(page.next_pagination_token)


@api.command("cancel")
@_connection_options
@click.argument("operation_id", metavar="ID")
def cancel(api_key: str, base_url: str, timeout: float, operation_id: str) -> None:
    """Cancel the in-progress operation ID (only some operations are cancelable)."""
    with _client(api_key, base_url, timeout) as client:
        client.operations.cancel(operation_id)
    click.echo(f"cancelled {operation_id}")


@api.command("serve-fake")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8081,
    show_default=True,
    help="TCP port; 0 picks a free one.",
)
@click.option(
    "--api-key",
    default="test-key",
    show_default=True,
    help="The key the fake accepts ('Authorization: Basic <key>').",
)
def serve_fake(host: str, port: int, api_key: str) -> None:
    """Serve the in-memory fake of the API (service_webhooks.testing.fake_api) over HTTP.

    Its sample data has 42 privacy settings versions and 62 operations. It prints
    its base URL on stderr, then serves until Ctrl-C or SIGTERM (exit status 0).
    Needs the 'asgi' extra.

    \b
    Then, from another terminal:
      export SERVICE_API_KEY=test-key SERVICE_API_BASE_URL=http://127.0.0.1:8081
      service-webhooks api operations --state PENDING
    """
    import uvicorn

    try:
        from service_webhooks.testing.fake_api import FakeAPI
    except ImportError as error:
        missing = missing_extra("asgi", "starlette", what="the fake API", cause=error)
        raise click.ClickException(str(missing)) from error
    try:
        sock = bind(host, port)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error}") from error
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"fake API: serving on http://{shown}:{bound} (API key: {api_key})", err=True)
    config = uvicorn.Config(
        FakeAPI(api_key=api_key),
        lifespan="off",
        log_config=log_config(level="WARNING"),
        log_level="warning",
    )
    serve_until_stopped(uvicorn.Server(config), sock)
