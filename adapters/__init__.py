"""Framework adapters: ``asgi`` (Starlette, FastAPI, any ASGI app), ``flask`` and ``django``.

Import each by its full name (``service_webhooks.adapters.flask``); this package imports
none of them, nor any framework.
"""

from __future__ import annotations

from importlib.util import find_spec

__all__ = ["require_extra"]


def require_extra(extra: str, *modules: str) -> None:
    """Check that the modules an adapter needs are installed, before it imports them.

    Args:
        extra: The extra that installs them, and the adapter's name (``"flask"``).
        modules: Top-level module names (``"flask", "werkzeug"``).

    Raises:
        ImportError: One of ``modules`` is not installed; the message names the
            extra to install instead of the module deep inside the adapter.
    """
    missing = [name for name in modules if find_spec(name) is None]
    if missing:
        raise ImportError(
            f"service_webhooks.adapters.{extra} needs the '{extra}' extra"
            f" ({', '.join(missing)} missing): pip install 'service-webhooks[{extra}]'"
        )
