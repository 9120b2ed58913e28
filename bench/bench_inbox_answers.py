"""What each kind of answer costs with the SQLite inbox on: processed deliveries, then
the same deliveries again (duplicates), in one process, 32 in flight.

Run from the repository root::

    .venv/bin/python bench/bench_inbox_answers.py            # 5 rounds of 4,000 bodies
    .venv/bin/python bench/bench_inbox_answers.py --quick    # 1 round of 1,000

Contenders, each a ``WebhookReceiver`` on a ``SQLiteStore`` in a fresh file with an
async handler reading ``event.data.id``, driven through ``aprocess`` by 32 tasks (no
HTTP server: this measures the receiver, the store and the inbox alone):

* ``off``: ``inbox=False``;
* ``on``: the default SQLite inbox in the store's file.

Each round runs both, in an order that alternates, over the same 1 KB bodies: first every
body once (answered ``processed``), then every body again (answered ``duplicate``). The
result is the CPU time of this process per delivery for each phase (medians over
rounds) and the per-round ratio on/off. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_http import SECRET, T, cpu_model, make_body

from service_webhooks import SQLiteStore, WebhookReceiver, sign

ORG = "org-bench-1"
IN_FLIGHT = 32
PHASES = ("processed", "duplicate")


async def run(inbox: bool, bodies: list[tuple[bytes, str]], place: Path) -> dict[str, float]:
    """CPU µs per delivery of each phase for one receiver on a fresh file."""
    store = SQLiteStore(place)
    receiver = WebhookReceiver(SECRET, store=store, clock=lambda: T, inbox=None if inbox else False)

    @receiver.on("note.created")
    async def note_created(event: Any) -> None:
        _ = event.data.id

    async def deliver(share: list[tuple[bytes, str]], expected: str) -> None:
        for body, signature in share:
            outcome = await receiver.aprocess(
                body, signature, content_type="application/json", user_agent="bench"
            )
            if outcome.reason != expected:
                raise SystemExit(f"expected {expected}, got {outcome}")

    cpu: dict[str, float] = {}
    for phase in PHASES:
        started = time.process_time()
        await asyncio.gather(*(deliver(bodies[i::IN_FLIGHT], phase) for i in range(IN_FLIGHT)))
        cpu[phase] = (time.process_time() - started) / len(bodies) * 1e6
    store.close()
    return cpu


def machine() -> str:
    return (
        f"{cpu_model()}, {os.cpu_count()} CPUs; Python {platform.python_version()}; "
        f"SQLite {sqlite3.sqlite_version}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (5)")
    parser.add_argument("--bodies", type=int, default=4000, help="distinct bodies (4000)")
    parser.add_argument("--quick", action="store_true", help="1 round of 1,000 bodies")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.bodies = 1, 1000
    print(f"machine: {machine()}")
    print(f"{args.rounds} rounds, {args.bodies} bodies of about 1 KB, {IN_FLIGHT} in flight")
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="bench_inbox_answers_") as temporary:
        for round_index in range(args.rounds):
            bodies = [make_body(round_index * 10_000_000 + index) for index in range(args.bodies)]
            signed = [(body, sign(body, SECRET, ORG, timestamp=T)) for body in bodies]
            order = (False, True) if round_index % 2 == 0 else (True, False)
            for inbox in order:
                place = Path(temporary) / f"{round_index}-{'on' if inbox else 'off'}.sqlite3"
                results[inbox].append(asyncio.run(run(inbox, signed, place)))
            print(
                f"  round {round_index + 1}: "
                + ", ".join(
                    f"{phase} off {results[False][-1][phase]:.0f} on {results[True][-1][phase]:.0f}"
                    for phase in PHASES
                )
                + " µs CPU per delivery",
                file=sys.stderr,
            )
    print()
    print(f"{'answer':>10} | {'off µs':>7} | {'on µs':>7} | on/off (per round: median, min..max)")
    for phase in PHASES:
        off = statistics.median(r[phase] for r in results[False])
        on = statistics.median(r[phase] for r in results[True])
        ratios = [b[phase] / a[phase] for a, b in zip(results[False], results[True], strict=True)]
        print(
            f"{phase:>10} | {off:7.0f} | {on:7.0f} | {statistics.median(ratios):.2f}"
            f" ({min(ratios):.2f}..{max(ratios):.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
