"""The project receiver records into the ORM inbox; the admin lists, shows and replays
received deliveries; ``manage.py service_webhooks_replay`` replays them too."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from service_webhooks import Event, sign
from service_webhooks.adapters.django import receiver
from service_webhooks.adapters.django.conf import build_receiver
from service_webhooks.adapters.django.inbox import DjangoInbox
from service_webhooks.adapters.django.models import ReceivedDeliveryRecord
from service_webhooks.inbox import InboxQuery

URL = "/admin/service_webhooks/receiveddeliveryrecord/"


class Flaky:
    """A handler for ``test.flaky`` that raises until ``fixed``; counts its runs."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.fixed = False

    def __call__(self, event: Event[Any]) -> None:
        self.runs.append(event.data["id"])
        if not self.fixed:
            raise RuntimeError("a bug in the handler")


@pytest.fixture
def flaky() -> Iterator[Flaky]:
    handler = Flaky()
    receiver.router.declare("test.flaky")
    receiver.on("test.flaky")(handler)
    yield handler
    receiver.remove(handler)


@pytest.fixture
def admin_client() -> Client:
    user = User.objects.create_superuser(f"admin-{uuid.uuid4().hex[:8]}", "a@example.com", "pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def deliver(kit: ModuleType, body: bytes) -> int:
    response = Client().post(
        "/webhooks/", data=body, content_type="application/json",
        headers={kit.SIGNATURE_HEADER: kit.signed(body), "User-Agent": "Service-Webhooks/1.0"},
    )  # fmt: skip
    return int(response.status_code)


def recorded(body: bytes) -> ReceivedDeliveryRecord:
    return ReceivedDeliveryRecord.objects.get(body=body)


def test_the_project_receiver_records_into_the_orm_inbox(kit: ModuleType) -> None:
    assert isinstance(receiver.inbox, DjangoInbox)
    assert receiver.inbox.using == "default"
    body = kit.envelope("note.created")
    assert deliver(kit, body) == 200
    record = receiver.inbox.get(recorded(body).id)
    assert record is not None
    assert (record.body, record.reason, record.user_agent) == (
        body,
        "processed",
        "Service-Webhooks/1.0",
    )


def test_the_inbox_setting(kit: ModuleType, pg: str) -> None:
    on_pg = build_receiver({"SECRETS": kit.SECRET, "STORE": {"OPTIONS": {"using": pg}}})
    assert isinstance(on_pg.inbox, DjangoInbox)
    assert on_pg.inbox.using == pg
    assert build_receiver({"SECRETS": kit.SECRET, "INBOX": False}).inbox is None
    memory = build_receiver({"SECRETS": kit.SECRET, "INBOX": "memory"})
    assert type(memory.inbox).__name__ == "MemoryInbox"
    sized = build_receiver({"SECRETS": kit.SECRET, "INBOX": {"OPTIONS": {"max_bytes": 10}}})
    assert isinstance(sized.inbox, DjangoInbox)
    assert sized.inbox.max_bytes == 10


def test_a_failed_delivery_is_listed_shown_and_replayed_from_the_admin(
    kit: ModuleType, flaky: Flaky, admin_client: Client
) -> None:
    body = kit.envelope("test.flaky", text="<script>alert(1)</script>")
    assert deliver(kit, body) == 500
    record_id = recorded(body).id

    listing = admin_client.get(URL, {"reason": "handler_failed", "event_name": "test.flaky"})
    assert listing.status_code == 200
    assert record_id in listing.content.decode()
    assert record_id in admin_client.get(URL, {"q": record_id[:20]}).content.decode()
    assert record_id not in admin_client.get(URL, {"reason": "processed"}).content.decode()

    detail = admin_client.get(f"{URL}{record_id}/change/").content.decode()
    assert "RuntimeError: a bug in the handler" in detail  # the traceback
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail  # the payload, escaped
    assert "<script>alert(1)" not in detail
    assert "&quot;eventName&quot;: &quot;test.flaky&quot;,\n" in detail  # pretty-printed
    assert admin_client.get(f"{URL}add/").status_code == 403

    flaky.fixed = True
    action = {"action": "replay", "_selected_action": [record_id], "index": 0}
    assert admin_client.post(URL, action).status_code == 403  # no CSRF token: refused
    assert len(flaky.runs) == 1
    admin_client.get(URL)  # sets the CSRF cookie, as the page does
    token = admin_client.cookies["csrftoken"].value
    response = admin_client.post(URL, {**action, "csrfmiddlewaretoken": token}, follow=True)
    assert response.status_code == 200
    assert f"Delivery {record_id}: 200 processed" in response.content.decode()
    assert len(flaky.runs) == 2  # exactly once more

    record = receiver.inbox.get(record_id)  # type: ignore[union-attr]
    assert record is not None
    assert record.reason == "handler_failed"  # the answer sent stays as it was
    assert [(r.reason, r.forced) for r in record.replays] == [("processed", False)]
    detail = admin_client.get(f"{URL}{record_id}/change/").content.decode()
    assert "200 processed" in detail


def test_a_payload_too_deep_to_indent_is_shown_as_received(
    kit: ModuleType, admin_client: Client
) -> None:
    """Python's parser gives up on 5,000 levels (RecursionError): the page showed a 500."""
    body = b"[" * 5000 + b"]" * 5000
    assert deliver(kit, body) == 400  # verified, then refused: recorded
    detail = admin_client.get(f"{URL}{recorded(body).id}/change/")
    assert detail.status_code == 200
    assert "[" * 5000 in detail.content.decode()


def test_a_name_longer_than_its_column_is_recorded_cut_not_a_503(kit: ModuleType, pg: str) -> None:
    """PostgreSQL refuses 256 characters in a ``varchar(255)``: the record failed, so the
    delivery was answered 503 (retried in vain for a day) and never kept."""
    on_pg = build_receiver({"SECRETS": kit.SECRET, "STORE": {"OPTIONS": {"using": pg}}})
    name, org = "n" * 300, "o-" + "x" * 400
    body = json.dumps({"eventName": name, "version": 1, "data": {}}).encode()
    outcome = on_pg.process(body, sign(body, kit.SECRET, org))
    assert (outcome.status, outcome.reason) == (200, "unhandled")
    [record] = on_pg.inbox.search(InboxQuery(event_name=name[:255])).items  # type: ignore[union-attr]
    assert (record.event_name, record.organization_id) == (name[:255], org[:255])
    assert record.body == body  # whole


def test_the_admin_list_stays_small_with_long_event_names(
    kit: ModuleType, admin_client: Client
) -> None:
    """An eventName may fill a 1 MiB body: the list showed each whole, three times (the
    column, the filter's link and its text): 20 of 200,000 characters made 60 MB."""
    for n in range(20):
        body = json.dumps({"eventName": "<" * 200_000 + str(n), "version": 1, "data": n})
        assert deliver(kit, body.encode()) == 200
    page = admin_client.get(URL)
    assert page.status_code == 200
    assert len(page.content) < 1_000_000
    assert "&lt;" * 255 in page.content.decode()
    assert "<" * 255 not in page.content.decode()


def test_the_admin_list_reads_no_time_of_every_record(
    kit: ModuleType, admin_client: Client
) -> None:
    """A page of the list truncated no record's time (a date hierarchy's distinct
    months, every record read on every page: 4 s over 600,000 records on SQLite)."""
    assert deliver(kit, kit.envelope("test.flaky")) in (200, 500)
    with CaptureQueriesContext(connections["default"]) as queries:
        assert admin_client.get(URL).status_code == 200
    assert not [q["sql"] for q in queries.captured_queries if "trunc" in q["sql"].lower()]


def test_a_staff_user_without_the_permission_cannot_replay(kit: ModuleType) -> None:
    from django.contrib.auth.models import Permission

    user = User.objects.create_user(f"staff-{uuid.uuid4().hex[:8]}", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_receiveddeliveryrecord"))
    client = Client()
    client.force_login(user)
    page = client.get(URL)
    assert page.status_code == 200
    assert 'value="replay"' not in page.content.decode()


def test_the_replay_command(kit: ModuleType, flaky: Flaky) -> None:
    body = kit.envelope("test.flaky")
    assert deliver(kit, body) == 500
    record_id = recorded(body).id
    out, err = io.StringIO(), io.StringIO()
    call_command("service_webhooks_replay", "--status", "handler_failed", "--event",
                 "test.flaky", "--dry-run", stdout=out, stderr=err)  # fmt: skip
    lines = out.getvalue().splitlines()  # those of `service-webhooks inbox replay --dry-run`
    assert lines[-1] == f"{record_id}\ttest.flaky\thandler_failed\twould replay"  # oldest first
    counted = f"{len(lines)} deliveries" if len(lines) != 1 else "1 delivery"
    assert err.getvalue() == f"{counted} would be replayed\n"
    assert len(flaky.runs) == 1  # a dry run runs nothing

    with pytest.raises(CommandError, match="did not succeed"):  # still broken
        call_command("service_webhooks_replay", record_id[:16], stdout=io.StringIO(),
                     stderr=io.StringIO())  # fmt: skip
    flaky.fixed = True
    out, err = io.StringIO(), io.StringIO()
    call_command("service_webhooks_replay", record_id, stdout=out, stderr=err)
    assert out.getvalue() == f"{record_id}\ttest.flaky\thandler_failed -> 200 processed\n"
    assert err.getvalue() == "1 replayed, 0 not successful\n"
    out = io.StringIO()
    call_command("service_webhooks_replay", record_id, stdout=out, stderr=io.StringIO())
    assert "200 duplicate" in out.getvalue()
    call_command("service_webhooks_replay", record_id, "--force", stdout=io.StringIO(),
                 stderr=io.StringIO())  # fmt: skip
    assert len(flaky.runs) == 4  # failed replay, fixed replay, forced replay
    replays = receiver.inbox.get(record_id).replays  # type: ignore[union-attr]
    assert [(r.reason, r.forced) for r in replays] == [
        ("handler_failed", False), ("processed", False), ("duplicate", False), ("processed", True),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "^nothing to replay: give delivery IDs, or select them with --status, --event or "),
        (
            ["abc", "--status", "5xx"],
            "^give delivery IDs or --status, --event or --organization, not both$",
        ),
        (["--since", "1h"], "^--since selects with --status, --event or --organization$"),
        (["--status", "4xx", "--status", "5xx"], "one status class"),
        (["--status", "5xx", "--since", "yesterday"], "--since takes"),
        (["ffffffffffffffff"], "no delivery"),
        (["not-hex"], "^delivery ID 'not-hex' is not a hex ID prefix$"),
    ],
)
def test_the_replay_command_refuses_bad_arguments(argv: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message) as raised:
        call_command("service_webhooks_replay", *argv, stdout=io.StringIO())
    not_found = "no delivery" in message  # exit codes as `service-webhooks inbox replay`
    assert raised.value.returncode == (1 if not_found else 2)


