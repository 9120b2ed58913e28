"""Settings names the Flask and Django adapters do not know: most likely misspelt.

A misspelt key (``TOLERENCE``) is silently ignored by a dict lookup, so the receiver runs
with the default the user meant to change; both adapters name such keys, with the
closest known one.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable

__all__ = ["unknown_settings"]


def unknown_settings(
    keys: Iterable[object], known: Collection[str], prefix: str = ""
) -> list[tuple[str, str | None]]:
    """Every ``str`` key of ``keys`` starting with ``prefix`` and not in ``known``, with
    the known key it most likely meant (:mod:`difflib`), or ``None``; in ``keys``' order.

    ``unknown_settings(["TOLERENCE"], ["TOLERANCE"])`` -> ``[("TOLERENCE", "TOLERANCE")]``.
    """
    found: list[tuple[str, str | None]] = []
    for key in keys:
        if isinstance(key, str) and key.startswith(prefix) and key not in known:
            close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
            found.append((key, close[0] if close else None))
    return found
