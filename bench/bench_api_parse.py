"""API client: µs to parse a history page per version, and memory while paging.

Run from the repository root::

    .venv/bin/python bench/bench_api_parse.py            # 15 rounds
    .venv/bin/python bench/bench_api_parse.py --quick    # a fast smoke run

1. **Parse**: a ``GET /settings/recording/v1/privacy/history`` body of 100 versions
   (each with 5 element blocks, a third of them with the zero time, and 3 ajax watches,
   about 300 KB) is turned into the typed, frozen models by the path the clients use
   (``_core.decode`` on an ``httpx.Response``). Reference: ``json.loads`` of the same
   bytes into plain dicts and lists, with no types, no datetimes and no validation.
   A round parses the page ``--loops`` times; the figure is the median over rounds of
   the time per version.
2. **Memory**: ``Client.operations.iter(limit=100)`` over 1,000, 10,000 and 20,000
   operations (pages of 100 built on demand by an in-process ``httpx.MockTransport``),
   after a warm-up run. ``tracemalloc`` peak while iterating, against the peak of
   ``list(pager)`` over 10,000 (every operation held). Flat memory: the iterating peaks
   stay about one page whatever the total. What still grows slowly is bounded: stdlib
   caches httpx uses (``urllib.parse`` keeps 128 URLs; tracemalloc counts entries made
   after it started, so the cache turning over looks like growth until it is full) and
   one token per page kept to detect a repeated token.

Nothing is asserted about time; the targets are printed as met or not.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import time
import tracemalloc
from typing import Any

import httpx
import msgspec

from service_webhooks.api import Client, HistoryPage
from service_webhooks.api._core import decode as core_decode
from service_webhooks.api._core import history_call
from service_webhooks.testing.fake_api import make_operations, make_versions

VERSIONS = 100
BLOCKS_PER_VERSION = 5
WATCHES_PER_VERSION = 3


def history_body() -> bytes:
    versions = make_versions(VERSIONS)
    for version in versions:
        block = version["elementBlocks"][0]
        version["elementBlocks"] = [
            block | {"selector": f"{block['selector']} .field-{n}", "groupId": n}
            for n in range(BLOCKS_PER_VERSION)
        ]
        watch = version["ajaxWatches"][0]
        version["ajaxWatches"] = [
            watch | {"urlRegex": f"{watch['urlRegex']}/{n}"} for n in range(WATCHES_PER_VERSION)
        ]
    return msgspec.json.encode({"versions": versions, "next_pagination_token": "next"})


def bench_parse(rounds: int, loops: int) -> tuple[float, float, int]:
    body = history_body()
    call = history_call(VERSIONS, None)
    request = httpx.Request("GET", "http://api.invalid" + call.path)
    response = httpx.Response(200, content=body, request=request)
    page = core_decode(call, response, HistoryPage)
    assert len(page.versions) == VERSIONS
    ours, ref = [], []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        for _ in range(loops):
            core_decode(call, response, HistoryPage)
        ours.append((time.perf_counter() - start) / (loops * VERSIONS) * 1e6)
        start = time.perf_counter()
        for _ in range(loops):
            json.loads(body)
        ref.append((time.perf_counter() - start) / (loops * VERSIONS) * 1e6)
    return statistics.median(ours), statistics.median(ref), len(body)


def operations_transport(total: int, per_page: int = 100) -> httpx.MockTransport:
    template, _ = make_operations(per_page)

    def handle(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params.get("paginationToken") or 0)
        count = min(per_page, total - offset)
        operations = [op | {"id": f"op-{offset + n:06d}"} for n, op in enumerate(template[:count])]
        following = offset + count
        body: dict[str, Any] = {
            "operations": operations,
            "nextPaginationToken": str(following) if following < total else "",
        }
        return httpx.Response(200, content=msgspec.json.encode(body))

    return httpx.MockTransport(handle)


def bench_memory(total: int, *, hold: bool = False) -> tuple[int, int, int]:
    """Iterate ``total`` operations (or keep them all with ``hold``).

    Returns:
        (operations seen, pages fetched, tracemalloc peak in bytes)
    """
    with Client("k", base_url="http://api.invalid", transport=operations_transport(total)) as c:
        c.operations.list(limit=1)  # warm imports and the connection objects
        gc.collect()
        tracemalloc.start()
        pager = c.operations.iter(limit=100)
        if hold:
            count = len(list(pager))
        else:
            count = 0
            for op in pager:
                count += 1
                assert op.id
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return count, pager.pages_fetched, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--loops", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 3 loops")
    args = parser.parse_args()
    rounds, loops = (3, 3) if args.quick else (args.rounds, args.loops)

    print(f"python {platform.python_version()} on {platform.machine()}, {platform.processor()}")
    print(f"msgspec {msgspec.__version__}, httpx {httpx.__version__}")
    ours, ref, size = bench_parse(rounds, loops)
    print(f"\nParse one history page of {VERSIONS} versions ({size / 1024:.0f} KiB), median of")
    print(f"{rounds} rounds x {loops} loops:")
    print(
        f"  typed models (client path) {ours:8.2f} µs per version  ({ours * VERSIONS:.0f} µs/page)"
    )
    print(f"  json.loads (untyped ref.)  {ref:8.2f} µs per version  ({ref * VERSIONS:.0f} µs/page)")
    verdict = "met" if ours < 100 else "NOT met"
    print(f"  target well under 1000 µs per version (< 100): {verdict}")

    print("\nIterate operations, 100 per page (tracemalloc peak while iterating):")
    bench_memory(20_000)  # warm-up
    peaks = {}
    for total in (1_000, 10_000, 20_000):
        count, pages, peak = bench_memory(total)
        peaks[total] = peak
        print(f"  {count:6d} operations, {pages:3d} pages: peak {peak / 1024:7.0f} KiB")
    count, pages, held = bench_memory(10_000, hold=True)
    print(f"  list(pager) of {count} operations (all held): peak {held / 1024:7.0f} KiB")
    ratio = peaks[10_000] / peaks[1_000]
    flat = "flat" if peaks[10_000] < held / 10 else "NOT flat"
    print(f"  10,000 vs 1,000 iterated: x{ratio:.2f}; vs all held: x{peaks[10_000] / held:.3f}")
    print(f"  target: iterating 10,000 holds under a tenth of all of them: {flat}")


if __name__ == "__main__":
    main()
