"""The Django adapter through real servers: both URL spellings under ``APPEND_SLASH``
(gunicorn, DEBUG on and off) and the URL check; the ASGI entry that answers before
Django reads the body (uvicorn); case-sensitive POST and repeated signature lines; a
slow client under the recommended gunicorn set-up; what ``runserver`` does on its own
(spec §5.2, §6.1, §7)."""

from __future__ import annotations

import base64
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from django.core import checks
from django.test import Client, override_settings

MIB = 2**20
HOOK = ["-c", "python:service_webhooks.adapters.gunicorn"]
RECOMMENDED = [*HOOK, "--worker-class", "gthread", "--threads", "8", "--timeout", "30"]


def serve(
    kit: ModuleType,
    tmp: Path,
    kind: str,
    *options: str,
    debug: bool = False,
    success_body: bool = True,
    common_middleware: bool = True,
    default: str = "sqlite",
) -> Any:
    """The test project under gunicorn (``wsgi``, 1 worker, ``options``), under Django's
    development server (``runserver``), or under uvicorn as Django's ASGI app (``asgi``)
    or behind the webhook entry (``asgi_webhooks``), or another ASGI module of the
    project (``dashboard``), with the ``default`` database (``sqlite`` or ``pg``)."""
    port = kit.free_port()
    if kind == "runserver":
        # --skip-checks: Django 6's start-up checks connect to every database, and the
        # test project's "down" alias points at one that cannot open (on purpose)
        argv = [
            str(kit.BIN / "django-admin"), "runserver", "--noreload", "--skip-checks",
            f"127.0.0.1:{port}",
        ]  # fmt: skip
    elif kind == "wsgi":
        argv = [
            str(kit.BIN / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "1",
            "--graceful-timeout", "2", "--log-level", "warning", *options,
            "sw_testproject.wsgi:application",
        ]  # fmt: skip
    else:
        argv = [
            str(kit.BIN / "uvicorn"), f"sw_testproject.{kind}:application", "--host",
            "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log",
        ]  # fmt: skip
    env = {
        **kit.ENV,
        "SW_DJANGO_DEFAULT": default,
        "PYTHONPATH": str(kit.PROJECT),
        "SW_DJANGO_DEBUG": "1" if debug else "0",
        "SW_DJANGO_SUCCESS_BODY": "1" if success_body else "0",
        "SW_DJANGO_NO_COMMON_MIDDLEWARE": "0" if common_middleware else "1",
    }
    return kit.start_server(argv, cwd=kit.PROJECT, env=env, log=tmp / f"{kind}.log", port=port)


def deliver(kit: ModuleType, port: int, path: str, method: str = "POST", **data: Any) -> Any:
    body = kit.envelope(**data)
    return kit.contract.raw_request(port, kit.contract.signed_head(method, path, body), body)


# -- both spellings, APPEND_SLASH, the URL check ------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_both_spellings_are_processed_under_gunicorn_with_append_slash(
    kit: ModuleType, tmp_path: Path, debug: bool
) -> None:
    from django.conf import settings

    assert settings.APPEND_SLASH  # Django's default: a URL without its slash is redirected
    running = serve(kit, tmp_path, "wsgi", *RECOMMENDED, debug=debug)
    try:
        answers = [deliver(kit, running.port, path) for path in ("/webhooks", "/webhooks/")]
    finally:
        kit.stop_server(running)
    assert [(a.status, a.reason) for a in answers] == [(200, "processed")] * 2


def test_the_project_urls_answer_both_spellings() -> None:
    from django.urls import resolve

    assert resolve("/webhooks").func is resolve("/webhooks/").func


@pytest.mark.parametrize("path", ["/webhooks//", "/webhooks///"])
def test_repeated_trailing_slashes_are_404_not_redirected(path: str) -> None:
    """As from the Flask and ASGI adapters: ``APPEND_SLASH`` redirects no URL that
    already ends in a slash (spec §7: a 3xx is never followed)."""
    assert Client().post(path, b"{}", content_type="application/json").status_code == 404


def test_a_urlconf_with_one_spelling_is_a_warning() -> None:
    with override_settings(ROOT_URLCONF="sw_testproject.urls_one_spelling"):
        found = checks.run_checks(tags=["service_webhooks"])
    assert [m.id for m in found] == ["service_webhooks.W004"] * 2
    assert found[0].msg.startswith("The webhook URL '/hooks' is not answered as '/hooks/';")
    assert found[1].msg.startswith("The webhook URL '/webhooks/' is not answered as '/webhooks';")
    assert 'path("webhooks", include(' in str(found[1].hint)
    # each hint names its own URL, not the default one
    assert 'path("hooks", include(' in str(found[0].hint)
    assert 're_path(r"^hooks/?$", webhook_view())' in str(found[0].hint)


