"""SQLiteStore specifics beyond the shared contract."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from service_webhooks.stores import SQLiteStore


def test_sqlite_store_create_schema_creates_file_and_table(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "keys.sqlite3")
    store.create_schema()
    store.close()
    with closing(sqlite3.connect(tmp_path / "keys.sqlite3")) as connection:
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        assert [row[0] for row in tables] == ["service_webhooks_idempotency"]
