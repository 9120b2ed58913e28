"""A receiver process for the end-to-end test and the benchmark (not a test module).

``python sw_receiver_server.py PORT SECRET FAIL_EVERY`` serves the library's own
``WebhookReceiver`` (``MemoryStore``) behind ``WebhookApp`` under uvicorn on 127.0.0.1.
The ``note.created`` handler fails the first attempt of every note whose number
(``n-<number>``) is a multiple of ``FAIL_EVERY`` (0: never) by raising, which the
receiver answers with 500. ``GET /__stats`` returns what the receiver saw: the
processing count per note and, per request, the SHA-256 of the body and the status.
Running in its own process lets client and server use one core each.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import sys
from typing import Any

import uvicorn

from service_webhooks import MemoryStore, WebhookReceiver
from service_webhooks.adapters.asgi import WebhookApp


class Target:
    def __init__(self, secret: str, fail_every: int) -> None:
        self.processed: collections.Counter[str] = collections.Counter()
        self.failed_once: set[str] = set()
        self.seen: list[tuple[str, int]] = []
        receiver = WebhookReceiver(secrets=secret, store=MemoryStore())

        @receiver.on("note.created")
        async def handle(event: Any) -> None:
            note_id = event.data.id
            number = int(note_id.rpartition("-")[2])
            if fail_every and number % fail_every == 0 and note_id not in self.failed_once:
                self.failed_once.add(note_id)
                raise RuntimeError("simulated failure of a first attempt")
            self.processed[note_id] += 1

        self.app = WebhookApp(receiver)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/__stats":
            stats = {
                "processed": self.processed,
                "failed_once": sorted(self.failed_once),
                "seen": self.seen,
            }
            body = json.dumps(stats).encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        chunks: list[bytes] = []

        async def recording_receive() -> Any:
            message = await receive()
            chunks.append(message.get("body", b""))
            return message

        async def recording_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                digest = hashlib.sha256(b"".join(chunks)).hexdigest()
                self.seen.append((digest, message["status"]))
            await send(message)

        await self.app(scope, recording_receive, recording_send)


if __name__ == "__main__":
    port, secret, fail_every = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    logging.getLogger("service_webhooks").setLevel(logging.CRITICAL)
    uvicorn.run(
        Target(secret, fail_every),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