def test_a_webhook_url_inside_i18n_patterns_is_a_warning() -> None:
    """``LocaleMiddleware`` answers ``/webhooks`` with a 302 to ``/en/webhooks``: both
    spellings of ``/en-us/webhooks`` resolved, so nothing was reported."""
    with override_settings(ROOT_URLCONF="sw_testproject.urls_i18n"):
        found = checks.run_checks(tags=["service_webhooks"])
    assert [m.id for m in found] == ["service_webhooks.W004"]
    assert found[0].msg.startswith("A webhook URL is inside i18n_patterns():")
    assert "outside i18n_patterns()" in str(found[0].hint)
    with override_settings(ROOT_URLCONF="sw_testproject.urls_i18n_unprefixed"):
        assert checks.run_checks(tags=["service_webhooks"]) == []


def test_a_webhook_url_taken_by_another_view_is_a_warning() -> None:
    with override_settings(ROOT_URLCONF="sw_testproject.urls_shadowed"):
        found = checks.run_checks(tags=["service_webhooks"])
    assert [m.id for m in found] == ["service_webhooks.W004"]
    assert found[0].msg.startswith(
        "The webhook URL '/hooks' is not answered as '/hooks' nor as '/hooks/';"
    )


# -- the ASGI entry (uvicorn) and Django's own ASGI handler ----------------------------


@pytest.fixture(scope="module")
def entry(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The project under uvicorn behind ``webhook_asgi`` (sw_testproject/asgi_webhooks.py)."""
    running = serve(kit, tmp_path_factory.mktemp("entry"), "asgi_webhooks")
    yield running
    kit.stop_server(running)


@pytest.fixture(scope="module", params=["asgi", "asgi_webhooks"])
def asgi(
    kit: ModuleType, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """The project under uvicorn: Django's ASGI app, then behind ``webhook_asgi``."""
    running = serve(kit, tmp_path_factory.mktemp(request.param), request.param)
    yield running
    kit.stop_server(running)


@pytest.mark.e2e
@pytest.mark.parametrize("path", ["/webhooks", "/webhooks/"])
def test_the_entry_processes_deliveries_with_the_project_handlers(
    kit: ModuleType, entry: Any, path: str
) -> None:
    from sw_testapp.models import Delivery

    note_id = uuid.uuid4().hex
    answer = deliver(kit, entry.port, path, id=note_id)
    assert (answer.status, answer.reason) == (200, "processed")
    assert Delivery.objects.filter(note_id=note_id).count() == 1  # the handler's ORM write
    retry = deliver(kit, entry.port, path, id=note_id)  # a new body: processed again
    assert retry.status == 200


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["asgi", "asgi_webhooks"])
def test_handlers_under_asgi_recover_once_the_database_drops_its_connections(
    kit: ModuleType, tmp_path: Path, pg: str, kind: str
) -> None:
    """A plain handler's ORM work under ASGI uses the delivery's connection, which Django
    closes when the delivery ends (``CONN_MAX_AGE`` 0), as for a synchronous view: after
    the database drops every connection (a restart, a failover), the next deliveries are
    processed, not answered 500 by a worker thread holding a dead connection for ever."""
    running = serve(kit, tmp_path, kind, default="pg")
    try:
        first = deliver(kit, running.port, "/webhooks/")
        _drop_connections(kit)
        later = [deliver(kit, running.port, "/webhooks/") for _ in range(3)]
    finally:
        kit.stop_server(running)
    assert (first.status, first.reason) == (200, "processed")
    assert [(a.status, a.reason) for a in later] == [(200, "processed")] * 3


def _drop_connections(kit: ModuleType) -> None:
    """What a database restart does to a server's connections to the test database."""
    import psycopg

    with psycopg.connect(
        f"host=127.0.0.1 port=5432 user=postgres dbname={kit.PG_NAME}", autocommit=True
    ) as connection:
        connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.mark.e2e
def test_the_dashboard_beside_django_recovers_once_the_database_drops_its_connections(
    kit: ModuleType, tmp_path: Path, pg: str
) -> None:
    """The dashboard served beside the project (docs/dashboard.md) reads the ORM inbox on
    Django's connections; each request ends them as a Django request does, so a
    database restart costs no page."""
    running = serve(kit, tmp_path, "dashboard", default="pg")
    auth = "Authorization: Basic " + base64.b64encode(b"ops:dashboard-test-password").decode()
    try:
        first = kit.contract.raw_request(running.port, ["GET / HTTP/1.1", auth])
        _drop_connections(kit)
        later = [kit.contract.raw_request(running.port, ["GET / HTTP/1.1", auth]) for _ in range(3)]
    finally:
        kit.stop_server(running)
    assert first.status == 200
    assert [answer.status for answer in later] == [200] * 3


