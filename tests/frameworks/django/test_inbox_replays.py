"""Replays appended to a :class:`DjangoInbox` record while other connections write: a
replay never fails for another writer (SQLite), and concurrent replays of one record
never lose one another's entry (SQLite and PostgreSQL)."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable

from django.db import connections
from sw_inbox_contract import delivery

from service_webhooks.adapters.django.inbox import DjangoInbox
from service_webhooks.adapters.django.models import ReceivedDeliveryRecord
from service_webhooks.inbox import Replay

UTC = datetime.UTC
AT = datetime.datetime(2026, 1, 1, tzinfo=UTC)


def replay(number: int) -> Replay:
    return Replay(at=AT + datetime.timedelta(seconds=number), status=200, reason="processed")


def in_thread(work: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    """``work`` in a started thread with its own connections (closed after); what it
    raises is appended to ``errors``."""

    def run() -> None:
        try:
            work()
        except BaseException as error:  # reported by the test
            errors.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_replay_waits_for_deliveries_being_recorded_instead_of_failing() -> None:
    """SQLite refuses at once (``database is locked``, no busy wait) a transaction that
    reads and then writes while another connection writes: a replay that read its record
    before appending to it failed while deliveries were being recorded (an admin Replay
    during traffic). Here two threads record deliveries while another appends replays,
    each write through its own connection to the SQLite file."""
    ReceivedDeliveryRecord.objects.using("default").all().delete()
    inbox = DjangoInbox(using="default")
    target = delivery(at=AT)
    inbox.record(target)
    connections.close_all()
    replays = 80
    errors: list[BaseException] = []
    done = threading.Event()

    def record_until_done() -> None:
        for number in range(2000):  # bounded; stops once the replays are done
            if done.is_set():
                return
            inbox.record(delivery(at=AT + datetime.timedelta(microseconds=number + 1)))

    def add_replays() -> None:
        try:
            for number in range(replays):
                assert inbox.add_replay(target.id, replay(number)) is True
        finally:
            done.set()

    try:
        recorders = [in_thread(record_until_done, errors) for _ in range(2)]
        threads = [*recorders, in_thread(add_replays, errors)]
        for thread in threads:
            thread.join()
        assert errors == []
        stored = inbox.get(target.id)
        assert stored is not None
        assert stored.replays == tuple(replay(number) for number in range(replays))
    finally:
        ReceivedDeliveryRecord.objects.using("default").all().delete()
        connections.close_all()


def test_concurrent_replays_of_one_record_are_all_kept(alias: str) -> None:
    """Several threads append replays to the same record at once: every replay is there
    at the end, each thread's in its order (none overwrote another's; on PostgreSQL the
    row lock orders them, on SQLite the write lock)."""
    inbox = DjangoInbox(using=alias)
    target = delivery(at=AT)
    inbox.record(target)
    workers, each = 8, 5
    theirs = [[replay(worker * each + n) for n in range(each)] for worker in range(workers)]
    errors: list[BaseException] = []
    start = threading.Barrier(workers)

    def add_all(replays: list[Replay]) -> Callable[[], None]:
        def work() -> None:
            start.wait()
            for one in replays:
                assert inbox.add_replay(target.id, one) is True

        return work

    for thread in [in_thread(add_all(replays), errors) for replays in theirs]:
        thread.join()
    assert errors == []
    stored = inbox.get(target.id)
    assert stored is not None
    assert sorted(stored.replays, key=lambda r: r.at) == [r for mine in theirs for r in mine]
    for mine in theirs:
        assert [r for r in stored.replays if r in mine] == mine
