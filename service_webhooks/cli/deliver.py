"""``service-webhooks trigger`` and ``deliver``: run events through the delivery emulator.

Both deliver exactly as the service does (:mod:`service_webhooks.delivery`): signed
POSTs with a new ``t`` per attempt, a 10 s deadline, the spec §7 classification,
retries from 1 to 10 minutes for 24 hours, the 1000/min throttle.

* ``trigger EVENT``: one event, its whole retry life, each attempt printed. Real time
  by default (a failing endpoint keeps the command running for up to 24 h); ``--fast``
  runs the queue on a virtual clock, so waiting between attempts takes no time.
* ``deliver --events FILE.jsonl``: a stream of events (one envelope per line, optionally
  with ``organizationId``, ``subcategory`` and ``id``), with ``--duplicates`` and
  ``--shuffle`` to test idempotency; prints a summary table and can write the audit
  log as JSON. One endpoint per organization and subcategory receives them, so every
  event has exactly one destination; each event not delivered is named.

Endpoints are configured for ``--payload-version`` (default 1, spec §9): events of
another version are not sent to them. ``segment.trend.alert`` needs a subcategory
(``--subcategory``, or the line's ``subcategory``). Tables become plain tab-separated
lines when stdout is not a terminal.

Like the service, both refuse reserved destinations (``localhost``, private networks);
pass ``--allow-private-destinations`` to deliver to a receiver on this machine.
Exit code: 0 when every event (and every duplicate) was delivered, 1 otherwise, 2 on
a usage error.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from service_webhooks import ConfigurationError, WebhookError
from service_webhooks.delivery import (
    AuditEntry,
    Clock,
    DeadEvent,
    Delivery,
    DeliveryState,
    Emulator,
    Endpoint,
    OutboundEvent,
    RateLimiter,
    Result,
    Sender,
    Summary,
    SystemClock,
    VirtualClock,
    sample_event_for,
)
from service_webhooks.delivery.classification import receiver_reason
from service_webhooks.delivery.endpoint import (
    DEFAULT_ORGANIZATION,
    SUBCATEGORY_EVENTS,
    check_organization_id,
    check_url,
)
from service_webhooks.stores import redact_url

from ._finite import FiniteRange
from ._json import json_option, strict_loads
from ._output import console as make_console
from ._output import literal, print_table
from ._secret import signing_secret_option
from ._stopping import SIGTERM_EXIT, cancel_on_sigterm
from ._tls import ca_file_option

__all__ = ["deliver", "trigger"]

_STYLES = {
    Result.SUCCESS: "green",
    Result.TEMPORARY_FAILURE: "yellow",
    Result.PERMANENT_FAILURE: "red",
}

_HINT = (
    "hint: the service never delivers to loopback or private addresses; "
    "pass --allow-private-destinations to reach a receiver on this machine"
)


def _common(function: Any) -> Any:
    options = [
        click.option("--url", required=True, help="Endpoint URL (http or https)."),
        signing_secret_option,
        click.option(
            "--allow-private-destinations",
            is_flag=True,
            help="Allow loopback/private targets (the service refuses them).",
        ),
        ca_file_option,
        click.option(
            "--timeout",
            type=FiniteRange(min=0, min_open=True),
            default=10.0,
            show_default=True,
            help="Seconds per attempt (the service uses 10).",
        ),
        click.option(
            "--payload-version",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Payload version the endpoint is configured for (spec §9); only "
            "events of this version are delivered to it.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _attempt_line(console: Console, entry: AuditEntry, queued_at: float) -> None:
    style = _STYLES[entry.result]
    reason = receiver_reason(entry.response)
    said = f" [bold]{literal(reason)}[/bold]" if reason else ""
    console.print(
        f"#{entry.attempt:<3} {_offset(entry.attempted_at - queued_at)} "
        f"[{style}]{entry.result.value:<17}[/{style}] {literal(entry.description)}{said} "
        f"[dim]({entry.duration * 1000:.0f} ms)[/dim]",
        highlight=False,
    )


@click.command()
@click.argument("event_name", metavar="EVENT")
@_common
@click.option("--data", "data_json", help="The event's data as JSON (default: a sample).")
@click.option("--org", default=DEFAULT_ORGANIZATION, show_default=True, help="Organization ID.")
@click.option(
    "--subcategory",
    help="Encoded subcategory of the subscription; required for segment.trend.alert.",
)
@click.option("--fast", is_flag=True, help="Virtual clock: no waiting between attempts.")
def trigger(
    event_name: str,
    url: str,
    secret: str,
    allow_private_destinations: bool,
    verify: ssl.SSLContext | bool,
    timeout: float,
    payload_version: int,
    data_json: str | None,
    org: str,
    subcategory: str | None,
    fast: bool,
) -> None:
    """Deliver one EVENT with the service's full retry life, printing each attempt.

    Each attempt line shows the result class, the status and, when the receiver is a
    service-webhooks receiver, its outcome (processed, duplicate, unhandled, ...).
    """
    console = make_console()
    if not event_name:
        raise click.BadParameter(
            "an event needs a non-empty eventName (spec §2.7)", param_hint="EVENT"
        )
    try:
        check_organization_id(org)
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--org") from error
    data = None if data_json is None else json_option(data_json, "--data")
    if event_name in SUBCATEGORY_EVENTS and not subcategory:
        raise click.UsageError(
            f"{event_name} needs --subcategory: the encoded subcategory value of the "
            "subscription (spec §2.6)"
        )
    try:
        endpoint = Endpoint(
            url,
            secret,
            {event_name},
            organization_id=org,
            subcategory=subcategory,
            payload_version=payload_version,
        )
        if data_json is None:
            event = sample_event_for(endpoint)
        else:
            event = OutboundEvent(
                event_name,
                data,
                org,
                version=payload_version,
                subcategory=subcategory,
            )
    except (WebhookError, ValueError) as error:
        raise click.UsageError(str(error)) from None
    clock: Clock = VirtualClock() if fast else SystemClock()
    console.print(
        f"[bold]{literal(event.name)}[/bold] v{event.version} {literal(event.id)} -> "
        f"{literal(redact_url(url))} "
        f"({len(event.body)} bytes)"
    )
    try:
        delivery = asyncio.run(
            _trigger(endpoint, event, clock, timeout, allow_private_destinations, verify, console)
        )
    except (KeyboardInterrupt, _Terminated) as stop:  # the attempts made are printed above
        make_console(stderr=True).print("[red]interrupted: not delivered[/red]")
        raise SystemExit(SIGTERM_EXIT if isinstance(stop, _Terminated) else 130) from None
    last = delivery.attempts[-1] if delivery.attempts else None
    verdicts = {
        DeliveryState.SUCCEEDED: "[green]delivered[/green]",
        DeliveryState.FAILED: "[red]permanent failure: not retried[/red]",
        DeliveryState.DEAD: "[red]dead: no success within 24 hours[/red]",
    }
    console.print(
        f"{verdicts.get(delivery.state, delivery.state.value)} after "
        f"{len(delivery.attempts)} attempt(s)"
    )
    if last is not None and "reserved address" in last.description:
        make_console(stderr=True).print(f"[dim]{_HINT}[/dim]")
    if delivery.state is not DeliveryState.SUCCEEDED:
        raise SystemExit(1)


async def _trigger(
    endpoint: Endpoint,
    event: OutboundEvent,
    clock: Clock,
    timeout: float,
    allow_private: bool,
    verify: ssl.SSLContext | bool,
    console: Console,
) -> Delivery:
    def report(entry: AuditEntry) -> None:
        _attempt_line(console, entry, queued_at)
        if not isinstance(clock, VirtualClock):  # real time: say how long the wait is
            _wait_line(delivery, clock.now(), queued_at)

    terminated = cancel_on_sigterm()
    async with Sender(
        deadline=timeout, allow_private_destinations=allow_private, verify=verify
    ) as sender:
        emulator = Emulator(sender, clock=clock, on_attempt=report)
        emulator.add_endpoint(endpoint)
        queued_at = clock.now()
        (delivery,) = emulator.publish(event)
        try:
            await emulator.run()
        except asyncio.CancelledError:
            if terminated:  # SIGTERM: stopped as by Ctrl-C
                raise _Terminated from None
            raise
    return delivery


class _Terminated(Exception):
    """``trigger`` stopped by SIGTERM."""


def _wait_line(delivery: Delivery, now: float, queued_at: float) -> None:
    """After a temporary failure, on stderr: when the next attempt starts (``trigger``
    in real time waits up to 10 minutes for it, for up to 24 hours in all)."""
    if delivery.state is not DeliveryState.RETRYING:
        return
    if delivery.retry_at is None:
        what = "no attempt fits before the 24 h deadline: the event dies then"
    else:
        wait = max(0.0, delivery.retry_at - now)
        what = f"next attempt at {_offset(delivery.retry_at - queued_at)}, in {wait:.0f} s"
    make_console(stderr=True).print(f"[dim]     {what} (Ctrl-C stops)[/dim]")


def _offset(seconds: float) -> str:
    """``+HH:MM:SS`` from the queueing of the event, as on the attempt lines."""
    hours, rest = divmod(int(seconds), 3600)
    return f"+{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _read_events(path: Path) -> list[tuple[int, OutboundEvent]]:
    """The file's events with their line numbers; a usage error names a bad line."""
    events: list[tuple[int, OutboundEvent]] = []
    try:
        content = path.read_bytes()
    except OSError as error:
        raise click.BadParameter(str(error), param_hint="--events") from None
    for number, raw in enumerate(content.splitlines(), 1):
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as error:
            raise click.BadParameter(
                f"line {number}: not UTF-8 ({error.reason} at byte {error.start})",
                param_hint="--events",
            ) from None
        if not line.strip():
            continue
        try:
            events.append((number, _event_of(strict_loads(line))))
        except (ValueError, WebhookError) as error:
            raise click.BadParameter(f"line {number}: {error}", param_hint="--events") from None
    return events


