"""One of several processes writing a capped inbox at once (``test_size_cap.py``).

    python size_cap_writer.py sqlite|postgres PATH-OR-URL TABLE MAX_BYTES PRUNE_EVERY COUNT SEED

Records ``COUNT`` deliveries of varied sizes (bodies, some tracebacks), received now,
through an inbox with that cap and ``prune_every``, and prints one JSON line per record:
``[id, received_at in µs, size]``.
"""

from __future__ import annotations

import datetime
import json
import random
import sys
import uuid

from service_webhooks.inbox import ReceivedDelivery, SQLiteInbox
from service_webhooks.inbox._base import to_micros
from service_webhooks.inbox._sql import SQLInbox


def main(argv: list[str]) -> int:
    backend, where, table, max_bytes, prune_every, count, seed = argv
    chance = random.Random(int(seed))
    inbox: SQLInbox
    if backend == "sqlite":
        inbox = SQLiteInbox(
            where, table=table, max_bytes=int(max_bytes), prune_every=int(prune_every)
        )
    else:
        from service_webhooks.inbox import PostgresInbox

        inbox = PostgresInbox(
            where, table=table, max_bytes=int(max_bytes), prune_every=int(prune_every), max_size=2
        )
    written = []
    for _ in range(int(count)):
        record = ReceivedDelivery(
            id=uuid.uuid4().hex,
            received_at=datetime.datetime.now(datetime.UTC),
            organization_id="o-1",
            event_name="note.created",
            version=1,
            idempotency_key=None,
            body=b"x" * chance.randrange(1, 400),
            content_type="application/json",
            user_agent="Service-Webhooks/1.0",
            status=500,
            reason="handler_failed",
            traceback="t" * chance.randrange(0, 200) if chance.random() < 0.3 else None,
        )
        inbox.record(record)
        written.append([record.id, to_micros(record.received_at), record.size])
    inbox.close()
    print("\n".join(json.dumps(row) for row in written))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
