"""The speed targets in one run: the micro bench, then the HTTP bench, then the table of
ratios against their targets ("met" / "not met") with the measured floor of each row.

Run from the repository root (``pip install -e '.[bench]'``; the HTTP part needs
``wrk``: ``apt-get install -y wrk``)::

    .venv/bin/python bench/run.py             # full: ~18 min on 2 cores
    .venv/bin/python bench/run.py --quick     # smoke: about 2 min
    .venv/bin/python bench/run.py --skip-http # micro only

See ``bench/speed_micro.py`` and ``bench/speed_http.py`` for what each row measures.
Nothing is asserted about time: a target not met is printed, not raised.
"""

from __future__ import annotations

import argparse
import os
import platform
import ssl
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import speed_http
import speed_micro
from bench_http import cpu_model

PACKAGES = (
    "service-webhooks", "msgspec", "standardwebhooks", "svix", "stripe",
    "starlette", "uvicorn", "gunicorn", "flask", "django",
)  # fmt: skip


def machine() -> str:
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            versions.append(f"{name} (missing)")
    wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split()[:2]
    return (
        f"{cpu_model()}, {os.cpu_count()} CPUs; {platform.system()} {platform.machine()}; "
        f"CPython {platform.python_version()}; {ssl.OPENSSL_VERSION}; {' '.join(wrk)}\n"
        f"packages: {', '.join(versions)}"
    )


ROUTE_MOUNTS = ("asgi-async", "asgi-sync")  # WebhookApp on a Starlette Route
CEILINGS = {
    False: "raw ASGI app: body, HMAC, decode, empty 200",
    True: "that raw ASGI app on a Starlette Route",
}

Row = tuple[str, float | None, str, float, float | None, str]
# label, measured ratio, comparison, target, floor/ceiling ratio, note


def micro_rows(result: speed_micro.MicroResult) -> list[Row]:
    rows: list[Row] = []
    targets = {"200 B": 0.8, "10 KB": 0.5, "1 MiB": 0.5}
    for label, _ in speed_micro.SIZES:
        for kind in speed_micro.KINDS:
            rows.append(
                (
                    f"process/standardwebhooks {label} {kind}",
                    result.ratio(label, kind, "ours", "standardwebhooks"),
                    "<=",
                    targets[label],
                    result.ratio(label, kind, "floor-msgspec", "standardwebhooks"),
                    "floor = HMAC + msgspec decode; with the default key's SHA-256: "
                    f"{result.ratio(label, kind, 'floor-keyed', 'standardwebhooks'):.2f}",
                )
            )
    rows.append(
        (
            "verify/stripe 200 B",
            result.ratio("200 B", "verify", "verify", "stripe"),
            "<=",
            0.7,
            result.ratio("200 B", "verify", "verify-floor", "stripe"),
            "floor = HMAC + compare_digest",
        )
    )
    return rows


def http_rows(result: speed_http.HttpResult | None) -> list[Row]:
    spec = (
        ("ASGI async (route) / inline Starlette", "asgi-async", "starlette-inline", 1.3),
        ("ASGI async (middleware) / inline Starlette", "asgi-middleware", "starlette-inline", 1.3),
        ("ASGI sync (route) / inline Starlette", "asgi-sync", "starlette-inline", 0.9),
        (
            "ASGI sync (middleware) / inline Starlette",
            "asgi-middleware-sync",
            "starlette-inline",
            0.9,
        ),
        ("Flask / inline Flask", "flask-adapter", "flask-inline", 1.0),
        ("Django / inline Django", "django-adapter", "django-inline", 1.0),
        (
            "ASGI mw async, success_body=False / inline",
            "asgi-middleware-empty",
            "starlette-inline",
            1.3,
        ),
        ("Flask, success_body=False / inline Flask", "flask-adapter-empty", "flask-inline", 1.0),
        (
            "Django, success_body=False / inline Django",
            "django-adapter-empty",
            "django-inline",
            1.0,
        ),
        (
            "std: ASGI async (route) / inline Starlette",
            "asgi-async@std",
            "starlette-inline@std",
            1.3,
        ),
        (
            "std: ASGI async (middleware) / inline",
            "asgi-middleware@std",
            "starlette-inline@std",
            1.3,
        ),
        (
            "std: ASGI mw, success_body=False / inline",
            "asgi-middleware-empty@std",
            "starlette-inline@std",
            1.3,
        ),
        ("SQLite / Memory under ASGI", "asgi-sqlite", "asgi-async", 0.8),
    )
    rows: list[Row] = []
    for label, server, base, target in spec:
        for kind in speed_http.KINDS:
            servers = () if result is None else result.settings.servers
            if server not in servers or base not in servers:
                rows.append((f"{label} {kind} req/s", None, ">=", target, None, "not run"))
                continue
            assert result is not None
            ceiling = None
            notes = []
            if result.wrapped(server):
                notes.append("INVALID: bodies re-sent, answered as duplicates (raise --bodies)")
            _, at, stack = base.partition("@")
            # a route mount cannot pass the floor app mounted on the same route
            on_route = server.partition("@")[0] in ROUTE_MOUNTS
            floor_server = ("starlette-floor" if on_route else "asgi-floor") + at + stack
            if base.startswith("starlette-inline") and floor_server in servers:
                ceiling = result.ratio(kind, floor_server, base)
                notes.append("ceiling = " + CEILINGS[on_route])
            framework = base.partition("-")[0]  # flask-inline: the flask-floor view
            if framework in ("flask", "django") and f"{framework}-floor" in servers:
                ceiling = result.ratio(kind, f"{framework}-floor", base)
                notes.append(f"ceiling = a {framework.title()} view: body, HMAC, decode, empty 200")
            cpu = 1 / result.ratio(kind, server, base, "cpu_us")
            notes.append(f"by CPU/request: {cpu:.2f}")
            rows.append(
                (
                    f"{label} {kind} req/s",
                    result.ratio(kind, server, base),
                    ">=",
                    target,
                    ceiling,
                    "; ".join(notes),
                )
            )
    return rows


