"""Settings as the Flask and Django adapters' users spell them, in warnings and errors.

A misspelt key (``TOLERENCE``) is silently ignored by a dict lookup, so the receiver runs
with the default the user meant to change; both adapters name such keys, with the
closest known one. A value the receiver refuses is named by its setting too: the
receiver's own message names its argument (``lease``), which the user never wrote.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager

from service_webhooks import ConfigurationError

__all__ = ["check_secrets_setting", "named_settings", "unknown_settings"]


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


@contextmanager
def named_settings(spelled: Mapping[str, str]) -> Iterator[None]:
    """Re-raise a :class:`ConfigurationError` the receiver raises for one of its
    arguments as one naming the setting that gave it: ``spelled`` maps each argument
    given to its setting as the user wrote it (``{"lease":
    "app.config['SERVICE_WEBHOOKS_LEASE']"}``).

    The argument is the message's first word (``lease must be ...``), else the one
    argument the message names (``unknown store URL ...``); an error naming no single
    argument passes through unchanged.
    """
    try:
        yield
    except ConfigurationError as error:
        message = str(error)
        first = message.split(" ", 1)[0]
        named = [arg for arg in spelled if arg == first] or [
            arg for arg in spelled if re.search(rf"\b{re.escape(arg)}\b", message)
        ]
        if len(named) != 1:
            raise
        raise ConfigurationError(f"{spelled[named[0]]}: {message}") from None


def check_secrets_setting(value: object, name: str) -> None:
    """Refuse a secrets setting that is one ``str`` with whitespace inside: several
    secrets run together (``"new old"``, as the ``service-webhooks`` command's
    ``SERVICE_WEBHOOKS_SECRET`` holds a rotation), which as one secret would verify
    nothing, every delivery answered 401 and never retried. The core keeps such a
    ``str`` whole; a setting, mostly read from the environment, asks for a list.

    The same holds for each value of an ``{organization ID: secrets}`` mapping.

    Raises:
        ConfigurationError: Naming ``name`` (as the user spells the setting, and the
            organization for a mapping's value), never the value.
    """
    if isinstance(value, Mapping):
        for organization_id, secrets in value.items():
            check_secrets_setting(secrets, f"{name}[{organization_id!r}]")
    elif isinstance(value, str) and len(value.split()) > 1:
        raise ConfigurationError(
            f"{name} holds whitespace: give several secrets (a rotation, newest first) as a "
            'list, from the environment as JSON (\'["new", "old"]\'), or str.split() '
            "them; a secret with a space in it: a list of one, or Secret(...)"
        )
