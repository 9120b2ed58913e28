"""A web dashboard over the inbox: list, detail with replay, overview (``dashboard`` extra).

:func:`dashboard` returns an ASGI app to mount in Starlette or FastAPI
(``Mount("/webhooks/admin", app=dashboard(inbox, receiver=receiver, basic_auth=...))``)
or to serve on its own (``service-webhooks inbox serve``, beside a Flask project;
beside Django, ``dashboard(receiver=receiver)`` over its ORM inbox). It reads the
inbox only through its public query API (:mod:`service_webhooks.inbox`) and replays
through :meth:`~service_webhooks.WebhookReceiver.areplay`.

Every request must be authenticated (HTTP Basic credentials or an ``authorize(scope)``
callable); replay is a POST carrying a CSRF token, from the dashboard's own origin (or
one of its ``trusted_origins``, behind a proxy that rewrites ``Host``); pages are
rendered by Jinja2 with autoescaping, served with a strict Content-Security-Policy, and
use no JavaScript and no external resource.
"""

from __future__ import annotations

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised only without the extra
    # the core's wording (service_webhooks._extras), which this layer may not import:
    # every module of the extra that is missing, not only the first one imported
    from importlib.util import find_spec

    _missing = [name for name in ("jinja2", "starlette") if find_spec(name) is None]
    raise ImportError(
        f"service_webhooks.dashboard needs the 'dashboard' extra"
        f" ({', '.join(_missing or [str(error.name)])} missing):"
        " pip install 'service-webhooks[dashboard]'"
    ) from error

from ._app import SECURITY_HEADERS, Authorize, Dashboard, dashboard

__all__ = ["SECURITY_HEADERS", "Authorize", "Dashboard", "dashboard"]
