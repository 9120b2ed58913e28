"""Typed, immutable models of the API's resources (spec §2.1-2.5, §4).

Rules, from spec §9 (compatible changes must not break a client):

- Attributes are snake_case; the JSON names (``elementBlocks``) are the wire names.
- Unknown fields are ignored.
- Enumerated strings are open: a field such as :attr:`Operation.state` is a plain
  ``str``, so a value added by the service later decodes fine. The known values are
  the ``StrEnum`` classes below, which compare equal to the strings
  (``op.state == OperationState.PENDING``).
- Timestamps are timezone-aware :class:`~datetime.datetime` (UTC). The zero time
  ``0001-01-01T00:00:00Z``, which the service sends for "never", is kept as is
  (:data:`NEVER`); test it with :func:`is_never` or the ``never_*`` properties.
- Nullable fields whose structure is not documented (spec §2.8) are decoded JSON
  (``dict``, ``list``, ``str`` ...) or ``None``.
- Arrays are tuples, so a model cannot be changed after decoding.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import msgspec

__all__ = [
    "NEVER",
    "AjaxWatch",
    "ElementBlock",
    "HistoryPage",
    "Metadata",
    "Operation",
    "OperationState",
    "OperationType",
    "OperationsPage",
    "PrivacySettingsVersion",
    "is_never",
]

Timestamp = Annotated[datetime, msgspec.Meta(tz=True)]
"""An ISO 8601 timestamp that must carry a zone (the service sends ``Z``)."""

NEVER: datetime = datetime(1, 1, 1, tzinfo=UTC)
"""The zero time ``0001-01-01T00:00:00Z``: the service's way to say "never"."""


def is_never(value: datetime) -> bool:
    """Tell whether ``value`` is the zero time the service uses for "never".

    Args:
        value: An aware datetime decoded from the API.

    Returns:
        ``True`` for ``0001-01-01T00:00:00Z`` (spec §2.2 ``lastUpdated``).
    """
    return value == NEVER


class OperationState(StrEnum):
    """Known operation states (spec §2.5, §3.1). Others may appear (spec §9)."""

    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class OperationType(StrEnum):
    """Known operation types (spec §2.5). Others may appear (spec §9)."""

    DELETE_USER = "DELETE_USER"
    DELETE_SESSION = "DELETE_SESSION"
    DELETE_SEGMENT_SESSIONS = "DELETE_SEGMENT_SESSIONS"
    DELETE_SEGMENT_USERS = "DELETE_SEGMENT_USERS"
    SEARCH_EXPORT = "SEARCH_EXPORT"


class _Model(msgspec.Struct, frozen=True, rename="camel", omit_defaults=False):
    """Base of every model: immutable, camelCase wire names."""


class ElementBlock(_Model, frozen=True):
    """One element block of a privacy settings version (spec §2.2).

    ``type`` (observed ``BLOCK_EXCLUDE``), ``scope`` (``ALL_SESSIONS``) and
    ``editable`` (``EDITABLE_DESCRIPTION_ONLY``) are open enums: plain strings.
    """

    selector: str
    consent: bool = False
    notes: str = ""
    type: str = ""
    scope: str = ""
    last_updated: Timestamp = NEVER
    label: str = ""
    targeting_conditions: Any = None
    editable: str = ""
    exception_selectors: tuple[Any, ...] = ()
    group_id: int = 0

    @property
    def never_updated(self) -> bool:
        """``True`` when ``lastUpdated`` is the zero time (the block was never updated)."""
        return self.last_updated == NEVER


class AjaxWatch(_Model, frozen=True):
    """One ajax watch of a privacy settings version (spec §2.3).

    ``record_req`` (observed ``ELIDE``) and ``record_rsp`` (``WHITELIST``) are open enums.
    """

    url_regex: str
    record_req: str = ""
    record_rsp: str = ""
    whitelist_req: str = ""
    whitelist_rsp: str = ""


class Metadata(_Model, frozen=True):
    """Who created and last changed a privacy settings version, and when (spec §2.4)."""

    last_updated: Timestamp = NEVER
    last_updated_by: str = ""
    created: Timestamp = NEVER
    created_by: str = ""


class PrivacySettingsVersion(_Model, frozen=True):
    """One version of the recording privacy settings (spec §2.1).

    ``default_privacy_mode`` (observed ``PRIVACY_MODE_OFF``) is an open enum;
    ``element_rule_groups`` is an undocumented object (spec §2.8), often empty.
    """

    element_blocks: tuple[ElementBlock, ...] = ()
    ajax_watches: tuple[AjaxWatch, ...] = ()
    discard_ip_addresses: bool = False
    metadata: Metadata = Metadata()
    default_privacy_mode: str = ""
    element_rule_groups: dict[str, Any] = msgspec.field(default_factory=dict)


class Operation(_Model, frozen=True):
    """A long-running operation (spec §2.5).

    ``state`` and ``type`` are open enums: compare with :class:`OperationState` and
    :class:`OperationType`. ``error_details`` is ``""`` when there is no error;
    ``estimate_pct_complete`` is a percentage (0-100).
    """

    id: str
    type: str
    state: str
    created_at: Timestamp
    finished_at: Timestamp = NEVER
    details: Any = None
    results: Any = None
    error_details: str = ""
    estimate_pct_complete: float = 0.0

    @property
    def never_finished(self) -> bool:
        """``True`` when ``finishedAt`` is the zero time (the operation has not ended)."""
        return self.finished_at == NEVER


class HistoryPage(msgspec.Struct, frozen=True):
    """One page of ``GET /settings/recording/v1/privacy/history`` (spec §4.1).

    ``next_pagination_token`` is empty or ``None`` on the last page (spec §4.4 leaves
    the last page's value open, so both end the iteration). ``versions`` is required:
    a body without it (``{}``, an error object sent with a 200) is not an empty last
    page but an error (spec §9: removing a field is an incompatible change).
    """

    versions: tuple[PrivacySettingsVersion, ...]
    next_pagination_token: str | None = None

    @property
    def items(self) -> tuple[PrivacySettingsVersion, ...]:
        """The page's versions (same as :attr:`versions`)."""
        return self.versions


class OperationsPage(
    msgspec.Struct, frozen=True, rename={"next_pagination_token": "nextPaginationToken"}
):
    """One page of ``GET /operations/v1`` (spec §4.2).

    ``next_pagination_token`` (wire name ``nextPaginationToken``, unlike history's
    snake_case field) is empty or ``None`` on the last page. ``operations`` is
    required, like ``versions`` on a history page.
    """

    operations: tuple[Operation, ...]
    next_pagination_token: str | None = None

    @property
    def items(self) -> tuple[Operation, ...]:
        """The page's operations (same as :attr:`operations`)."""
        return self.operations
