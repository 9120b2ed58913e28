"""A ``click.FloatRange`` that refuses ``nan`` and ``inf``.

``click.FloatRange(min=0)`` lets ``nan`` through (every comparison with it is false), so
``--timeout nan`` reached the HTTP client and ended in a traceback, and ``--tolerance
nan`` was reported against another option. These are usage errors (exit 2) naming the
option.
"""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["FiniteRange"]


class FiniteRange(click.FloatRange):
    """A finite number in the range (seconds, a share): ``nan`` and ``inf`` are refused."""

    name = "float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number
