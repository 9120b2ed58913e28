"""The bad-input catalogue (``tests/helpers/sw_bad_inputs.py``) through Django's test
clients.

The same named inputs and documented answers as ``tests/test_bad_input.py``, sent to
the project's delivery view: the plain view through ``Client`` (WSGI) and the
``async def`` view through ``AsyncClient`` (ASGI). Both clients re-raise any exception
a view lets out. Repeated headers are joined with ``,`` as a server does. Under WSGI a
chunked body has no ``Content-Length`` and ``wsgi.input_terminated`` set (as gunicorn
does); Django's ``AsyncClient`` always declares the length, so there the chunked cases
arrive with one.
"""

from __future__ import annotations

import io
from types import ModuleType
from typing import Any

import pytest
import sw_bad_inputs as catalogue
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client

by_name = pytest.mark.parametrize("case", catalogue.WIRE, ids=[c.name for c in catalogue.WIRE])


def _arguments(request: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """(headers joined per name, other ``generic()`` keywords)."""
    headers: dict[str, str] = {}
    for name, value in request.headers:
        text = value.decode("latin-1")  # what a server puts in META / the ASGI request
        headers[name] = f"{headers[name]},{text}" if name in headers else text
    if request.chunked:
        headers["Transfer-Encoding"] = "chunked"
    return headers, {"content_type": request.content_type or ""}


def _answer(case: Any, method: str, response: Any) -> None:
    headers = {k.lower(): v for k, v in response.headers.items()}
    catalogue.check(case, method, response.status_code, headers, response.content)


@by_name
def test_django_client_sync_view(case: Any, kit: ModuleType) -> None:
    request = case.build(catalogue.Signer(kit.SECRET, kit.ORG, catalogue.now()))
    headers, options = _arguments(request)
    extra: dict[str, Any] = {}
    if request.chunked:  # the view reads wsgi.input itself, to its end (as under gunicorn)
        stream = io.BytesIO(request.body)
        extra = {"CONTENT_LENGTH": "", "wsgi.input_terminated": True, "wsgi.input": stream}
    response = Client().generic(
        request.method, "/webhooks/", data=request.body, headers=headers, **options, **extra
    )
    _answer(case, request.method, response)


@by_name
def test_django_async_client_async_view(case: Any, kit: ModuleType) -> None:
    request = case.build(catalogue.Signer(kit.SECRET, kit.ORG, catalogue.now()))
    headers, options = _arguments(request)
    client = AsyncClient()

    async def send() -> Any:
        return await client.generic(
            request.method, "/async/webhooks/", data=request.body, headers=headers, **options
        )

    _answer(case, request.method, async_to_sync(send)())