def _event_of(item: Any) -> OutboundEvent:
    """The event of one decoded line.

    Raises:
        ValueError, WebhookError: The line is not an event (the message says why).
    """
    if not isinstance(item, dict) or "eventName" not in item:
        raise ValueError("expected an object with eventName")
    name = item["eventName"]
    if not isinstance(name, str) or not name:
        raise ValueError("eventName must be a non-empty string")
    subcategory = item.get("subcategory")
    if name in SUBCATEGORY_EVENTS and not subcategory:
        raise ValueError(f"{name} needs a subcategory (spec §2.6)")
    options: dict[str, Any] = {}
    if item.get("id") is not None:
        options["id"] = str(item["id"])
    return OutboundEvent(
        name,
        item.get("data"),
        item.get("organizationId", DEFAULT_ORGANIZATION),
        version=item.get("version", 1),
        # A subcategory only narrows the event types that require one.
        subcategory=subcategory if name in SUBCATEGORY_EVENTS else None,
        **options,
    )


def _endpoints_for(
    events: list[tuple[int, OutboundEvent]],
    url: str,
    secret: str,
    payload_version: int,
) -> list[Endpoint]:
    """One endpoint per (organization, subcategory), in file order.

    Each event is received by exactly one of them: events of a type that needs a
    subcategory go to the endpoint of their subcategory, every other event to its
    organization's endpoint without one.
    """
    groups: dict[tuple[str, str | None], set[str]] = {}
    for _, event in events:
        groups.setdefault((event.organization_id, event.subcategory), set()).add(event.name)
    return [
        Endpoint(
            url,
            secret,
            names,
            organization_id=organization,
            subcategory=subcategory,
            payload_version=payload_version,
        )
        for (organization, subcategory), names in groups.items()
    ]