@pytest.mark.e2e
def test_a_blocked_handler_under_asgi_does_not_hold_other_deliveries(
    kit: ModuleType, asgi: Any, tmp_path: Path
) -> None:
    """Each delivery has a thread of its own (as each request under Django's ASGI
    handler), so plain handlers run side by side rather than one at a time per process."""
    release = tmp_path / "release"
    body = kit.envelope(text=f"wait:{release}")
    blocked = kit.contract.raw_open(
        asgi.port,
        [*kit.contract.signed_head("POST", "/webhooks/", body), f"Content-Length: {len(body)}"],
        body,
    )
    try:
        other = deliver(kit, asgi.port, "/webhooks/")  # answered while the first one waits
        release.touch()
        first = kit.contract.raw_answer(blocked)
    finally:
        release.touch()
        blocked.close()
    assert (other.status, other.reason) == (200, "processed")
    assert (first.status, first.reason) == (200, "processed")


def _wait_for(condition: Any) -> None:
    """Poll ``condition()`` until true (30 s at most)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.e2e
@pytest.mark.parametrize("path", ["/webhooks/", "/async/webhooks/"])
def test_a_client_gone_while_the_handler_runs_leaves_one_run_and_a_duplicate_under_asgi(
    kit: ModuleType, asgi: Any, tmp_path: Path, path: str
) -> None:
    """Django's ASGI handler (Django 5.0 on) cancels the view when the client disconnects,
    as the service does after 10 s. The delivery must still finish and be recorded, as
    under the other servers: the service's retry is then a duplicate, not a second run of
    a handler that completed (and, for a handler slower than 10 s, one more on every
    retry until the event is dead)."""
    from sw_testapp.models import Delivery

    note_id = uuid.uuid4().hex
    release = tmp_path / "release"
    body = kit.envelope(id=note_id, text=f"wait:{release}")
    head = kit.contract.signed_head("POST", path, body)
    runs = Delivery.objects.filter(note_id=note_id)
    sock = kit.contract.raw_open(asgi.port, [*head, f"Content-Length: {len(body)}"], body)
    try:
        _wait_for(runs.exists)  # the handler is running
    finally:
        sock.close()  # the service gave up waiting
    time.sleep(1)  # let the server see the disconnect before the handler ends
    release.touch()

    def redelivered() -> bool:
        nonlocal answer
        answer = kit.contract.raw_request(asgi.port, head, body)
        return (answer.status, answer.reason) != (503, "in_flight")

    answer = None
    _wait_for(redelivered)  # in flight until the first run is recorded
    assert answer is not None
    assert (answer.status, answer.reason) == (200, "duplicate")
    assert runs.count() == 1


@pytest.mark.e2e
def test_the_entry_passes_other_requests_to_django(kit: ModuleType, entry: Any) -> None:
    answer = kit.contract.raw_request(entry.port, ["GET /which/ HTTP/1.1"])
    assert (answer.status, answer.body) == (200, b'{"async": true}')


@pytest.mark.e2e
def test_the_entry_answers_a_declared_8_mib_body_before_it_is_sent(
    kit: ModuleType, entry: Any
) -> None:
    body = kit.envelope()
    head = kit.contract.signed_head("POST", "/webhooks", body)
    sock = kit.contract.raw_open(entry.port, [*head, f"Content-Length: {8 * MIB}"])
    try:
        answer = kit.contract.raw_answer(sock)  # nothing of the body was sent
    finally:
        sock.close()
    assert (answer.status, answer.reason, answer.interim) == (413, "payload_too_large", [])


@pytest.mark.e2e
def test_the_entry_answers_a_64_mib_chunked_body_after_reading_about_1_mib(
    kit: ModuleType, entry: Any
) -> None:
    body = kit.envelope()
    head = kit.contract.signed_head("POST", "/webhooks", body)
    sock = kit.contract.raw_open(entry.port, [*head, "Transfer-Encoding: chunked"])
    piece = b"x" * 65536
    sent = 0

    def pump() -> None:  # 2 MiB of a 64 MiB body, and never its end
        nonlocal sent
        try:
            for _ in range(2 * MIB // len(piece)):
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
        except OSError:
            pass  # answered and closed: allowed

    sender = threading.Thread(target=pump, daemon=True)
    sender.start()
    try:
        answer = kit.contract.raw_answer(sock)
    finally:
        sender.join(30)
        sock.close()
    # an answer came although the body never ended: at most the 2 MiB sent were read
    assert (answer.status, answer.reason) == (413, "payload_too_large")
    assert sent <= 2 * MIB


@pytest.mark.e2e
def test_the_entry_refuses_expect_100_continue_with_an_oversized_length(
    kit: ModuleType, entry: Any
) -> None:
    body = kit.envelope()
    head = kit.contract.signed_head("POST", "/webhooks", body)
    sock = kit.contract.raw_open(
        entry.port, [*head, "Expect: 100-continue", f"Content-Length: {64 * MIB}"]
    )
    try:
        answer = kit.contract.raw_answer(sock)
    finally:
        sock.close()
    assert (answer.status, answer.interim) == (413, [])


@pytest.mark.e2e
def test_a_lower_case_post_is_405_under_uvicorn(kit: ModuleType, asgi: Any) -> None:
    for path in ("/webhooks/", "/async/webhooks/"):
        answer = deliver(kit, asgi.port, path, method="post")
        if answer.status == 400:  # uvicorn on httptools refuses the method before any app
            assert answer.body == b"Invalid HTTP request received.", path
        else:  # uvicorn on h11 hands it to the app, which refuses it
            assert (answer.status, answer.reason) == (405, "method_not_allowed"), path


@pytest.mark.e2e
@pytest.mark.parametrize("split", [False, True], ids=["two-full-lines", "two-partial-lines"])
def test_two_signature_lines_are_refused_under_uvicorn(
    kit: ModuleType, asgi: Any, split: bool
) -> None:
    body = kit.envelope()
    lines = kit.contract.split_signature(body) if split else (kit.signed(body),) * 2
    answer = kit.contract.raw_request(
        asgi.port, kit.contract.signed_head("POST", "/webhooks/", body, *lines), body
    )
    assert (answer.status, answer.reason) == (401, "format")


@pytest.mark.e2e
def test_whitespace_around_the_signature_value_is_not_part_of_it_under_uvicorn(
    kit: ModuleType, asgi: Any
) -> None:
    """RFC 9110 §5.5: uvicorn on httptools keeps the whitespace after a value; a correctly
    signed delivery must not become a 401 (not retried: a lost event) because of it."""
    for path in ("/webhooks/", "/async/webhooks/"):
        body = kit.envelope()
        head = kit.contract.signed_head("POST", path, body, f"{kit.signed(body)} \t")
        answer = kit.contract.raw_request(asgi.port, head, body)
        assert (answer.status, answer.reason) == (200, "processed"), path


# -- gunicorn: repeated lines with the hook; a slow client under the recommended set-up ---


@pytest.fixture(scope="module")
def recommended(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """gunicorn with the recommended options (gthread, 8 threads, the hook)."""
    running = serve(kit, tmp_path_factory.mktemp("recommended"), "wsgi", *RECOMMENDED)
    yield running
    kit.stop_server(running)


@pytest.mark.e2e
@pytest.mark.parametrize("split", [False, True], ids=["two-full-lines", "two-partial-lines"])
def test_two_signature_lines_are_refused_under_gunicorn_with_the_hook(
    kit: ModuleType, recommended: Any, split: bool
) -> None:
    body = kit.envelope()
    lines = kit.contract.split_signature(body) if split else (kit.signed(body),) * 2
    answer = kit.contract.raw_request(
        recommended.port, kit.contract.signed_head("POST", "/webhooks", body, *lines), body
    )
    assert (answer.status, answer.reason) == (401, "format")


def _still_open(sock: socket.socket) -> bool:
    """Nothing answered and not closed by the server."""
    sock.setblocking(False)
    try:
        return not sock.recv(1)
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)


@pytest.mark.e2e
def test_a_slow_client_does_not_delay_other_deliveries_under_the_recommended_setup(
    kit: ModuleType, recommended: Any
) -> None:
    body = kit.envelope()
    head = kit.contract.signed_head("POST", "/webhooks", body)
    headers_trickler = socket.create_connection(("127.0.0.1", recommended.port), timeout=30)
    headers_trickler.sendall(b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no end
    body_trickler = kit.contract.raw_open(
        recommended.port, [*head, f"Content-Length: {len(body)}"], body[:10]
    )
    try:
        answer = deliver(kit, recommended.port, "/webhooks")  # raw_answer waits 30 s at most
        assert (answer.status, answer.reason) == (200, "processed")
        assert _still_open(headers_trickler) is True
        assert _still_open(body_trickler) is True
    finally:
        headers_trickler.close()
        body_trickler.close()


@pytest.mark.e2e
def test_success_body_false_answers_200_with_an_empty_body_under_gunicorn(
    kit: ModuleType, tmp_path: Path
) -> None:
    running = serve(kit, tmp_path, "wsgi", *RECOMMENDED, success_body=False)
    try:
        kit.contract.expect_empty_successes(running.port, "/webhooks/", kit.envelope())
    finally:
        kit.stop_server(running)


@pytest.mark.e2e
def test_answers_carry_their_length_without_common_middleware(
    kit: ModuleType, tmp_path: Path
) -> None:
    """Nothing else sets ``Content-Length`` then: without it gunicorn would send each
    answer chunked, with its terminating chunk as one more socket write."""
    running = serve(kit, tmp_path, "wsgi", *RECOMMENDED, common_middleware=False)
    try:
        body = kit.envelope()
        answers = [
            kit.contract.raw_request(running.port, head, body)
            for head in (
                kit.contract.signed_head("POST", "/webhooks/", body),
                kit.contract.signed_head("POST", "/webhooks/", body, "o:x,t:1,v:AAAA"),
            )
        ]
        for answer, expected in zip(answers, [(200, "processed"), (401, "signature")], strict=True):
            assert (answer.status, answer.reason) == expected
            assert "transfer-encoding" not in answer.headers
            assert answer.headers["content-length"] == str(len(answer.body))
    finally:
        kit.stop_server(running)


@pytest.mark.e2e
@pytest.mark.parametrize("breakage", ["bad-chunk-size", "missing-terminator", "cut-short"])
def test_a_broken_chunked_body_is_refused_not_a_500_under_gunicorn(
    kit: ModuleType, recommended: Any, breakage: str
) -> None:
    """gunicorn raises from ``wsgi.input.read`` for such a body; the view takes that as
    the end of the body, so the core refuses it (docs/security.md: no input makes the
    receiver answer 500, which the service would retry)."""
    answer = kit.contract.broken_chunked_request(
        recommended.port, "/webhooks", kit.envelope(), breakage
    )
    assert (answer.status, answer.reason) == (401, "signature")
    assert "Traceback" not in recommended.log.read_text()


# -- what the WSGI servers do on their own: runserver, and 100-continue ------------------


@pytest.fixture(scope="module")
def runserver(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The test project under ``django-admin runserver --noreload``."""
    running = serve(kit, tmp_path_factory.mktemp("runserver"), "runserver")
    yield running
    kit.stop_server(running)


