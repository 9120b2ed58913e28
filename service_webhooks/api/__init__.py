"""Client of the service's API: privacy settings history and operations (spec §4).

Sync and async clients share one no-I/O core (:mod:`._core`); only the I/O differs::

    from service_webhooks.api import Client

    with Client(api_key, base_url="https://api.example.com") as client:
        page = client.privacy_settings.history(limit=50)
        for op in client.operations.iter(state="PENDING"):
            print(op.id, op.state)

Install with the ``http`` extra (``pip install 'service-webhooks[http]'``). The fake
server for tests is :mod:`service_webhooks.testing.fake_api`.
"""

from __future__ import annotations

try:
    import httpx  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised only without the extra
    from .._extras import missing_extra

    raise missing_extra("http", "httpx", what=__name__, cause=error) from error

from .aclient import AsyncClient, AsyncOperations, AsyncPrivacySettings
from .client import Client, Operations, PrivacySettings
from .errors import (
    APIConnectionError,
    APIError,
    APIResponseError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    NotFoundError,
    PaginationError,
    ParameterError,
    RateLimitError,
    ServerError,
)
from .models import (
    NEVER,
    AjaxWatch,
    ElementBlock,
    HistoryPage,
    Metadata,
    Operation,
    OperationsPage,
    OperationState,
    OperationType,
    PrivacySettingsVersion,
    is_never,
)
from .pagination import AsyncPager, Pager

__all__ = [
    "NEVER",
    "APIConnectionError",
    "APIError",
    "APIResponseError",
    "APIStatusError",
    "APITimeoutError",
    "AjaxWatch",
    "AsyncClient",
    "AsyncOperations",
    "AsyncPager",
    "AsyncPrivacySettings",
    "AuthenticationError",
    "Client",
    "ElementBlock",
    "HistoryPage",
    "Metadata",
    "NotFoundError",
    "Operation",
    "OperationState",
    "OperationType",
    "Operations",
    "OperationsPage",
    "Pager",
    "PaginationError",
    "ParameterError",
    "PrivacySettings",
    "PrivacySettingsVersion",
    "RateLimitError",
    "ServerError",
    "is_never",
]
