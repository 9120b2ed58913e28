"""Missing-extra errors: one wording for every optional part of the package.

``require_extra("redis", "redis", what="RedisStore")`` raises ``ImportError: RedisStore
needs the 'redis' extra (redis missing): pip install 'service-webhooks[redis]'``. The
adapters' :func:`service_webhooks.adapters.require_extra` and the dashboard (which take
public names only) word theirs the same way.
"""

from __future__ import annotations

from importlib.util import find_spec

__all__ = ["CLI_COMMAND", "CLI_MODULES", "missing_extra", "require_extra"]

CLI_MODULES = ("click", "rich", "httpx", "uvicorn")
"""What the ``cli`` extra brings, each checked by name: Flask and Celery bring click
without the rest, and importing uvicorn would slow down ``service-webhooks --help``."""

CLI_COMMAND = "the service-webhooks command"
"""What needs :data:`CLI_MODULES`, as a missing ``cli`` extra's message starts."""


def _missing(modules: tuple[str, ...]) -> list[str]:
    """The top-level ``modules`` that cannot be imported (not installed, or blocked by
    ``sys.modules[name] = None``)."""
    found = []
    for name in modules:
        try:
            if find_spec(name) is None:
                found.append(name)
        except ValueError:  # in sys.modules without a __spec__ (__main__): there
            pass
    return found


def missing_extra(
    extra: str, *modules: str, what: str, cause: BaseException | None = None
) -> ImportError:
    """The error for ``what`` when it cannot import what ``extra`` installs.

    Args:
        extra: The extra, as ``pip install 'service-webhooks[extra]'`` takes it
            (``"postgres"``; ``"http,asgi"`` for two).
        modules: The top-level modules the extra brings (``"psycopg", "psycopg_pool"``).
        what: What needs them, as the message starts (``"PostgresStore"``).
        cause: The import's own error, named when none of ``modules`` is missing (one is
            installed but fails to import).

    Returns:
        An ``ImportError`` naming the missing modules and the ``pip install`` command.
    """
    names = extra.split(",")
    extras = " and ".join(f"'{name}'" for name in names)
    extras += " extras" if len(names) > 1 else " extra"
    missing = _missing(modules)
    detail = f"{', '.join(missing)} missing" if missing else (str(cause) if cause else "")
    needs = f"{what} needs the {extras}" + (f" ({detail})" if detail else "")
    return ImportError(f"{needs}: pip install 'service-webhooks[{extra}]'")


def require_extra(extra: str, *modules: str, what: str) -> None:
    """Check that ``modules`` can be imported, before ``what`` imports them.

    Raises:
        ImportError: One is missing: :func:`missing_extra`'s message.
    """
    if _missing(modules):
        raise missing_extra(extra, *modules, what=what)
