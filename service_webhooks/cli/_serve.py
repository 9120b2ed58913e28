"""Run a uvicorn server in the foreground until the operator stops it.

``listen`` and ``api serve-fake`` serve until Ctrl-C (SIGINT) or SIGTERM (``kill``,
``docker stop``, a process manager). uvicorn finishes the requests in progress, then
re-raises the signal it caught: SIGINT would become click's ``Aborted!`` and exit
status 1, SIGTERM would kill the process (status 143). A stop the operator asked for
is not a failure, so :func:`serve_until_stopped` returns instead and the command exits
with status 0, with nothing on stderr after uvicorn's own shutdown lines.
"""

from __future__ import annotations

import copy
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any

__all__ = ["bind", "log_config", "serve_until_stopped"]


class _Stopped(SystemExit):
    """Raised by the SIGTERM handler outside uvicorn's own signal handling.

    A :class:`SystemExit` (status 0), so asyncio lets it through as it does
    ``KeyboardInterrupt``, rather than logging it from a callback."""

    def __init__(self) -> None:
        super().__init__(0)


def bind(host: str, port: int) -> socket.socket:
    """Bind and listen before uvicorn starts, so port 0 is resolved and reported.

    Raises:
        OSError: The address is in use, not local, or does not resolve.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve_until_stopped(server: Any, sock: socket.socket) -> None:
    """``server.run(sockets=[sock])`` until Ctrl-C or SIGTERM, then return normally.

    Args:
        server: A ``uvicorn.Server``.
        sock: The bound, listening socket it serves on.
    """
    with _sigterm_stops(), suppress(KeyboardInterrupt, _Stopped):
        server.run(sockets=[sock])


@contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM raises :class:`_Stopped` while this is entered (main thread only):
    before uvicorn installs its handlers, and when it re-raises the signal after its
    graceful shutdown."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise _Stopped


def log_config(*, level: str = "INFO") -> dict[str, Any]:
    """uvicorn's logging config with every handler on stderr, plus the receiver's logger.

    Colours only when stderr is a terminal and ``NO_COLOR`` is unset (uvicorn alone
    decides from stdout, so ``listen 2>listen.log`` on a terminal wrote ANSI escapes
    into the file).

    Args:
        level: Level of uvicorn's loggers and of the ``service_webhooks`` logger.
    """
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    colours = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    for formatter in config["formatters"].values():
        formatter["use_colors"] = colours
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    for logger in config["loggers"].values():
        if "level" in logger:
            logger["level"] = level
    config["loggers"]["service_webhooks"] = {
        "handlers": ["default"],
        "level": level,
        "propagate": False,
    }
    return config
