"""SIGTERM stops a command's run as Ctrl-C does.

``trigger`` and ``deliver`` run one coroutine under :func:`asyncio.run`. Ctrl-C cancels
it, and the command reports what it did so far (the attempts, the summary, the audit
log, the events not delivered). SIGTERM (``kill``, ``timeout``, a CI job cancelled, a
container stopped) killed the process instead, silently: no summary, no audit log.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

__all__ = ["SIGTERM_EXIT", "cancel_on_sigterm"]

SIGTERM_EXIT = 128 + signal.SIGTERM
"""The exit code after SIGTERM (143), as a shell reports a command it stopped."""


def cancel_on_sigterm() -> list[bool]:
    """From the running command's main coroutine: on SIGTERM, cancel its task, as
    Ctrl-C does. Returns a list that holds ``True`` once SIGTERM came (the exit code
    then is :data:`SIGTERM_EXIT`, not 130). The handler goes with the event loop."""
    received: list[bool] = []
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - always called from a task
        return received

    def stop() -> None:
        received.append(True)
        task.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        # not on Windows' loop, nor from a thread other than the main one
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)
    return received
