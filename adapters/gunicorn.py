"""Gunicorn settings for the Flask and Django adapters: refuse repeated signature lines.

A WSGI application never sees a request's header lines, only the server's ``environ``,
and gunicorn joins repeated lines of one header with ``","`` before the application
runs. Two partial ``Service-Signature`` lines (``o:...,t:...`` and ``v:...``) would then
read as one valid value, although the docs promise that a delivery with two lines is
refused (401, reason ``format``; spec §5.2). This module's :func:`pre_request` hook
runs before gunicorn builds the ``environ`` and replaces two or more such lines by one
value the receiver refuses as malformed.

Use it as gunicorn's configuration module, alone or with your own flags::

    gunicorn -c python:service_webhooks.adapters.gunicorn \\
        --worker-class gthread --threads 8 --timeout 30 myproject.wsgi

or from your own ``gunicorn.conf.py``::

    from service_webhooks.adapters.gunicorn import pre_request

The module defines no other gunicorn setting; it imports nothing from gunicorn.
"""

from __future__ import annotations

from typing import Any

from service_webhooks import SIGNATURE_HEADER

__all__ = ["REPEATED_VALUE", "pre_request", "refuse_repeated_signature"]

REPEATED_VALUE = "(repeated header lines)"
"""What two or more ``Service-Signature`` lines become: not three ``key:value`` pairs,
so the receiver answers 401 ``format``."""

_NAME = SIGNATURE_HEADER.upper()  # gunicorn keeps header names upper-cased


def refuse_repeated_signature(headers: list[tuple[str, str]]) -> None:
    """Replace two or more ``Service-Signature`` lines in ``headers`` by one line holding
    :data:`REPEATED_VALUE`, in place. ``headers`` is gunicorn's ``req.headers``: a list
    of ``(NAME, value)`` pairs, names upper-cased. One line or none: left as is."""
    lines = [i for i, (name, _) in enumerate(headers) if name.upper() == _NAME]
    if len(lines) < 2:
        return
    for index in reversed(lines[1:]):
        del headers[index]
    headers[lines[0]] = (headers[lines[0]][0], REPEATED_VALUE)


def pre_request(worker: Any, req: Any) -> None:
    """Gunicorn's ``pre_request`` hook: :func:`refuse_repeated_signature` on the request's
    headers, then gunicorn's default (a debug log line of the method and path)."""
    refuse_repeated_signature(req.headers)
    worker.log.debug("%s %s", req.method, req.path)
