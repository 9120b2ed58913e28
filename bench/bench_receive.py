"""Receive pipeline: median µs per delivery, ours vs a stdlib reference vs standardwebhooks.

Run from the repository root::

    .venv/bin/python bench/bench_receive.py            # 15 rounds
    .venv/bin/python bench/bench_receive.py --quick    # a fast smoke run
    .venv/bin/python bench/bench_receive.py --rounds 31

Three contenders handle the same bodies (a ``note.created`` envelope padded to 200 B,
10 KB and 1 MiB through its ``text`` field):

* **ours**: ``WebhookReceiver.process(body, header)`` with a ``MemoryStore``: verify the
  ``Service-Signature``, decode the envelope into the typed ``NoteCreated``, claim and
  complete the idempotency key, and dispatch to a handler that reads ``event.data.id``.
  Every outcome must be ``processed`` (each body is distinct: the note id varies, and
  every round uses a fresh store, so nothing is answered as a duplicate).
* **stdlib**: the minimal correct check written inline below: parse the header, HMAC,
  base64, ``compare_digest``, timestamp, ``json.loads``, read one field. No
  idempotency, no typed model.
* **standardwebhooks**: ``Webhook.verify`` (its own header and ``whsec_`` secret
  format; it also ``json.loads`` the body), then read one field.

Method: every round runs every contender over the same pre-built, pre-signed bodies,
in an order that rotates from round to round, so all three see the same machine noise.
A round's figure is its total time divided by the number of deliveries; the table shows
the median over rounds. Nothing is asserted about time: the targets are printed as met
or not.
"""

from __future__ import annotations

import argparse
import base64
import gc
import hashlib
import hmac
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

import msgspec
from bench_http import cpu_model
from standardwebhooks import Webhook

from service_webhooks import (
    MemoryStore,
    NoteCreated,
    WebhookReceiver,
    decode_envelope,
    default_idempotency_key,
)
from service_webhooks._signing import sign

SECRET = "bench-secret-0123456789abcdef0123456789abcdef"
ORG = "org-bench-1"
T = 1_700_000_000  # the receiver's clock is pinned here, so signatures stay valid
SW_SECRET = "whsec_" + base64.b64encode(SECRET.encode()).decode()

SIZES = (("200 B", 200), ("10 KB", 10_240), ("1 MiB", 1_048_576))
# distinct bodies per size and round: enough that a round lasts well above the timer's
# resolution, few enough that 1 MiB bodies stay in memory comfortably
COUNTS = {200: 4000, 10_240: 2000, 1_048_576: 24}
QUICK_COUNTS = {200: 500, 10_240: 300, 1_048_576: 6}

Item = tuple[bytes, str, dict[str, str]]
_SW = Webhook(SW_SECRET)  # body, Service-Signature, standardwebhooks headers


FILLERS = {
    # the note's text: one ASCII letter repeated (the fastest case for every JSON decoder)
    "ascii": b"x",
    # or prose with a non-ASCII letter and JSON escapes (\" and \n) in every sentence
    "prose": 'Call with Zo\u00eb about the renewal: she wants the \\"annual\\" plan.\\n'.encode(),
}
_filler = FILLERS["ascii"]


def make_body(size: int, index: int) -> bytes:
    """A ``note.created`` v1 envelope of exactly ``size`` bytes, distinct per ``index``."""
    head = (
        b'{"eventName":"note.created","version":1,"data":{"id":"note-%08d",'
        b'"author":"ada@example.com","text":"' % index
    )
    tail = b'"}}'
    room = size - len(head) - len(tail)
    if room < 0:
        raise ValueError(f"{size} bytes is too small for an envelope")
    whole = room // len(_filler)
    return head + _filler * whole + b"x" * (room - whole * len(_filler)) + tail


def build_items(size: int, count: int) -> list[Item]:
    items: list[Item] = []
    for index in range(count):
        body = make_body(size, index)
        items.append((body, sign(body, SECRET, ORG, timestamp=T), {}))
    sign_standardwebhooks(items)
    return items


