"""``api ... --json``: every resource as the service sent it, one per line.

The client decodes a page into models, which keep only the fields spec §2 lists. Spec
§9 lets the service add a field anywhere (a compatible change, no new version), and
whoever pipes ``--json`` into ``jq`` or a file wants what the service said, not what
this version of the library knows. So a response event hook keeps the last response
the client got, and each resource of a page is cut out of that body as its own JSON
text, written on one line without the whitespace between tokens: keys, their order,
numbers and strings stay exactly as sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import msgspec

__all__ = ["LastResponse", "json_lines"]


class LastResponse:
    """An ``httpx`` response event hook keeping the last response the client got.

    The client reads each response before it returns, so after a call
    ``recorder.response.content`` is the body of the page it decoded (after retries,
    the one that succeeded).
    """

    def __init__(self) -> None:
        self.response: httpx.Response | None = None

    def __call__(self, response: httpx.Response) -> None:
        self.response = response


def json_lines(items: Sequence[Any], response: httpx.Response | None, field: str) -> list[str]:
    """One JSON line per resource of a page, as the service sent it.

    Args:
        items: The page's decoded resources (``page.items``).
        response: The response the page was decoded from.
        field: The body's array of resources: ``versions`` or ``operations``.

    Returns:
        The text of each element of ``field``, compacted onto one line; the models
        encoded instead when the body does not hold exactly ``items`` (it always
        does: the client decoded the page from it).
    """
    sent = _elements(response, field)
    if sent is None or len(sent) != len(items):
        return [msgspec.json.encode(item).decode() for item in items]
    return [msgspec.json.format(raw, indent=-1).decode() for raw in sent]


def _elements(response: httpx.Response | None, field: str) -> list[msgspec.Raw] | None:
    if response is None:
        return None
    try:
        body = msgspec.json.decode(response.content, type=dict[str, msgspec.Raw])
        raw = body.get(field)
        return None if raw is None else msgspec.json.decode(raw, type=list[msgspec.Raw])
    except (msgspec.DecodeError, httpx.ResponseNotRead):
        return None
