"""Speed targets, micro part: the receive pipeline and ``verify`` against other verifiers.

Run from the repository root (``bench/run.py`` runs this and the HTTP part together)::

    .venv/bin/python bench/speed_micro.py            # 31 interleaved rounds
    .venv/bin/python bench/speed_micro.py --quick    # 7 rounds, fewer bodies

Contenders, all on the same pre-built bodies, each body signed in every contender's own
scheme so each one verifies a valid delivery:

* **ours**: ``WebhookReceiver.process(body, header)`` with a fresh ``MemoryStore`` per
  round: verify ``Service-Signature``, decode the envelope, claim the idempotency key,
  dispatch to a handler that reads the data's id, complete the key. Every outcome must
  be ``processed``.
* **standardwebhooks**: ``Webhook.verify(body, headers)`` (HMAC + ``json.loads``), then
  the data's id.
* **svix**: ``svix.webhooks.Webhook.verify(body, headers)`` (same scheme; it returns
  nothing), then ``json.loads`` and the id.
* **stdlib**: the minimal hand-written check below (``hmac`` + ``hashlib`` + ``base64`` +
  ``json``), then the id.

and, for ``verify`` alone at 200 B: ``service_webhooks.verify`` (with a prepared
resolver) against stripe's ``WebhookSignature.verify_header``.

Bodies: 200 B, 10 KB and 1 MiB, each as two envelopes: ``order.created`` (no model in
the library: ``data`` decodes to a ``dict``) and the typed ``note.created``. Every body
is distinct (the id varies) so the idempotency store never answers "duplicate".

Method: every round runs every contender over the whole batch of one (size, envelope)
in an order that rotates from round to round; a round's figure is its batch time over
the batch size. Ratios are **medians of per-round paired ratios** (ours / baseline of
the same round). The floor is measured in the same rounds: HMAC-SHA256 over the body
plus an untyped ``msgspec.json`` decode, and the same with ``json.loads``; no
pipeline can beat it by more than running its hashes at once. The keyed floor adds the
default idempotency key (SHA-256 of ``o + "\\n" + body``), which a receiver that
deduplicates by the body must hash too. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import base64
import gc
import hashlib
import hmac
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import standardwebhooks
import stripe
import svix.webhooks

import service_webhooks
from service_webhooks import MemoryStore, WebhookReceiver, as_resolver, sign

SECRET = "bench-secret-0123456789abcdef0123456789abcdef"
ORG = "org-bench-1"
T = 1_700_000_000  # our receiver's clock is pinned here, so our signatures stay valid
NOW = T + 0.5  # the pinned reading: a float with a fraction, as time.time() gives
WHSEC = "whsec_" + base64.b64encode(SECRET.encode()).decode()  # standardwebhooks / svix
STRIPE_SECRET = "whsec_" + SECRET  # stripe uses the secret string as the HMAC key

SIZES = (("200 B", 200), ("10 KB", 10_240), ("1 MiB", 1_048_576))
KINDS = ("order.created", "note.created")
COUNTS = {200: 4000, 10_240: 1500, 1_048_576: 16}
QUICK_COUNTS = {200: 1000, 10_240: 300, 1_048_576: 4}
CONTENDERS = (
    "ours",
    "standardwebhooks",
    "svix",
    "stdlib",
    "floor-msgspec",
    "floor-json",
    "floor-keyed",
)
RESIGN_AFTER = 150.0  # seconds; the baselines check time.time() with a 300 s tolerance


# -- bodies -----------------------------------------------------------------------------


def make_body(kind: str, size: int, index: int) -> bytes:
    """An envelope of exactly ``size`` bytes, distinct per ``index``, padded by a text field.

    ``order.created`` has no model in the library (its ``data`` decodes to a ``dict``);
    ``note.created`` decodes to the typed ``NoteCreated``.
    """
    if kind == "order.created":
        head = (
            b'{"eventName":"order.created","version":1,"data":{"id":"order-%08d",'
            b'"customer":"cus-42","total":1999,"currency":"EUR","comment":"' % index
        )
    else:
        head = (
            b'{"eventName":"note.created","version":1,"data":{"id":"note-%08d",'
            b'"author":"ada@example.com","text":"' % index
        )
    tail = b'"}}'
    room = size - len(head) - len(tail)
    if room < 0:
        raise ValueError(f"{size} bytes is too small for an envelope")
    return head + b"x" * room + tail


@dataclass
class Item:
    body: bytes
    ours: str  # Service-Signature
    expected_id: str
    webhook: dict[str, str] = field(default_factory=dict)  # standardwebhooks' headers
    svix: dict[str, str] = field(default_factory=dict)
    stripe: str = ""


_SW = standardwebhooks.Webhook(WHSEC)
_SVIX = svix.webhooks.Webhook(WHSEC)


def build(kind: str, size: int, count: int) -> list[Item]:
    items = []
    for index in range(count):
        body = make_body(kind, size, index)
        expected = (b"order-%08d" if kind == "order.created" else b"note-%08d") % index
        items.append(Item(body, sign(body, SECRET, ORG, timestamp=T), expected.decode()))
    resign(items)
    return items


def resign(items: list[Item]) -> None:
    """Sign every body in the baselines' own schemes at the current time (their clocks
    cannot be pinned; a long run re-signs before their 5-minute tolerance runs out)."""
    now = datetime.now(tz=UTC)
    stamp = str(int(now.timestamp()))
    stripe_key = STRIPE_SECRET.encode()
    for index, item in enumerate(items):
        msg_id = f"msg_{len(item.body)}_{index}"
        text = item.body.decode()
        item.webhook = {
            "webhook-id": msg_id,
            "webhook-timestamp": stamp,
            "webhook-signature": _SW.sign(msg_id, now, text),
        }
        item.svix = {
            "svix-id": msg_id,
            "svix-timestamp": stamp,
            "svix-signature": _SVIX.sign(msg_id, now, text),
        }
        mac = hmac.new(stripe_key, stamp.encode() + b"." + item.body, hashlib.sha256)
        item.stripe = f"t={stamp},v1={mac.hexdigest()}"


# -- the minimal stdlib check a user would write by hand (spec §5.2) ---------------------

_KEY = SECRET.encode()


def stdlib_receive(body: bytes, header: str, now: float) -> Any:
    fields = dict(pair.split(":", 1) for pair in header.split(","))
    mac = hmac.new(_KEY, body, hashlib.sha256)
    mac.update(f":{fields['o']}:{fields['t']}".encode())
    if not hmac.compare_digest(mac.digest(), base64.b64decode(fields["v"])):
        raise ValueError("signature mismatch")
    if abs(now - int(fields["t"])) > 300:
        raise ValueError("timestamp out of tolerance")
    envelope = json.loads(body)
    if not isinstance(envelope, dict) or "eventName" not in envelope:
        raise ValueError("not an envelope")
    return envelope["data"]["id"]


# -- one round of one contender over a batch: returns seconds per item -------------------

Runner = Callable[[list[Item]], float]


def _timed(function: Callable[[], list[Any]], items: list[Item], name: str) -> float:
    gc.collect()
    start = time.perf_counter()
    results = function()
    elapsed = time.perf_counter() - start
    if results[-1] != items[-1].expected_id and name.startswith(("ours", "std", "svix")):
        raise SystemExit(f"{name}: unexpected result {results[-1]!r}")
    return elapsed / len(items)


def run_ours(items: list[Item]) -> float:
    receiver = WebhookReceiver(SECRET, store=MemoryStore(), clock=lambda: NOW)
    receiver.router.declare("order.created")  # not in the spec's catalogue: no warning
    seen: list[str] = []
    record = seen.append

    @receiver.on("order.created")
    def order_created(event: Any) -> None:
        record(event.data["id"])

    @receiver.on("note.created")
    def note_created(event: Any) -> None:
        record(event.data.id)

    process = receiver.process

    def work() -> list[Any]:
        outcomes = [process(item.body, item.ours) for item in items]
        bad = [o for o in outcomes if o.reason != "processed"]
        if bad:
            raise SystemExit(f"ours: expected every delivery processed, got {bad[:3]}")
        return seen

    return _timed(work, items, "ours")


def run_standardwebhooks(items: list[Item]) -> float:
    verify = _SW.verify
    return _timed(
        lambda: [verify(item.body, item.webhook)["data"]["id"] for item in items],
        items,
        "standardwebhooks",
    )


def run_svix(items: list[Item]) -> float:
    verify = _SVIX.verify
    loads = json.loads

    def work() -> list[Any]:
        out = []
        for item in items:
            verify(item.body, item.svix)  # svix 1.x+ returns nothing: decode as a user would
            out.append(loads(item.body)["data"]["id"])
        return out

    return _timed(work, items, "svix")


def run_stdlib(items: list[Item]) -> float:
    return _timed(
        lambda: [stdlib_receive(item.body, item.ours, NOW) for item in items], items, "stdlib"
    )


_suffix = f":{ORG}:{T}".encode()
_decode_any = msgspec.json.decode


def run_floor_msgspec(items: list[Item]) -> float:
    """HMAC-SHA256 over the body (+ our short suffix) and an untyped msgspec decode."""

    def work() -> list[Any]:
        out = []
        for item in items:
            mac = hmac.new(_KEY, item.body, hashlib.sha256)
            mac.update(_suffix)
            out.append((mac.digest(), _decode_any(item.body)))
        return out

    return _timed(work, items, "floor-msgspec")


def run_floor_json(items: list[Item]) -> float:
    """HMAC-SHA256 over the body (+ our short suffix) and ``json.loads``."""

    def work() -> list[Any]:
        out = []
        for item in items:
            mac = hmac.new(_KEY, item.body, hashlib.sha256)
            mac.update(_suffix)
            out.append((mac.digest(), json.loads(item.body)))
        return out

    return _timed(work, items, "floor-json")


_key_prefix = f"{ORG}\n".encode()


def run_floor_keyed(items: list[Item]) -> float:
    """The msgspec floor plus the default idempotency key (SHA-256 of ``o + "\\n" +
    body``), one after the other: the least work of a receiver that deduplicates by
    the body, as this library's default key does."""

    def work() -> list[Any]:
        out = []
        for item in items:
            mac = hmac.new(_KEY, item.body, hashlib.sha256)
            mac.update(_suffix)
            key = hashlib.sha256(_key_prefix)
            key.update(item.body)
            out.append((mac.digest(), key.hexdigest(), _decode_any(item.body)))
        return out

    return _timed(work, items, "floor-keyed")