def sign_standardwebhooks(items: list[Item]) -> None:
    """(Re)sign every body the standardwebhooks way; its clock cannot be pinned, so a
    long run re-signs before its 5-minute tolerance runs out."""
    now = datetime.now(tz=UTC)
    stamp = str(int(now.timestamp()))
    for index, (body, _, headers) in enumerate(items):
        msg_id = f"msg_{len(body)}_{index}"
        headers["webhook-id"] = msg_id
        headers["webhook-timestamp"] = stamp
        headers["webhook-signature"] = _SW.sign(msg_id, now, body.decode())


# -- (a) the minimal stdlib reference ------------------------------------------------

_KEY = SECRET.encode()


def stdlib_handler(data: dict[str, Any]) -> str:
    return data["id"]  # type: ignore[no-any-return]


def stdlib_receive(body: bytes, header: str) -> str:
    """The least a correct receiver does by hand (spec §5.2), then json.loads."""
    fields = dict(pair.split(":", 1) for pair in header.split(","))
    o, t = fields["o"], fields["t"]
    mac = hmac.new(_KEY, body, hashlib.sha256)
    mac.update(f":{o}:{t}".encode())
    if not hmac.compare_digest(mac.digest(), base64.b64decode(fields["v"])):
        raise ValueError("signature")
    if abs(T - int(t)) > 300:
        raise ValueError("timestamp")
    return stdlib_handler(json.loads(body)["data"])


# -- the three contenders: each runs one round over all items and returns the results --


def run_ours(items: list[Item]) -> tuple[float, list[Any]]:
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), clock=lambda: T)
    seen: list[str] = []
    record = seen.append

    @receiver.on("note.created")
    def handler(event: Any) -> None:
        record(event.data.id)

    process = receiver.process
    gc.collect()
    start = time.perf_counter()
    results = [process(body, header) for body, header, _ in items]
    elapsed = time.perf_counter() - start
    bad = [r for r in results if r.reason != "processed"]
    if bad or len(seen) != len(items):
        raise SystemExit(f"ours: expected every delivery processed, got {bad[:3]}")
    return elapsed, results


def run_stdlib(items: list[Item]) -> tuple[float, list[Any]]:
    gc.collect()
    start = time.perf_counter()
    results = [stdlib_receive(body, header) for body, header, _ in items]
    elapsed = time.perf_counter() - start
    if results[-1] != f"note-{len(items) - 1:08d}":
        raise SystemExit("stdlib: unexpected result")
    return elapsed, results


def run_sw(items: list[Item]) -> tuple[float, list[Any]]:
    verify = _SW.verify
    gc.collect()
    start = time.perf_counter()
    results = [verify(body, headers)["data"]["id"] for body, _, headers in items]
    elapsed = time.perf_counter() - start
    if results[-1] != f"note-{len(items) - 1:08d}":
        raise SystemExit("standardwebhooks: unexpected result")
    return elapsed, results


CONTENDERS: dict[str, Callable[[list[Item]], tuple[float, list[Any]]]] = {
    "ours": run_ours,
    "stdlib": run_stdlib,
    "standardwebhooks": run_sw,
}


# -- the 1 MiB breakdown --------------------------------------------------------------


class _NoteEnvelope(msgspec.Struct, frozen=True):
    """What a one-pass decode would use: the typed model inside the envelope."""

    eventName: str
    version: int
    data: NoteCreated


_one_pass_decoder = msgspec.json.Decoder(_NoteEnvelope)


