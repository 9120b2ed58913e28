"""Children forked where Python's own fork hooks do not run: uWSGI forks its workers
from C and runs them only with ``--py-call-osafterfork``; it always calls its
``uwsgi.post_fork_hook``, which the library chains into when loaded inside uWSGI."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from service_webhooks import MemoryStore, WebhookReceiver
from service_webhooks._idempotency import OVERLAP_FROM

Signed = Callable[..., tuple[bytes, str]]


def _large_body(note_id: str) -> bytes:
    data = {"id": note_id, "author": "a@example.com", "text": "x" * OVERLAP_FROM}
    return json.dumps({"eventName": "note.created", "version": 1, "data": data}).encode()


@pytest.mark.skipif(sys.platform != "linux", reason="forks through libc directly")
def test_a_uwsgi_worker_runs_the_librarys_fork_hooks(
    monkeypatch: pytest.MonkeyPatch, secret: str, signed: Signed
) -> None:
    """A worker that uWSGI forked without Python's hooks draws its own claim tokens
    and hashes a large body on a thread of its own (it waited for ever for its
    parent's) once uWSGI calls its post-fork hook."""
    from service_webhooks import _forking, _idempotency

    uwsgi: Any = types.ModuleType("uwsgi")  # what uWSGI loads in its processes
    uwsgi.masterpid = lambda: 1
    monkeypatch.setitem(sys.modules, "uwsgi", uwsgi)
    _forking._hook_uwsgi()  # as when service_webhooks is imported inside uWSGI

    receiver = WebhookReceiver(secret, store=MemoryStore())
    receiver.on("note.created", lambda event: None)
    assert receiver.process(*signed(_large_body("n-parent"))).reason == "processed"
    prefix = _idempotency.new_token().split("-")[0]

    read, write = os.pipe()
    child = ctypes.CDLL(None).fork()  # no os.register_at_fork hook runs in the child
    if child == 0:  # pragma: no cover - the child reports through the pipe
        signal.alarm(10)  # a key that never comes: the child dies, the report is empty
        try:
            getattr(uwsgi, "post_fork_hook", lambda: None)()
            token = _idempotency.new_token()
            reason = receiver.process(*signed(_large_body("n-child"))).reason
            os.write(write, json.dumps([token.split("-")[0], reason]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = pipe.read()
    os.waitpid(child, 0)
    assert report, "the child did not report (its large body's key never came)"
    child_prefix, reason = json.loads(report)
    assert reason == "processed"
    assert child_prefix != prefix


def test_the_hooks_run_once_in_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under uWSGI with ``--py-call-osafterfork`` both Python's hook and uWSGI's run:
    the library's callbacks run once."""
    from service_webhooks import _forking

    calls: list[int] = []
    monkeypatch.setattr(_forking, "_CALLBACKS", [lambda: calls.append(os.getpid())])
    monkeypatch.setattr(_forking, "_ran_in", os.getpid())
    _forking._in_child()
    assert calls == []  # the process they last ran in
    monkeypatch.setattr(_forking, "_ran_in", -1)
    _forking._in_child()
    _forking._in_child()
    assert calls == [os.getpid()]


def test_the_hashing_thread_does_not_hold_up_an_exit(secret: str, signed: Signed) -> None:
    """A daemon thread: an exiting process joins an executor's threads, and a uWSGI
    worker forked without Python's hooks waited for ever for its master's."""
    import threading

    receiver = WebhookReceiver(secret, store=MemoryStore())
    assert receiver.process(*signed(_large_body("n-1"))).reason == "unhandled"
    hashing = [thread for thread in threading.enumerate() if thread.name == "service-webhooks-key"]
    assert hashing
    assert all(thread.daemon for thread in hashing)