def _summary_rows(summary: Summary, events: int, undelivered: int) -> list[tuple[str, str]]:
    """The summary table: events (the file's lines) apart from deliveries (one per
    event sent, plus each injected duplicate) and attempts (the requests made)."""
    return [
        ("events", str(events)),
        ("events delivered", str(events - undelivered)),
        ("deliveries (incl. duplicates)", str(summary.deliveries)),
        ("duplicates injected", str(summary.duplicates)),
        ("deliveries succeeded", str(summary.delivered)),
        ("deliveries retried", str(summary.retried)),
        ("deliveries failed permanently", str(summary.failed)),
        ("deliveries dead", str(summary.dead)),
        ("attempts", str(summary.attempts)),
        ("p50 latency", f"{summary.p50_latency * 1000:.1f} ms"),
        ("p99 latency", f"{summary.p99_latency * 1000:.1f} ms"),
        ("failure notifications", str(summary.notifications)),
    ]


def _undelivered(
    events: list[tuple[int, OutboundEvent]], emulator: Emulator, payload_version: int
) -> list[tuple[int, OutboundEvent, str]]:
    """The events without a successful delivery, in file order, each with why."""
    by_event: dict[int, list[Delivery]] = {}
    for delivery in emulator.deliveries:
        by_event.setdefault(id(delivery.event), []).append(delivery)
    missing: list[tuple[int, OutboundEvent, str]] = []
    for number, event in events:
        deliveries = by_event.get(id(event), [])
        if any(d.state is DeliveryState.SUCCEEDED for d in deliveries):
            continue
        if not deliveries:
            why = (
                f"not sent: the endpoint is configured for payload version "
                f"{payload_version}, the event is version {event.version}"
            )
        else:
            last = deliveries[-1]
            detail = last.attempts[-1].description if last.attempts else "no attempt"
            why = f"{last.state.value}: {detail}"
        missing.append((number, event, why))
    return missing