@pytest.mark.parametrize("config", [{"STORE": "memory"}, {"INBOX": False}], ids=["memory", "off"])
def test_the_replay_command_without_an_inbox_says_why(config: dict[str, Any]) -> None:
    # with a memory or Redis STORE and no INBOX it said "INBOX is False", which nobody set
    expected = (
        r"^the project receiver keeps no inbox \(INBOX is False, or no INBOX beside a memory "
        r"or Redis STORE: set SERVICE_WEBHOOKS\['INBOX'\] = \{'BACKEND': "
    )
    with (
        override_settings(SERVICE_WEBHOOKS={"SECRETS": "whsec-" + "x" * 40, **config}),
        pytest.raises(CommandError, match=expected),
    ):
        call_command("service_webhooks_replay", "--status", "5xx", stdout=io.StringIO())


def test_a_delivery_pruned_during_a_replay_is_reported_not_a_traceback(
    kit: ModuleType, flaky: Flaky
) -> None:
    """A prune job may delete a selected delivery before its turn comes: it is named on
    stderr and counted as not successful, and the others are still replayed."""
    bodies = [kit.envelope("test.flaky"), kit.envelope("test.flaky")]
    assert [deliver(kit, body) for body in bodies] == [500, 500]
    first, second = (recorded(body).id for body in bodies)

    def prune_meanwhile(event: Event[Any]) -> None:
        ReceivedDeliveryRecord.objects.filter(id=second).delete()

    flaky.fixed = True
    receiver.on("test.flaky")(prune_meanwhile)
    out, err = io.StringIO(), io.StringIO()
    try:
        with pytest.raises(CommandError, match="did not succeed") as raised:
            call_command("service_webhooks_replay", first, second, stdout=out, stderr=err)
    finally:
        receiver.remove(prune_meanwhile)
    assert raised.value.returncode == 1
    assert out.getvalue() == f"{first}\ttest.flaky\thandler_failed -> 200 processed\n"
    assert err.getvalue() == (
        f"{second}\tnot in the receiver's inbox\n2 replayed, 1 not successful\n"
    )


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["wsgi", "asgi"], ids=["gunicorn", "uvicorn"])
def test_each_outcome_lands_in_the_orm_inbox_on_postgresql_through_a_server(
    kit: ModuleType, pg: str, tmp_path: Path, kind: str
) -> None:
    import httpx

    sent = {
        "processed": kit.envelope("note.created", text=f"é {uuid.uuid4().hex}") + b" \n",
        "handler_failed": kit.envelope("test.raise"),
        "unprocessable": kit.envelope("test.refuse"),
        "unhandled": kit.envelope("segment.trend_alert"),
    }
    running = kit.run_server(kind, tmp_path, default="pg")
    try:
        with httpx.Client(base_url=running.url, timeout=10) as client:
            for body in sent.values():
                headers = {kit.SIGNATURE_HEADER: kit.signed(body)}
                client.post("/webhooks/", content=body, headers=headers)
    finally:
        kit.stop_server(running)
    inbox = DjangoInbox(using=pg)
    for reason, body in sent.items():
        [row] = ReceivedDeliveryRecord.objects.using(pg).filter(body=body)
        record = inbox.get(row.id)
        assert record is not None
        assert (record.reason, record.body) == (reason, body)