@pytest.mark.e2e
def test_runserver_joins_two_lines_with_a_comma(kit: ModuleType, runserver: Any) -> None:
    """docs/security.md: runserver joins repeated lines like gunicorn without the hook,
    and takes no hook."""
    body = kit.envelope()
    full = kit.contract.signed_head("POST", "/webhooks/", body, kit.signed(body), kit.signed(body))
    answer = kit.contract.raw_request(runserver.port, full, body)
    assert (answer.status, answer.reason) == (401, "format")
    body = kit.envelope()
    partial = kit.contract.signed_head(
        "POST", "/webhooks/", body, *kit.contract.split_signature(body)
    )
    answer = kit.contract.raw_request(runserver.port, partial, body)
    assert (answer.status, answer.reason) == (200, "processed")


@pytest.mark.e2e
def test_runserver_reads_a_chunked_body_as_empty(kit: ModuleType, runserver: Any) -> None:
    """docs/django.md: runserver does not terminate the input, so a chunked delivery
    reaches the view with no body and its signature does not match (401)."""
    body = kit.envelope()
    head = [*kit.contract.signed_head("POST", "/webhooks/", body), "Transfer-Encoding: chunked"]
    sock = kit.contract.raw_open(runserver.port, head, b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    try:
        answer = kit.contract.raw_answer(sock)
    finally:
        sock.close()
    assert (answer.status, answer.reason) == (401, "signature")


@pytest.mark.e2e
@pytest.mark.parametrize("server", ["recommended", "runserver"])
def test_expect_100_continue_is_answered_by_the_wsgi_server_then_413(
    kit: ModuleType, request: pytest.FixtureRequest, server: str
) -> None:
    """docs/django.md: under WSGI the server sends ``100 Continue`` before the view runs;
    the view then answers an announced oversized body 413 without reading it (the body
    is never sent here)."""
    running = request.getfixturevalue(server)
    body = kit.envelope()
    answer = kit.contract.expect_continue_with_length(running.port, "/webhooks/", body, 2 * MIB)
    assert (answer.interim, answer.status, answer.reason) == ([100], 413, "payload_too_large")