def table(rows: list[Row]) -> str:
    """A Markdown table: row, measured ratio, target, met / not met, floor, note."""
    widths = (64, 8, 8, 7, 5)
    head = ("row", "measured", "target", "result", "floor", "note")
    lines = [
        "| " + " | ".join(f"{h:<{w}}" for h, w in zip(head, (*widths, 4), strict=True)) + " |",
        "|"
        + "|".join(
            "-" * (w + 1) + ":" if i in (1, 2, 4) else "-" * (w + 2)
            for i, w in enumerate((*widths, 4))
        )
        + "|",
    ]
    for label, measured, comparison, target, floor, note in rows:
        if measured is None:
            verdict, shown = "not run", "-"
        else:
            met = measured <= target if comparison == "<=" else measured >= target
            verdict, shown = ("met" if met else "not met"), f"{measured:.2f}x"
        floor_shown = "-" if floor is None else f"{floor:.2f}"
        if floor is not None and measured is not None:
            impossible = floor > target if comparison == "<=" else floor < target
            if impossible and verdict == "met":  # below a floor: its hashes ran at once
                note = f"{note}; met below the floor"
            elif impossible:
                note = f"{note}; target beyond the {'floor' if comparison == '<=' else 'ceiling'}"
        goal = f"{comparison} {target:.1f}x"
        lines.append(
            f"| {label:<64} | {shown:>8} | {goal:>8} | {verdict:<7} | {floor_shown:>5} | {note} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run, under ~2 minutes")
    parser.add_argument("--skip-http", action="store_true", help="micro bench only")
    parser.add_argument("--skip-micro", action="store_true", help="HTTP bench only")
    parser.add_argument("--micro-rounds", type=int, default=None, help="micro rounds (31; 7)")
    speed_http.add_arguments(parser)
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.monotonic()
    print(f"machine: {machine()}")
    print(f"command: bench/run.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    rows: list[Row] = []
    reports: list[str] = []
    if not args.skip_micro:
        counts = speed_micro.QUICK_COUNTS if args.quick else speed_micro.COUNTS
        rounds = args.micro_rounds or (7 if args.quick else 31)
        micro = speed_micro.measure(rounds, counts, log)
        reports.append(speed_micro.report(micro))
        rows += micro_rows(micro)
    http: speed_http.HttpResult | None = None
    if not args.skip_http:
        http = speed_http.measure(speed_http.settings_from(args), log)
        reports.append(speed_http.report(http))
    rows += http_rows(http)

    for text in reports:
        print()
        print(text)
    print()
    print("Speed targets (ratios: medians of per-round paired ratios, same run):")
    print(table(rows))
    print(
        "floor: the same ratio for the least work any receiver must do (micro rows), or the "
        "ceiling a raw ASGI app doing only that work reaches on the same server, mounted as the "
        "row's adapter is (ASGI rows: bare, or on a Starlette Route for the route mounts); "
        "a target beyond it cannot be met on this machine. mw: the middleware mount; std: "
        "uvicorn[standard] (httptools, uvloop), other ASGI rows run uvicorn on h11, asyncio."
    )
    print(f"elapsed: {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