def _failed_duplicates(
    events: list[tuple[int, OutboundEvent]],
    emulator: Emulator,
    missing: list[tuple[int, OutboundEvent, str]],
) -> list[tuple[int, OutboundEvent, str]]:
    """Deliveries that did not succeed although their event was delivered (an injected
    duplicate, or the original when only its duplicate succeeded), in file order."""
    lines = {id(event): number for number, event in events}
    undelivered = {id(event) for _, event, _ in missing}
    failed: list[tuple[int, OutboundEvent, str]] = []
    for delivery in emulator.deliveries:
        event = delivery.event
        if delivery.state is DeliveryState.SUCCEEDED or id(event) in undelivered:
            continue
        detail = delivery.attempts[-1].description if delivery.attempts else "no attempt"
        which = "duplicate" if delivery.duplicate else "first delivery"
        failed.append((lines[id(event)], event, f"{which} {delivery.state.value}: {detail}"))
    return sorted(failed, key=lambda item: item[0])


def _not_delivered_line(number: int, event: OutboundEvent, why: str) -> str:
    """``line N: name vV id ID: why`` as rich markup that prints every value as it is."""
    return (
        f"line {number}: {literal(event.name)} v{event.version} id {literal(event.id)}: "
        f"{literal(why)}"
    )


@click.command()
@_common
@click.option(
    "--events",
    "events_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON Lines: one envelope per line (+ optional organizationId, subcategory, id).",
)
@click.option(
    "--rate",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Deliveries per minute per subscription and per organization.",
)
@click.option(
    "--duplicates",
    type=FiniteRange(0, 1),
    default=0.0,
    show_default=True,
    help="Share of deliveries sent twice.",
)
@click.option("--shuffle", is_flag=True, help="Start due deliveries in random order.")
@click.option(
    "--audit-log",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write every attempt to this JSON file.",
)
@click.option("--fast", is_flag=True, help="Virtual clock: no waiting between retries.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Most attempts in flight at once (and connections open).",
)
@click.option("--seed", type=int, help="Seed for duplicates, shuffling and jitter.")
def deliver(
    url: str,
    secret: str,
    allow_private_destinations: bool,
    verify: ssl.SSLContext | bool,
    timeout: float,
    payload_version: int,
    events_file: Path,
    rate: int,
    duplicates: float,
    shuffle: bool,
    audit_log: Path | None,
    fast: bool,
    concurrency: int,
    seed: int | None,
) -> None:
    """Deliver a stream of events from a JSON Lines file and print a summary.

    Every event in the file (and every injected duplicate) must be delivered: the
    exit code is 0 only then, and each event or duplicate that was not is named
    (line, eventName, ID, why) on stderr. Ctrl-C stops it with the same report (and
    audit log) of the attempts made so far, and exit code 130.
    """
    console = make_console()
    try:
        check_url(url)  # even when the file holds no event
    except WebhookError as error:
        raise click.UsageError(str(error)) from None
    if audit_log is not None and not audit_log.parent.is_dir():
        # Checked before delivering, not found out after the run.
        raise click.BadParameter(f"{audit_log.parent} is not a directory", param_hint="--audit-log")
    events = _read_events(events_file)
    try:
        endpoints = _endpoints_for(events, url, secret, payload_version)
    except WebhookError as error:
        raise click.UsageError(str(error)) from None
    clock: Clock = VirtualClock() if fast else SystemClock()
    dead: list[DeadEvent] = []
    interrupted = False
    terminated: list[bool] = []

    async def run() -> Emulator:
        nonlocal interrupted, terminated
        terminated = cancel_on_sigterm()
        async with Sender(
            deadline=timeout,
            allow_private_destinations=allow_private_destinations,
            verify=verify,
            max_connections=concurrency,
        ) as sender:
            emulator = Emulator(
                sender,
                clock=clock,
                rate_limiter=RateLimiter(rate, 60.0),
                duplicates=duplicates,
                shuffle=shuffle,
                seed=seed,
                concurrency=concurrency,
                on_dead=dead.append,
            )
            for endpoint in endpoints:
                emulator.add_endpoint(endpoint)
            emulator.publish(event for _, event in events)
            try:
                await emulator.run()
            except asyncio.CancelledError:
                # Ctrl-C (asyncio.run cancels this task) or SIGTERM: the attempts in
                # flight were cancelled; report what was delivered so far, then exit
                # 130 (143 after SIGTERM).
                interrupted = True
            return emulator

    emulator = asyncio.run(run())
    summary = emulator.summary()
    missing = _undelivered(events, emulator, payload_version)
    rows = _summary_rows(summary, len(events), len(missing))
    print_table(console, ["metric", "value"], rows, title="Delivery summary")
    errors = make_console(stderr=True)
    if any("reserved address" in e.description for e in emulator.audit):
        errors.print(f"[dim]{_HINT}[/dim]")
    if audit_log is not None:
        try:
            audit_log.write_text(json.dumps(emulator.audit.to_json(), indent=1), encoding="utf-8")
        except OSError as error:
            raise click.ClickException(f"cannot write the audit log: {error}") from None
        console.print(f"audit log: {literal(audit_log)} ({summary.attempts} attempts)")
    if interrupted:
        errors.print("[red]interrupted: the summary above counts the attempts made so far[/red]")
    if missing:
        errors.print(f"[red]{len(missing)} of {len(events)} event(s) not delivered:[/red]")
        for number, event, why in missing:
            errors.print(_not_delivered_line(number, event, why))
    failed_twins = _failed_duplicates(events, emulator, missing)
    if failed_twins:
        # The event itself was delivered, but the receiver did not accept its duplicate
        # (it should answer 200, spec §6.1: duplicates can occur): say why the exit is 1.
        errors.print(
            f"[red]{len(failed_twins)} delivery(ies) of delivered events not "
            "delivered (duplicates the receiver did not accept):[/red]"
        )
        for number, event, why in failed_twins:
            errors.print(_not_delivered_line(number, event, why))
    if interrupted:  # as a shell reports a command stopped by SIGINT or SIGTERM
        raise SystemExit(SIGTERM_EXIT if terminated else 130)
    if missing or summary.delivered != summary.deliveries:
        raise SystemExit(1)
