"""A SQLite file that could not be written when a connection opened it (a read-only file
or file system, no permission yet) is written again, with no restart, once it can be.

SQLite opens such a file read-only without a word, and that connection stays read-only
for ever: every write fails with "attempt to write a readonly database". A receiver
that kept it answered 503 to every delivery until its process was restarted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from service_webhooks import SQLiteStore, WebhookReceiver, sign
from service_webhooks.inbox import SQLiteInbox
from service_webhooks.inbox._base import ReceivedDelivery, from_micros, new_record_id
from service_webhooks.stores import ClaimState

SECRET = "whsec-read-only"
ORG = "o-READ-ONLY"
BODY = b'{"eventName":"note.created","version":1,"data":{"id":"n-1","author":"a","text":"t"}}'


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """``paths`` cannot be opened for writing inside the block: their mode is 0444, or,
    for root (whom modes do not stop), they are made immutable (``chattr +i``)."""
    if os.geteuid() != 0:
        modes = [path.stat().st_mode for path in paths]
        for path in paths:
            path.chmod(0o444)
        try:
            yield
        finally:
            for path, mode in zip(paths, modes, strict=True):
                path.chmod(mode)
        return
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("chattr is needed to make a file read-only for root")
    made = subprocess.run([chattr, "+i", *map(str, paths)], capture_output=True, text=True)
    if made.returncode != 0:
        subprocess.run([chattr, "-i", *map(str, paths)], capture_output=True)
        pytest.skip(f"chattr +i is not possible here: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", *map(str, paths)], check=True)


def _existing(path: Path) -> Path:
    """A database file with the store's and the inbox's tables (as a receiver leaves it)."""
    store, inbox = SQLiteStore(path), SQLiteInbox(path)
    store.create_schema()
    inbox.search()
    store.close()
    inbox.close()
    return path


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_a_store_opened_while_its_file_was_read_only_writes_once_it_is_not(
    tmp_path: Path, run_async: bool
) -> None:
    store = SQLiteStore(_existing(tmp_path / "keys.sqlite3"))

    async def claim(key: str) -> ClaimState:
        return await store.aclaim(key, "t", 60) if run_async else store.claim(key, "t", 60)

    with read_only(store.path), pytest.raises(sqlite3.OperationalError, match="readonly"):
        await claim("k-1")
    assert await claim("k-1") is ClaimState.NEW  # was: readonly until a restart
    store.close()


def _left_by_a_killed_process(path: Path) -> tuple[Path, Path, Path]:
    """The file, its WAL and its shared-memory file, as a process killed while it had
    the file open leaves them (the last connection to close deletes the other two)."""
    _existing(path)
    code = (
        "import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1]);"
        " c.execute('SELECT count(*) FROM service_webhooks_idempotency').fetchall();"
        " os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    files = path, Path(f"{path}-wal"), Path(f"{path}-shm")
    assert all(file.exists() for file in files)
    return files


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
async def test_a_receiver_answers_503_while_its_file_is_read_only_then_200_without_restart(
    tmp_path: Path, run_async: bool
) -> None:
    """The WAL and its shared memory are read-only too: every connection of the process
    that SQLite opens while one opened then is still open is read-only as well."""
    files = _left_by_a_killed_process(tmp_path / "webhooks.sqlite3")
    path = files[0]
    receiver = WebhookReceiver(SECRET, store=f"sqlite:{path}")  # its inbox: the same file
    runs: list[str] = []
    receiver.on("note.created")(lambda event: runs.append(event.data.id))

    async def deliver() -> tuple[int, str]:
        signature = sign(BODY, SECRET, ORG)
        if run_async:
            outcome = await receiver.aprocess(BODY, signature)
        else:
            outcome = receiver.process(BODY, signature)
        return outcome.status, outcome.reason

    with read_only(*files):
        assert await deliver() == (503, "store_unavailable")
        assert await deliver() == (503, "store_unavailable")
    assert await deliver() == (200, "processed")
    assert await deliver() == (200, "duplicate")
    assert runs == ["n-1"]
    assert receiver.inbox is not None
    assert [record.reason for record in receiver.inbox.search().items] == [
        "duplicate",
        "processed",
    ]
    receiver.store.close()  # type: ignore[attr-defined]
    receiver.inbox.close()  # type: ignore[attr-defined]


def _delivery() -> ReceivedDelivery:
    micros = 1_700_000_000_000_000
    return ReceivedDelivery(
        id=new_record_id(micros),
        received_at=from_micros(micros),
        organization_id=ORG,
        event_name="note.created",
        version=1,
        idempotency_key="k",
        body=BODY,
        content_type=None,
        user_agent=None,
        status=200,
        reason="processed",
        detail="",
        error_type=None,
        error_message=None,
        traceback=None,
        handler_time=0.001,
    )


def test_an_inbox_opened_while_its_file_was_read_only_records_once_it_is_not(
    tmp_path: Path,
) -> None:
    """A SQLite inbox beside another store (Redis, say) records through its own
    connections: the same holds for them."""
    inbox = SQLiteInbox(_existing(tmp_path / "inbox.sqlite3"))
    with read_only(inbox.path), pytest.raises(sqlite3.OperationalError, match="readonly"):
        inbox.record(_delivery())
    inbox.record(_delivery())  # was: readonly until a restart
    assert [record.reason for record in inbox.search().items] == ["processed"]
    inbox.close()