RUNNERS: dict[str, Runner] = {
    "ours": run_ours,
    "standardwebhooks": run_standardwebhooks,
    "svix": run_svix,
    "stdlib": run_stdlib,
    "floor-msgspec": run_floor_msgspec,
    "floor-json": run_floor_json,
    "floor-keyed": run_floor_keyed,
}

# -- verify alone: ours vs stripe at 200 B -----------------------------------------------

VERIFY_CONTENDERS = ("verify", "stripe", "verify-floor")


def run_verify(items: list[Item], resolver: Any) -> float:
    verify = service_webhooks.verify

    def work() -> list[Any]:
        return [verify(item.body, item.ours, resolver, now=NOW) for item in items]

    return _timed(work, items, "verify")


def run_stripe(items: list[Item], resolver: Any) -> float:
    verify_header = stripe.WebhookSignature.verify_header

    def work() -> list[Any]:
        return [verify_header(item.body, item.stripe, STRIPE_SECRET, 300) for item in items]

    return _timed(work, items, "stripe")


def run_verify_floor(items: list[Item], resolver: Any) -> float:
    """HMAC-SHA256 over the body + suffix and ``compare_digest`` against a known digest."""

    def work() -> list[Any]:
        out = []
        for item in items:
            mac = hmac.new(_KEY, item.body, hashlib.sha256)
            mac.update(_suffix)
            out.append(hmac.compare_digest(mac.digest(), mac.digest()))
        return out

    return _timed(work, items, "verify-floor")


