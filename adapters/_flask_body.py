"""The Flask view's reader of a request body that the app's hooks may have read first.

Werkzeug-specific (its ``Request`` keeps ``get_data()``'s copy in ``_cached_data`` and
its opened ``stream`` as a cached property); kept apart so the adapter module stays the
read-call-write glue.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable

from flask import Request
from werkzeug.wsgi import get_input_stream

from ._wsgi import body_reader

__all__ = ["RequestBody"]

logger = logging.getLogger("service_webhooks")


class RequestBody:
    """The view's reader of the request body, which is read once for the whole request.

    The server's input stream can be read only once: a second reader blocks under
    ``flask run`` until the client gives up, and gets nothing under gunicorn (a 401 that
    the service never retries). So the body one of the app's hooks read before the view
    (``request.get_data()``, ``get_json()``, ``request.data``) is taken from werkzeug's
    copy, and a stream werkzeug opened (``request.form`` of a JSON body) is read on;
    else the view reads the server's stream (never a form parse). :meth:`keep` then
    leaves the bytes read to the app's later hooks (``after_request``,
    ``teardown_request``), as ``request.get_data()`` returns them.
    """

    def __init__(self, current: Request) -> None:
        self._request = current  # the object, not Flask's proxy: a lookup costs 1 µs
        state = current.__dict__
        kept: bytes | None = state.get("_cached_data")  # get_data()'s copy
        stream = None if kept is not None else state.get("stream")  # a cached property
        self._read: Callable[[int], bytes]
        if kept is not None:
            self._read = io.BytesIO(kept).read
        else:  # werkzeug's stream when the app opened it, else the server's
            self._read = body_reader((stream or get_input_stream(current.environ)).read)
        self._opened = stream is not None
        self._chunks: list[bytes] = []

    def read(self, size: int) -> bytes:
        chunk = self._read(size)  # a broken body: b"" (a 4xx), not a 500
        self._chunks.append(chunk)
        return chunk

    def keep(self) -> None:
        """Werkzeug's ``stream`` (a cached property) becomes the bytes read."""
        body = b"".join(self._chunks)
        current = self._request
        if self._opened and self._chunks and not body and current.content_length:
            logger.warning(
                "service_webhooks: the app read a delivery's body before the webhook view "
                "and did not keep it (request.stream.read(), or a form parse), so the "
                "receiver got none: read it with request.get_data(), which keeps it"
            )
        current.__dict__["stream"] = io.BytesIO(body)
