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

    Raises:
        ValueError: Not JSON (``json.JSONDecodeError``), or one of those constants.
    """
    return json.loads(text, parse_constant=_refuse_constant)


def json_option(text: str, option: str) -> Any:
    """The value of ``option`` (``--data``) read with :func:`strict_loads`.

    Raises:
        click.BadParameter: Not JSON: a usage error naming ``option``.
    """
    try:
        return strict_loads(text)
    except ValueError as error:
        raise click.BadParameter(f"not valid JSON: {error}", param_hint=option) from error