def test_the_dashboard_mounted_over_the_orm_inbox_lists_shows_and_replays(
    kit: ModuleType, flaky: Flaky
) -> None:
    """``dashboard(receiver=receiver)`` (or ``dashboard(DjangoInbox())``) reads the ORM
    table; ``service-webhooks inbox serve`` does not (it reads its own table)."""
    pytest.importorskip("starlette")
    import re

    from starlette.testclient import TestClient

    from service_webhooks.dashboard import dashboard

    body = kit.envelope("test.flaky")
    assert deliver(kit, body) == 500
    record_id = recorded(body).id
    auth = ("ops", "pw-1")
    with TestClient(dashboard(DjangoInbox(), basic_auth="ops:pw-1")) as read_only:
        assert record_id in read_only.get("/", auth=auth).text
        assert 'id="replay"' not in read_only.get(f"/d/{record_id}", auth=auth).text
    with TestClient(dashboard(receiver=receiver, basic_auth="ops:pw-1")) as client:
        assert record_id in client.get("/", params={"outcome": "handler_failed"}, auth=auth).text
        assert client.get("/overview", auth=auth).status_code == 200
        page = client.get(f"/d/{record_id}", auth=auth).text
        assert "RuntimeError: a bug in the handler" in page
        assert 'id="replay"' in page
        token = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page)
        assert token is not None
        flaky.fixed = True
        client.post(f"/d/{record_id}/replay", data={"csrf_token": token[1]}, auth=auth)
    assert len(flaky.runs) == 2
    replays = receiver.inbox.get(record_id).replays  # type: ignore[union-attr]
    assert [(r.reason, r.forced) for r in replays] == [("processed", False)]