def breakdown(items: list[Item], repeat: int) -> list[tuple[str, float]]:
    body, header, _ = items[0]
    key = SECRET.encode()
    suffix = f":{ORG}:{T}".encode()

    def hmac_alone() -> bytes:
        mac = hmac.new(key, body, hashlib.sha256)
        mac.update(suffix)
        return mac.digest()

    def one_pass() -> tuple[bytes, bytes]:
        # the proposal: HMAC by hand so the body is hashed once; the inner state after
        # the body (secret + body, no t) doubles as the idempotency key
        block = key.ljust(64, b"\0")
        inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        inner.update(body)
        idem = inner.copy().digest()
        inner.update(suffix)
        outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))
        outer.update(inner.digest())
        return outer.digest(), idem

    if one_pass()[0] != hmac_alone():
        raise SystemExit("one-pass HMAC disagrees with hmac.new")

    fresh = iter(make_body(len(body), 10_000_000 + i) for i in range(repeat * 4))
    signed = [(b, sign(b, SECRET, ORG, timestamp=T)) for b in fresh]

    def ours_with(key_function: Any) -> Callable[[], object]:
        receiver = WebhookReceiver(
            SECRET, store=MemoryStore(), clock=lambda: T, idempotency_key=key_function
        )
        receiver.on("note.created")(lambda event: event.data.id)
        pending = iter(signed)

        def run() -> object:
            b, h = next(pending)
            outcome = receiver.process(b, h)
            if outcome.reason != "processed":
                raise SystemExit(f"breakdown: {outcome}")
            return outcome

        return run

    parts: dict[str, Callable[[], object]] = {
        "ours, whole pipeline (default key)": ours_with(None),
        "ours, whole pipeline, idempotency_key=lambda e: e.data.id": ours_with(lambda e: e.data.id),
        "stdlib reference, whole": lambda: stdlib_receive(body, header),
        "HMAC-SHA256 over body + suffix alone": hmac_alone,
        "SHA-256 idempotency key alone (o + '\\n' + body)": lambda: default_idempotency_key(
            ORG, body
        ),
        "decode_envelope alone (msgspec: Raw envelope, then typed data)": lambda: decode_envelope(
            body
        ),
        "json.loads alone (the stdlib reference's decode)": lambda: json.loads(body),
        "proposal: HMAC + key in one pass (HMAC by hand)": one_pass,
        "proposal: typed envelope in one pass (msgspec)": lambda: _one_pass_decoder.decode(body),
    }
    samples: dict[str, list[float]] = {name: [] for name in parts}
    for _ in range(repeat):  # interleaved: one call of each per round
        for name, function in parts.items():
            start = time.perf_counter()
            function()
            samples[name].append(time.perf_counter() - start)
    return [(name, statistics.median(values) * 1e6) for name, values in samples.items()]


def allocation_check(size: int) -> tuple[int, int]:
    """Peak bytes allocated while ours handles one ``size`` body, and the size of the
    decoded ``text`` field (the one allocation the body legitimately causes)."""
    body = make_body(size, 20_000_000)
    header = sign(body, SECRET, ORG, timestamp=T)
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), clock=lambda: T)
    texts: list[int] = []
    receiver.on("note.created")(lambda event: texts.append(sys.getsizeof(event.data.text)))
    receiver.process(
        make_body(200, 20_000_001), sign(make_body(200, 20_000_001), SECRET, ORG, timestamp=T)
    )
    texts.clear()
    gc.collect()
    tracemalloc.start()
    outcome = receiver.process(body, header)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if outcome.reason != "processed":
        raise SystemExit(f"allocation check: {outcome}")
    return peak, texts[0]


# -- main -------------------------------------------------------------------------------


