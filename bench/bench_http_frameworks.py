"""Requests/s and latency of valid deliveries through the Flask and Django adapters, side
by side with a bare endpoint of the same framework, on the same gunicorn, with ``wrk``.

Every request posts the same signed 1 KiB body of an event no handler listens to, so
the receiver verifies, decodes and answers 200 ``unhandled`` without an idempotency-store
round trip (the store would dedupe identical bodies). The bare endpoints read the body
and answer a small JSON document.

    python bench/bench_http_frameworks.py [--seconds 10] [--connections 16]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from service_webhooks import sign

SECRET = "whsec-bench-0123456789abcdef0123456789abcdef"
BIN = Path(sys.executable).parent

FLASK_APP = f"""
from flask import Flask, request
from service_webhooks import WebhookReceiver
from service_webhooks.adapters.flask import webhook_blueprint

app = Flask("bench")
app.register_blueprint(webhook_blueprint(WebhookReceiver({SECRET!r}, store="memory")))

@app.post("/bare")
def bare():
    request.get_data()
    return app.response_class(b'{{"status":200}}', content_type="application/json")
"""

DJANGO_SETTINGS = f"""
SECRET_KEY = "bench"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "bench_urls"
INSTALLED_APPS = ["service_webhooks.adapters.django"]
DATABASES = {{}}
MIDDLEWARE = [
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
]
SERVICE_WEBHOOKS = {{"SECRETS": {SECRET!r}, "STORE": "memory"}}
"""

DJANGO_URLS = """
from django.http import HttpResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt

@csrf_exempt
def bare(request):
    request.read()
    return HttpResponse(b'{"status":200}', content_type="application/json")

urlpatterns = [path("webhooks", include("service_webhooks.adapters.django.urls")),
               path("bare/", bare)]
"""

DJANGO_WSGI = """
import os
os.environ["DJANGO_SETTINGS_MODULE"] = "bench_settings"
from django.core.wsgi import get_wsgi_application
application = get_wsgi_application()
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wrk(url: str, script: Path, seconds: int, connections: int) -> dict[str, float]:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    latency = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+\w+)", out, re.M))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "p50": _ms(latency["50"]), "p99": _ms(latency["99"]),
            "non2xx": float(errors.group(1)) if errors else 0.0}  # fmt: skip


def _ms(value: str) -> float:
    number, unit = re.match(r"([\d.]+)(\w+)", value).groups()  # type: ignore[union-attr]
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=4, help="gunicorn threads (1 worker)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sw-bench-"))
    for name, text in (("bench_flask.py", FLASK_APP), ("bench_settings.py", DJANGO_SETTINGS),
                       ("bench_urls.py", DJANGO_URLS), ("bench_wsgi.py", DJANGO_WSGI)):  # fmt: skip
        (tmp / name).write_text(text)
    data = {"id": "n-1", "author": "ana@example.com", "text": "x" * 900}
    body = json.dumps({"eventName": "bench.unhandled", "version": 1, "data": data}).encode()
    header = sign(body, SECRET, "o-BENCH")
    script = tmp / "post.lua"
    script.write_text(
        'wrk.method = "POST"\n'
        f"wrk.body = {json.dumps(body.decode())}\n"
        f'wrk.headers["Service-Signature"] = "{header}"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    print(f"body {len(body)} bytes, event without handler (200 unhandled, no store round trip)")
    load = f"wrk -t2 -c{args.connections} -d{args.seconds}s"
    print(f"gunicorn 1 worker x {args.threads} threads, {load}")
    print(f"{'framework':8} {'endpoint':10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'ratio':>6}")
    for framework, app, bare, hooks in (
        ("flask", "bench_flask:app", "/bare", "/webhooks"),
        ("django", "bench_wsgi:application", "/bare/", "/webhooks/"),
    ):
        port = free_port()
        server = subprocess.Popen(
            [str(BIN / "gunicorn"), "-b", f"127.0.0.1:{port}", "-w", "1", "--threads",
             str(args.threads), "--log-level", "warning", "--chdir", str(tmp), app],
            env={**os.environ, "PYTHONPATH": str(tmp)},
        )  # fmt: skip
        try:
            time.sleep(2)
            results = {path: wrk(f"http://127.0.0.1:{port}{path}", script, args.seconds,
                                 args.connections) for path in (bare, hooks)}  # fmt: skip
        finally:
            server.terminate()
            server.wait()
        base = results[bare]["rps"]
        for path, result in results.items():
            label = "bare" if path == bare else "adapter"
            print(f"{framework:8} {label:10} {result['rps']:9.0f} {result['p50']:8.2f} "
                  f"{result['p99']:8.2f} {result['rps'] / base:6.0%}"
                  + (f"  non-2xx: {result['non2xx']:.0f}" if result["non2xx"] else ""))  # fmt: skip


if __name__ == "__main__":
    main()
