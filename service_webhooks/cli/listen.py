"""``service-webhooks listen``: a development receiver that prints every event it processes.

It runs the real pipeline (:class:`~service_webhooks.WebhookReceiver` behind
:class:`~service_webhooks.adapters.asgi.WebhookMiddleware`, served by uvicorn), so a
delivery is authenticated (spec §5.2), decoded (spec §2.7), deduplicated and answered
with the status the service expects (spec §7). One catch-all handler prints each
processed event on stdout: a readable line by default, or with ``--json`` exactly one
JSON object per line, flushed at once::

    {"eventName": "note.created", "version": 1, "organizationId": "o-1", "data": {...}}

A duplicate (same organization and body) is answered 200 without running the handler,
so it prints nothing. Everything else (where it listens, uvicorn's logs, the receiver's
one line per request) goes to stderr, so stdout can be piped to ``jq``.

When nothing reads stdout any more (``listen --json | jq`` and jq exits), ``listen``
stops as a command in a pipeline does, rather than answering every later delivery
without printing it: the delivery it could not print is answered 500
(``handler_failed``, so the service retries it), the requests in progress are
answered, and it exits with status 1.
"""

from __future__ import annotations

import datetime
import errno
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import click
import msgspec
from rich.console import Console

from service_webhooks import (
    DEFAULT_TOLERANCE,
    ConfigurationError,
    Event,
    Handler,
    WebhookReceiver,
)
from service_webhooks._reporting import printable
from service_webhooks._storage_url import POSTGRES_SCHEMES, scheme_of
from service_webhooks.adapters.asgi import (
    ASGIApp,
    Message,
    Receive,
    Scope,
    Send,
    WebhookApp,
    WebhookMiddleware,
)
from service_webhooks.stores import redact_url, store_from_url

from ._finite import FiniteRange
from ._output import cannot_open
from ._secret import SECRET_ENVVAR, checked_secrets
from ._serve import bind as _bind
from ._serve import log_config, serve_until_stopped

__all__ = ["listen"]

_SUMMARY_WIDTH = 100  # characters of compact JSON shown per event in readable mode


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="TCP port; 0 picks a free one (printed on stderr).",
)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    envvar=SECRET_ENVVAR,
    show_envvar=True,
    callback=checked_secrets,
    help="Signing secret; repeat for rotation, newest first (spec §5.2). "
    "The environment variable may hold several, separated by spaces.",
)
@click.option(
    "--path",
    default="/webhooks",
    show_default=True,
    help="Request path deliveries are POSTed to; other paths answer 404.",
)
@click.option(
    "--store",
    default="memory",
    show_default=True,
    metavar="URL",
    help="Idempotency store: 'memory' (the default here) forgets processed events on "
    "restart; 'sqlite:PATH' keeps them in a file; 'redis://…' or 'postgresql://…' share "
    "them between processes (the redis / postgres extras).",
)
@click.option(
    "--inbox/--no-inbox",
    "keep_inbox",
    default=True,
    show_default=True,
    help="Record every authenticated delivery in the inbox beside a 'sqlite:' or "
    "'postgresql://' store (see `service-webhooks inbox list`); the memory and Redis "
    "stores keep none.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object per event on stdout "
    '({"eventName", "version", "organizationId", "data"}).',
)
@click.option(
    "--tolerance",
    type=FiniteRange(min=0),
    default=float(DEFAULT_TOLERANCE),
    show_default=True,
    help="Largest accepted difference between the signature's t and now, in seconds.",
)
def listen(
    host: str,
    port: int,
    secrets: Sequence[str],
    path: str,
    store: str,
    keep_inbox: bool,
    as_json: bool,
    tolerance: float,
) -> None:
    """Run a development receiver and print each event it processes.

    Deliveries are verified, deduplicated and answered exactly as in production
    (200 processed or duplicate, 401 bad signature or old timestamp, 400 malformed
    envelope, 413 too large). Stop it with Ctrl-C or SIGTERM: requests in progress
    are answered, then it exits with status 0.

    \b
    Try it from another terminal:
      service-webhooks send http://127.0.0.1:8000/webhooks --secret S --org o-1 \\
        --allow-private-destinations --event note.created \\
        --data '{"id": "n-1", "author": "a@b.c", "text": "hi"}'
    """
    import uvicorn  # deferred: `service-webhooks --help` stays fast

    if not secrets:
        raise click.UsageError(f"no signing secret: pass --secret S or set {SECRET_ENVVAR}")
    if not path.startswith("/"):
        raise click.BadParameter("must start with '/'", param_hint="--path")
    try:
        scheme = scheme_of(store.strip())
        inbox = keep_inbox and (scheme == "sqlite" or scheme in POSTGRES_SCHEMES)
        if scheme != "memory":  # a server to reach, or a file to open
            _reachable(store)
        receiver = WebhookReceiver(list(secrets), store=store, tolerance=tolerance, inbox=inbox)
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--store") from error
    except Exception as error:  # the server is down, or refused the login
        raise cannot_open("store", store, error) from error
    output = _Stdout()
    receiver.on_any(_json_printer(output) if as_json else _readable_printer(output))
    app = WebhookMiddleware(_not_found(path, receiver), receiver=receiver, path=path)

    try:
        sock = _bind(host, port)
    except OSError as error:
        raise click.ClickException(f"cannot listen on {host}:{port}: {error}") from error
    bound_port: int = sock.getsockname()[1]
    url = f"http://{_url_host(host)}:{bound_port}{path}"
    click.echo(f"service-webhooks: listening on {url} (store: {redact_url(store)})", err=True)
    click.echo(
        f"service-webhooks: try: service-webhooks send {url} --secret ... --org o-1 "
        "--allow-private-destinations "
        '--event note.created --data \'{"id": "n-1", "author": "a@b.c", "text": "hi"}\'',
        err=True,
    )
    config = uvicorn.Config(
        app,
        lifespan="on",  # its shutdown closes the receiver's connections (not a forced one)
        log_config=log_config(),
        access_log=True,
        server_header=False,
    )
    server = uvicorn.Server(config)
    output.on_close = lambda: setattr(server, "should_exit", True)
    serve_until_stopped(server, sock)
    if output.closed:
        raise SystemExit(1)


