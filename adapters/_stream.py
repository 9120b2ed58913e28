"""Reading a request body from a WSGI-style stream with a cap (shared by Flask and Django).

The cap is the adapter's ``limit + 1``: reading one byte past the limit is how an
adapter learns a body without ``Content-Length`` is too large, without buffering more.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["read_capped"]

CHUNK = 65_536
"""Bytes asked of the stream per read."""


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def read_capped(stream: Readable, limit: int) -> bytes:
    """At most ``limit`` bytes of ``stream``, read in chunks of :data:`CHUNK` bytes.

    The stream must end (Content-Length, or a server that terminates chunked input):
    this never reads past ``limit``, but it waits for each chunk.
    """
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = stream.read(min(CHUNK, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
