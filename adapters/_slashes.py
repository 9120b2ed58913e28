"""The route :func:`~service_webhooks.adapters.asgi.webhook_routes` adds for repeated
trailing slashes (``/webhooks//``). Imports Starlette: imported once it is known to be
installed."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send

__all__ = ["RepeatedSlashes"]


class RepeatedSlashes(Route):
    """Answers ``bare`` followed by two or more slashes 404, as the app answers any
    unknown URL, where Starlette's ``redirect_slashes`` would answer a 307 to ``bare``
    (its ``rstrip("/")``): a 3xx the service never follows (spec §7).

    The match is partial, as Starlette's own method mismatches are: a route of the app
    that matches the URL in full still wins, wherever it is listed, and the app's
    ``redirect_slashes`` is left on for every other URL.

    Args:
        bare: The delivery path without a trailing slash (``"/webhooks"``).
    """

    def __init__(self, bare: str) -> None:
        super().__init__(bare + "//", _NotFound(), include_in_schema=False)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not path.endswith("//"):
            return Match.NONE, {}
        # every run of trailing slashes as two, then Starlette's own match (mount
        # points and root_path included) against bare + "//"
        match, child = super().matches({**scope, "path": path.rstrip("/") + "//"})
        return (Match.NONE, {}) if match is Match.NONE else (Match.PARTIAL, child)


class _NotFound:
    """Starlette's own answer to an unknown URL (``Router.not_found``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> Any:
        if "app" in scope:  # inside a Starlette or FastAPI app: its 404 handler answers
            raise HTTPException(status_code=404)
        await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