def test_a_replay_whose_handler_fails_in_the_database_leaves_the_others_work_under_atomic_requests(
    kit: ModuleType, admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``ATOMIC_REQUESTS``, the whole action ran in one transaction: a replayed
    handler's database error rolled back the deliveries replayed before it, their
    handlers' rows and records too, while the page said "200 processed"."""
    from sw_testapp.models import Delivery

    fixed = False

    def writes(event: Event[Any]) -> None:
        if not fixed:
            raise RuntimeError("a bug in the handler")
        Delivery.objects.create(note_id=event.data["id"])

    def conflicts(event: Event[Any]) -> None:
        if not fixed:
            raise RuntimeError("a bug in the handler")
        row = Delivery.objects.create(note_id=event.data["id"])
        Delivery.objects.create(pk=row.pk, note_id=event.data["id"])  # IntegrityError

    receiver.router.declare("test.writes", "test.conflicts")
    receiver.on("test.writes")(writes)
    receiver.on("test.conflicts")(conflicts)
    try:
        first, second = kit.envelope("test.writes"), kit.envelope("test.conflicts")
        assert (deliver(kit, first), deliver(kit, second)) == (500, 500)
        fixed = True
        monkeypatch.setitem(connections.settings["default"], "ATOMIC_REQUESTS", True)
        admin_client.get(URL)  # sets the CSRF cookie, as the page does
        action = {
            "action": "replay",
            "_selected_action": [recorded(first).id, recorded(second).id],
            "index": 0,
            "csrfmiddlewaretoken": admin_client.cookies["csrftoken"].value,
        }
        page = admin_client.post(URL, action, follow=True).content.decode()
    finally:
        receiver.remove(writes)
        receiver.remove(conflicts)
    assert f"Delivery {recorded(first).id}: 200 processed" in page
    assert f"Delivery {recorded(second).id}: 500 handler_failed" in page
    assert Delivery.objects.filter(note_id=json.loads(first)["data"]["id"]).count() == 1
    assert [r["reason"] for r in recorded(first).replays] == ["processed"]
    assert [r["reason"] for r in recorded(second).replays] == ["handler_failed"]
