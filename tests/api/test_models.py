"""Models of spec §2.1-2.5: wire names, aware timestamps, open enums, immutability."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

import service_webhooks.api as api_module
from service_webhooks.api import (
    NEVER,
    ElementBlock,
    HistoryPage,
    Operation,
    OperationsPage,
    OperationState,
    OperationType,
    is_never,
)
from service_webhooks.testing.fake_api import make_operations, make_versions

OPERATION = {
    "id": "op-1",
    "type": "SEARCH_EXPORT",
    "details": None,
    "results": {"url": "https://x"},
    "state": "COMPLETED",
    "errorDetails": "",
    "createdAt": "2024-05-01T12:00:00Z",
    "finishedAt": "2024-05-01T12:30:00.250+02:00",
    "estimatePctComplete": 100,
}


def test_operation_fields_use_the_wire_names() -> None:
    op = msgspec.json.decode(msgspec.json.encode(OPERATION), type=Operation)
    assert op.id == "op-1"
    assert op.type == OperationType.SEARCH_EXPORT
    assert op.state == OperationState.COMPLETED
    assert op.results == {"url": "https://x"}
    assert op.details is None
    assert op.estimate_pct_complete == 100.0
    assert op.created_at == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert op.finished_at.utcoffset() == timedelta(hours=2)
    assert op.finished_at == datetime(2024, 5, 1, 10, 30, 0, 250000, tzinfo=UTC)
    assert msgspec.json.decode(msgspec.json.encode(op)) == OPERATION | {
        "createdAt": "2024-05-01T12:00:00Z",
        "finishedAt": "2024-05-01T12:30:00.250000+02:00",
        "estimatePctComplete": 100.0,
    }


def test_unknown_enum_values_and_fields_decode() -> None:
    raw = OPERATION | {"state": "ARCHIVED", "type": "NEW_KIND", "newField": [1, 2]}
    op = msgspec.json.decode(msgspec.json.encode(raw), type=Operation)
    assert op.state == "ARCHIVED"
    assert op.type == "NEW_KIND"
    assert type(op.state) is str


def test_naive_timestamps_are_refused() -> None:
    raw = OPERATION | {"createdAt": "2024-05-01T12:00:00"}
    with pytest.raises(msgspec.ValidationError, match="timezone"):
        msgspec.json.decode(msgspec.json.encode(raw), type=Operation)


def test_zero_time_means_never() -> None:
    block = msgspec.json.decode(
        b'{"selector": "#x", "lastUpdated": "0001-01-01T00:00:00Z", "groupId": 3}',
        type=ElementBlock,
    )
    assert block.last_updated == NEVER
    assert block.never_updated
    assert is_never(block.last_updated)
    assert not is_never(datetime(1970, 1, 1, tzinfo=UTC))
    assert msgspec.json.encode(block.last_updated) == b'"0001-01-01T00:00:00Z"'


def test_models_are_immutable() -> None:
    op = msgspec.json.decode(msgspec.json.encode(OPERATION), type=Operation)
    with pytest.raises(AttributeError):
        op.state = "FAILED"  # type: ignore[misc]
    page = msgspec.json.decode(
        msgspec.json.encode({"versions": make_versions(2)}), type=HistoryPage
    )
    assert isinstance(page.versions, tuple)
    assert isinstance(page.versions[0].element_blocks, tuple)


def test_every_fake_resource_decodes_and_keeps_its_values() -> None:
    versions = make_versions(6)
    page = msgspec.json.decode(
        msgspec.json.encode({"versions": versions, "next_pagination_token": "n"}), type=HistoryPage
    )
    assert page.next_pagination_token == "n"
    assert page.items == page.versions
    first, raw = page.versions[0], versions[0]
    assert first.discard_ip_addresses is raw["discardIpAddresses"]
    assert first.metadata.last_updated_by == raw["metadata"]["lastUpdatedBy"]
    assert first.metadata.last_updated.microsecond == 123000
    assert first.ajax_watches[0].url_regex == raw["ajaxWatches"][0]["urlRegex"]
    assert first.ajax_watches[0].record_req == "ELIDE"
    assert first.ajax_watches[0].whitelist_rsp == "id,name"
    assert first.element_blocks[0].group_id == raw["elementBlocks"][0]["groupId"]
    assert first.element_rule_groups == {}
    operations, _ = make_operations(9)
    ops_page = msgspec.json.decode(
        msgspec.json.encode({"operations": operations, "nextPaginationToken": ""}),
        type=OperationsPage,
    )
    assert [op.id for op in ops_page.items] == [op["id"] for op in operations]
    assert ops_page.next_pagination_token == ""


def test_public_names() -> None:
    assert api_module.__all__ == sorted(api_module.__all__, key=lambda n: (not n.isupper(), n))
    for name in api_module.__all__:
        assert getattr(api_module, name) is not None
    # pytest's assertion rewriting adds "@py_builtins" and "@pytest_ar" to the modules
    # of a package that registers a pytest plugin, as this one does
    public = {n for n in vars(api_module) if not n.startswith(("_", "@"))}
    exported = set(api_module.__all__)
    modules = {"aclient", "client", "errors", "models", "pagination", "annotations", "httpx"}
    assert public - modules == exported