def _reachable(store: str) -> None:
    """Connect to a Redis or PostgreSQL store once, or open a SQLite store's file, so
    that a wrong URL or path stops ``listen`` at once with the reason, not as a 503 on
    every delivery."""
    probe = store_from_url(store)
    ping, close = getattr(probe, "ping", None), getattr(probe, "close", None)
    try:
        if ping is not None:
            ping()
    finally:
        if close is not None:
            close()


class _Stdout:
    """Where the printers write: stdout, until nothing reads it any more.

    The first write that finds the pipe closed says so on stderr, calls
    :attr:`on_close` (which stops the server) and sends stdout to ``os.devnull``, so
    that the process's exit does not fail flushing it; the write's error propagates,
    so the delivery it could not print is answered 500 and retried by the service.
    """

    def __init__(self) -> None:
        self.closed = False
        self.on_close: Callable[[], None] = lambda: None

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around each write and flush of an event's line; once stdout is closed, the
        line is not written (stopping: not printed, so not processed)."""
        if self.closed:
            raise _broken_pipe()
        try:
            yield
        except BrokenPipeError:
            if not self.closed:
                self.closed = True
                click.echo(
                    "service-webhooks: stdout was closed (nothing reads the events any "
                    "more): stopping; a delivery not printed is answered 500, so the "
                    "service retries it",
                    err=True,
                )
                with suppress(OSError):  # io.UnsupportedOperation: stdout has no file
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, sys.stdout.fileno())
                    os.close(devnull)
                self.on_close()
            raise


class _PipeConsole(Console):
    """A rich console that raises ``BrokenPipeError`` (rich's own exits the process
    with ``SystemExit``, which uvicorn answers 500 without a record and after which
    every event is processed without being printed)."""

    def on_broken_pipe(self) -> None:
        raise _broken_pipe() from None


def _broken_pipe() -> BrokenPipeError:
    return BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def _json_printer(output: _Stdout) -> Handler:
    """A catch-all handler writing one JSON object per event on stdout, flushed."""
    encoder = msgspec.json.Encoder()

    async def print_json(event: Event[Any]) -> None:
        line = encoder.encode(
            {
                "eventName": event.name,
                "version": event.version,
                "organizationId": event.organization_id,
                "data": msgspec.to_builtins(event.data),
            }
        )
        with output.writing():
            sys.stdout.buffer.write(line + b"\n")
            sys.stdout.buffer.flush()

    return print_json


def _readable_printer(output: _Stdout) -> Handler:
    """A catch-all handler printing ``time  org  event vN  {compact data}`` with rich."""
    from rich.text import Text

    console = _PipeConsole(file=sys.stdout, soft_wrap=True, highlight=False)

    async def print_readable(event: Event[Any]) -> None:
        summary = printable(msgspec.json.encode(msgspec.to_builtins(event.data)).decode())
        if len(summary) > _SUMMARY_WIDTH:
            summary = summary[: _SUMMARY_WIDTH - 1] + "…"
        now = datetime.datetime.now().strftime("%H:%M:%S")
        line = Text.assemble(
            (now, "dim"),
            "  ",
            (printable(event.organization_id), "cyan"),
            "  ",
            (printable(event.name), "bold green"),  # a newline or ESC must not forge a line
            (f" v{event.version}", "green"),
            "  ",
            summary,
        )
        with output.writing():
            console.print(line)
            console.file.flush()

    return print_readable


def _not_found(path: str, receiver: WebhookReceiver) -> ASGIApp:
    """The app behind the middleware: every other path answers 404 with a hint. Its
    lifespan is ``WebhookApp``'s: the shutdown closes what the receiver's store and
    inbox opened, in the server's event loop (else a reference cycle kept the SQLite
    connections to the interpreter's exit, where Python 3.13 reports them open, and a
    Redis store's asyncio client was never closed)."""
    body = f"not found: deliveries are POSTed to {path}\n".encode()
    lifespan = WebhookApp(receiver)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        start: Message = {
            "type": "http.response.start",
            "status": 404,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
        await send(start)
        await send({"type": "http.response.body", "body": body})

    return app


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
