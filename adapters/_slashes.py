"""The route :func:`~service_webhooks.adapters.asgi.webhook_routes` adds for repeated
trailing slashes (``/webhooks//``). Imports Starlette: imported once it is known to be
installed."""

from __future__ import annotations

from typing import Any

from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send

__all__ = ["SLASHES", "RepeatedSlashes"]

SLASHES = "service_webhooks_slashes"
"""The name of the Starlette path convertor for one or more ``/`` (regex ``/+``)."""


class _Slashes(Convertor[str]):
    regex = "/+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor(SLASHES, _Slashes())


class RepeatedSlashes(Route):
    """Answers ``bare`` followed by two or more slashes 404, as the app answers any
    unknown URL, where Starlette's ``redirect_slashes`` would answer a 307 to ``bare``
    (its ``rstrip("/")``): a 3xx the service never follows (spec §7).

    The match is partial, as Starlette's own method mismatches are: a route of the app
    that matches the URL in full still wins, wherever it is listed, and the app's
    ``redirect_slashes`` is left on for every other URL. The slashes are in the route's
    path (``bare + "/{slashes:service_webhooks_slashes}"``), not only in
    :meth:`matches`: FastAPI's ``include_router(..., prefix=...)`` rebuilds every
    route as a plain ``Route`` from its path and endpoint, and that one must still
    match ``/hooks/webhooks///`` (in full, then).

    Args:
        bare: The delivery path without a trailing slash (``"/webhooks"``).
    """

    def __init__(self, bare: str) -> None:
        super().__init__(f"{bare}/{{slashes:{SLASHES}}}", _NotFound(), include_in_schema=False)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)  # http only; every method (no methods=)
        return (Match.NONE, {}) if match is Match.NONE else (Match.PARTIAL, child)


class _NotFound:
    """Starlette's own answer to an unknown URL (``Router.not_found``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> Any:
        if "app" in scope:  # inside a Starlette or FastAPI app: its 404 handler answers
            raise HTTPException(status_code=404)
        await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
