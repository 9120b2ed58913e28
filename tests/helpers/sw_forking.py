"""Run the same work in this process and, at the same time, in a forked child.

For the PostgreSQL stores and inboxes, whose pools a child must not share with its
parent: ``beside_a_child(work)`` forks, runs ``work()`` in both processes at once and
returns both results. The child reports through a pipe and dies after 30 s rather than
hang (a reply the other process read never comes).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from typing import Any

__all__ = ["beside_a_child"]

Work = Callable[[], tuple[list[str], set[int]]]


def beside_a_child(work: Work) -> tuple[tuple[list[str], set[int]], tuple[list[str], set[int]]]:
    """``(parent's result, child's result)`` of ``work()``: errors met, server sessions."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        signal.alarm(30)
        try:
            errors, sessions = work()
            os.write(write, json.dumps([errors[:3], sorted(sessions)]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    parent = work()
    with os.fdopen(read) as pipe:
        report = pipe.read()
    _, status = os.waitpid(child, 0)
    assert status == 0, f"the child failed (status {status})"
    assert report, "the child did not report"
    child_errors, child_sessions = json.loads(report)
    reported: Any = (child_errors, set(child_sessions))
    return parent, reported