def machine() -> str:
    packages = ", ".join(
        f"{name} {version(name)}" for name in ("service-webhooks", "msgspec", "standardwebhooks")
    )
    return (
        f"{cpu_model()}, {os.cpu_count()} CPUs; Python {platform.python_version()} "
        f"({platform.python_implementation()}); {packages}; OpenSSL "
        f"{__import__('ssl').OPENSSL_VERSION.split()[1]}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--quick", action="store_true", help="few bodies and 5 rounds")
    parser.add_argument(
        "--text",
        choices=sorted(FILLERS),
        default="ascii",
        help="what fills the note's text up to the body size (default ascii)",
    )
    args = parser.parse_args(argv)
    global _filler
    _filler = FILLERS[args.text]
    rounds = 5 if args.quick and args.rounds == 15 else args.rounds
    counts = QUICK_COUNTS if args.quick else COUNTS

    print(f"machine: {machine()}")
    print(f"note text filler: {args.text} ({_filler.decode()!r} repeated)")
    print(
        f"rounds: {rounds} interleaved; bodies per size and round: "
        + ", ".join(f"{label} x{counts[size]}" for label, size in SIZES)
    )
    items = {size: build_items(size, counts[size]) for _, size in SIZES}
    signed_at = time.monotonic()

    names = list(CONTENDERS)
    samples: dict[tuple[int, str], list[float]] = {
        (size, name): [] for _, size in SIZES for name in names
    }
    for _, size in SIZES:  # one warm-up pass, not recorded
        for name in names:
            CONTENDERS[name](items[size][: max(2, counts[size] // 10)])
    for round_index in range(rounds):
        if time.monotonic() - signed_at > 180:
            for batch in items.values():
                sign_standardwebhooks(batch)
            signed_at = time.monotonic()
        order = names[round_index % 3 :] + names[: round_index % 3]
        for _, size in SIZES:
            for name in order:
                elapsed, results = CONTENDERS[name](items[size])
                del results
                samples[(size, name)].append(elapsed / len(items[size]) * 1e6)
        print(f"  round {round_index + 1}/{rounds} done", file=sys.stderr)

    print()
    header = (
        f"{'size':>6} | {'ours µs':>9} | {'stdlib µs':>9} | {'stdwh µs':>9} | "
        f"{'ours/stdlib':>11} | {'ours/stdwh':>10}"
    )
    print(header)
    print("-" * len(header))
    medians: dict[tuple[int, str], float] = {k: statistics.median(v) for k, v in samples.items()}
    for label, size in SIZES:
        ours, std, swh = (medians[(size, n)] for n in names)
        print(
            f"{label:>6} | {ours:9.2f} | {std:9.2f} | {swh:9.2f} | "
            f"{ours / std:11.2f} | {ours / swh:10.2f}"
        )
    print()
    print("Round-to-round spread of the ratios (min..max over rounds):")
    for label, size in SIZES:
        per_round_std = [
            o / s for o, s in zip(samples[(size, "ours")], samples[(size, "stdlib")], strict=True)
        ]
        per_round_sw = [
            o / s
            for o, s in zip(
                samples[(size, "ours")], samples[(size, "standardwebhooks")], strict=True
            )
        ]
        print(
            f"  {label:>6}: ours/stdlib {min(per_round_std):.2f}..{max(per_round_std):.2f}, "
            f"ours/stdwh {min(per_round_sw):.2f}..{max(per_round_sw):.2f}"
        )

    big = SIZES[-1][1]
    print()
    print("Breakdown at 1 MiB (median µs of single calls):")
    for name, value in breakdown(items[big], repeat=9 if args.quick else 41):
        print(f"  {value:9.1f}  {name}")
    peak, text_size = allocation_check(big)
    print(
        f"  allocation peak while ours handles one 1 MiB body: {peak / 1024:.0f} KiB, of which "
        f"{text_size / 1024:.0f} KiB is the decoded `text` str the handler receives "
        f"(a copy of the body would add another {big // 1024} KiB)"
    )

    print()
    print("Targets:")
    checks = [
        (
            "200 B: ours/standardwebhooks <= 1.0",
            medians[(200, "ours")] / medians[(200, "standardwebhooks")],
            1.0,
        ),
        (
            "10 KB: ours/standardwebhooks <= 1.0",
            medians[(10_240, "ours")] / medians[(10_240, "standardwebhooks")],
            1.0,
        ),
        ("1 MiB: ours/stdlib <= 0.6", medians[(big, "ours")] / medians[(big, "stdlib")], 0.6),
    ]
    for text, ratio, limit in checks:
        print(f"  {text}: {ratio:.2f} -> {'met' if ratio <= limit else 'NOT met'}")
    copied = peak - text_size > big // 2
    print(
        f"  1 MiB: body never copied: {'NOT met' if copied else 'met'} "
        f"(peak minus the decoded text: {(peak - text_size) / 1024:.0f} KiB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