VERIFY_RUNNERS = {"verify": run_verify, "stripe": run_stripe, "verify-floor": run_verify_floor}


# -- driver ------------------------------------------------------------------------------


@dataclass
class MicroResult:
    """Per-round µs per item: ``samples[(label, kind, contender)]``."""

    rounds: int
    counts: dict[int, int]
    samples: dict[tuple[str, str, str], list[float]]

    def median_us(self, label: str, kind: str, contender: str) -> float:
        return statistics.median(self.samples[(label, kind, contender)]) * 1e6

    def ratios(self, label: str, kind: str, ours: str, base: str) -> list[float]:
        return [
            a / b
            for a, b in zip(
                self.samples[(label, kind, ours)], self.samples[(label, kind, base)], strict=True
            )
        ]

    def ratio(self, label: str, kind: str, ours: str, base: str) -> float:
        return statistics.median(self.ratios(label, kind, ours, base))


def measure(rounds: int, counts: dict[int, int], log: Callable[[str], None]) -> MicroResult:
    batches = {
        (label, kind): build(kind, size, counts[size]) for label, size in SIZES for kind in KINDS
    }
    signed_at = time.monotonic()
    resolver = as_resolver(SECRET)
    samples: dict[tuple[str, str, str], list[float]] = {}
    names = list(RUNNERS)
    for items in batches.values():  # warm-up, not recorded
        for name in names:
            RUNNERS[name](items[: max(2, len(items) // 10)])
    for round_index in range(rounds):
        if time.monotonic() - signed_at > RESIGN_AFTER:
            for items in batches.values():
                resign(items)
            signed_at = time.monotonic()
        shift = round_index % len(names)
        order = names[shift:] + names[:shift]
        for (label, kind), items in batches.items():
            for name in order:
                samples.setdefault((label, kind, name), []).append(RUNNERS[name](items))
        verify_items = batches[("200 B", "order.created")]
        vnames = list(VERIFY_CONTENDERS)
        vshift = round_index % len(vnames)
        for name in vnames[vshift:] + vnames[:vshift]:
            samples.setdefault(("200 B", "verify", name), []).append(
                VERIFY_RUNNERS[name](verify_items, resolver)
            )
        log(f"  micro round {round_index + 1}/{rounds} done")
    return MicroResult(rounds, counts, samples)


def report(result: MicroResult) -> str:
    lines = [
        f"Micro: {result.rounds} interleaved rounds; bodies per batch: "
        + ", ".join(f"{label} x{result.counts[size]}" for label, size in SIZES),
        "median µs per delivery; ratios are medians of per-round paired ratios",
        "",
    ]
    head = (
        f"{'size':>6} {'envelope':<14}| {'ours':>8} {'stdwh':>8} {'svix':>8} {'stdlib':>8} "
        f"{'floor':>8} {'keyed':>8} | {'/stdwh':>6} {'/svix':>6} {'/stdlib':>7} "
        f"{'floor/stdwh':>11} {'keyed/stdwh':>11}"
    )
    lines += [head, "-" * len(head)]
    for label, _ in SIZES:
        for kind in KINDS:
            us = {n: result.median_us(label, kind, n) for n in CONTENDERS}
            lines.append(
                f"{label:>6} {kind:<14}| {us['ours']:8.2f} {us['standardwebhooks']:8.2f} "
                f"{us['svix']:8.2f} {us['stdlib']:8.2f} {us['floor-msgspec']:8.2f} "
                f"{us['floor-keyed']:8.2f} | "
                f"{result.ratio(label, kind, 'ours', 'standardwebhooks'):6.2f} "
                f"{result.ratio(label, kind, 'ours', 'svix'):6.2f} "
                f"{result.ratio(label, kind, 'ours', 'stdlib'):7.2f} "
                f"{result.ratio(label, kind, 'floor-msgspec', 'standardwebhooks'):11.2f} "
                f"{result.ratio(label, kind, 'floor-keyed', 'standardwebhooks'):11.2f}"
            )
    lines.append(
        "floor = HMAC-SHA256 over the body + untyped msgspec.json decode; keyed = the floor "
        "+ the default idempotency key's SHA-256 of the body; with json.loads instead: "
        + ", ".join(
            f"{label} {result.median_us(label, 'order.created', 'floor-json'):.2f} µs"
            for label, _ in SIZES
        )
    )
    v = {n: result.median_us("200 B", "verify", n) for n in VERIFY_CONTENDERS}
    lines += [
        "",
        f"verify alone, 200 B: service_webhooks.verify {v['verify']:.2f} µs, stripe "
        f"verify_header {v['stripe']:.2f} µs, HMAC + compare_digest floor "
        f"{v['verify-floor']:.2f} µs; verify/stripe "
        f"{result.ratio('200 B', 'verify', 'verify', 'stripe'):.2f}, floor/stripe "
        f"{result.ratio('200 B', 'verify', 'verify-floor', 'stripe'):.2f}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=None, help="rounds (31; quick: 7)")
    parser.add_argument("--quick", action="store_true", help="7 rounds, smaller batches")
    args = parser.parse_args(argv)
    rounds = args.rounds or (7 if args.quick else 31)
    counts = QUICK_COUNTS if args.quick else COUNTS
    result = measure(rounds, counts, lambda line: print(line, file=sys.stderr))
    print(report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
