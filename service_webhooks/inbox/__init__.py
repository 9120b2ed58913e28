"""The inbox: every authenticated delivery, kept with its answer, queryable and replayable.

=======================  =============================================  ===========
backend                  shared by                                      extra
=======================  =============================================  ===========
:class:`MemoryInbox`     one process, bounded (tests, development)      -
:class:`SQLiteInbox`     processes on one machine (the default)         -
:class:`PostgresInbox`   processes and machines (psycopg 3)             ``postgres``
=======================  =============================================  ===========

A :class:`~service_webhooks.WebhookReceiver` records every delivery that passed
signature verification (spec §5.2) before answering it, and
:meth:`~service_webhooks.WebhookReceiver.replay` runs the handlers again on a stored
body. :func:`inbox_from_url` builds a backend from ``memory``, ``sqlite:PATH`` or
``postgresql://…``. ``PostgresInbox`` is imported on first use, so this package imports
without psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._base import (
    DEFAULT_INBOX_RETENTION,
    Inbox,
    InboxPage,
    InboxQuery,
    ReceivedDelivery,
    Replay,
    SyncInbox,
)
from ._memory import MemoryInbox
from ._sqlite import SQLiteInbox
from ._url import inbox_from_url

if TYPE_CHECKING:
    from ._postgres import PostgresInbox

__all__ = [
    "DEFAULT_INBOX_RETENTION",
    "Inbox",
    "InboxPage",
    "InboxQuery",
    "MemoryInbox",
    "PostgresInbox",
    "ReceivedDelivery",
    "Replay",
    "SQLiteInbox",
    "SyncInbox",
    "inbox_from_url",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresInbox":
        from ._postgres import PostgresInbox

        return PostgresInbox
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
