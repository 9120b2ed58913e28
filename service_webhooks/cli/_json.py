"""JSON typed on the command line or read from a file, strictly (RFC 8259)."""

from __future__ import annotations

import json
from typing import Any

import click


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def strict_loads(text: str | bytes) -> Any:
    """:func:`json.loads`, but ``NaN``, ``Infinity`` and ``-Infinity`` are refused: sent
    as they are, they make a body that is no JSON; re-encoded, they become ``null``,
    which is not what was written.

    A lone surrogate escape (``"\\ud83d"``) is refused too: it decodes, but no UTF-8
    body can hold it.

    Raises:
        ValueError: Not JSON (``json.JSONDecodeError``), one of those constants, or a
            lone surrogate.
    """
    value = json.loads(text, parse_constant=_refuse_constant)
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError as error:
        raise ValueError(f"a lone surrogate ({error.object[error.start]!r}) is no text") from None
    return value


def json_option(text: str, option: str) -> Any:
    """The value of ``option`` (``--data``) read with :func:`strict_loads`.

    Raises:
        click.BadParameter: Not JSON: a usage error naming ``option``.
    """
    try:
        return strict_loads(text)
    except ValueError as error:
        raise click.BadParameter(f"not valid JSON: {error}", param_hint=option) from error
