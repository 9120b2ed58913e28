"""Deliver a signed event into a framework's test client in one line.

::

    deliver = Deliverer(Signer("whsec-test"))
    response = deliver(client, "/webhooks", "note.created", {"id": "n-1", ...})
    assert response.status_code == 200

The framework is recognised from the client's type, without importing any framework:

=============================================  =========================================
client                                         request made
=============================================  =========================================
``starlette.testclient.TestClient`` (FastAPI   ``client.post(url, content=body,
too), any ``httpx``/``httpx2`` ``Client``       headers=headers)``
``flask.testing.FlaskClient`` (any werkzeug    ``client.post(url, data=body,
``Client``)                                     headers=headers)``
``django.test.Client``                         ``client.post(url, body, content_type=...,
                                               headers=...)``
=============================================  =========================================

Async clients (``httpx.AsyncClient`` with an ``ASGITransport``,
``django.test.AsyncClient``) go through :class:`AsyncDeliverer`. The response is the
client's own (``response.status_code`` works with each of them). The pytest plugin
(:mod:`service_webhooks.testing.pytest_plugin`) provides both as fixtures,
``deliver_webhook`` and ``adeliver_webhook``.

Each call makes a new body: the envelope carries a random top-level
``testDeliveryId`` (ignored by receivers, spec §9), so its default idempotency key is
new on every call and every test run, even against a persistent store. Pass
``unique=False`` for a body that depends only on the arguments. To exercise a
duplicate, send the same bytes twice with ``post``: ``body(event_name, data)`` makes
them, fresh on each call as a call's are.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping
from typing import Any

from .signer import Signer, envelope

__all__ = ["AsyncDeliverer", "Deliverer", "UnsupportedClientError"]

_HTTPX = ("httpx", "httpx2")  # starlette's TestClient subclasses httpx2.Client when present


class UnsupportedClientError(TypeError):
    """The object is not a test client this module knows how to post with."""


def _body(event_name: str, data: Any, version: int, unique: bool) -> bytes:
    delivery_id = uuid.uuid4().hex if unique else None
    return envelope(event_name, data, version=version, delivery_id=delivery_id)


def _instance_of(client: object, module_name: str, class_name: str) -> bool:
    """``isinstance`` against a class of a module only if that module is loaded (a client
    of that framework exists only if it is)."""
    module = sys.modules.get(module_name)
    cls = getattr(module, class_name, None) if module is not None else None
    return isinstance(cls, type) and isinstance(client, cls)


def _framework(client: object) -> str:
    if any(_instance_of(client, name, "Client") for name in _HTTPX):
        return "httpx"
    if any(_instance_of(client, name, "AsyncClient") for name in _HTTPX):
        return "httpx-async"
    if _instance_of(client, "werkzeug.test", "Client"):
        return "werkzeug"
    if _instance_of(client, "django.test.client", "AsyncClient"):
        return "django-async"
    if _instance_of(client, "django.test.client", "Client"):
        return "django"
    raise UnsupportedClientError(
        f"cannot deliver with a {type(client).__module__}.{type(client).__qualname__}: pass a "
        "Starlette/FastAPI TestClient, an httpx client, a Flask test client or a Django "
        "test client"
    )


def _django_options(headers: Mapping[str, str]) -> dict[str, Any]:
    others = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return {"content_type": content_type or "application/json", "headers": others}


class _Base:
    def __init__(self, signer: Signer) -> None:
        if not isinstance(signer, Signer):
            raise TypeError(
                f"{type(self).__name__} needs a Signer, not {type(signer).__name__}: "
                f"{type(self).__name__}(Signer(secret, organization_id=...))"
            )
        self.signer = signer

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.signer!r})"

    def body(self, event_name: str, data: Any, *, version: int = 1, unique: bool = True) -> bytes:
        """The envelope bytes a call with these arguments sends: ``post`` them twice to
        exercise a retry (``processed``, then ``duplicate``). Fresh on every call unless
        ``unique=False``, so such a test passes in every run, whatever the store keeps.

        Raises:
            TypeError: ``data`` is not JSON-encodable.
        """
        return _body(event_name, data, version, unique)

    def _sign(
        self,
        body: bytes,
        timestamp: int | None,
        organization_id: str | None,
        headers: Mapping[str, str] | None,
    ) -> dict[str, str]:
        if headers is not None and not isinstance(headers, Mapping):
            raise TypeError(
                "headers must be a mapping of header name to value, not "
                f"{type(headers).__name__}: headers={{'X-Name': 'value'}}"
            )
        signer = self.signer
        if organization_id is not None:
            signer = signer.for_organization(organization_id)
        signed = signer.headers(body, timestamp=timestamp)
        if headers:  # header names are case-insensitive: an override replaces, never adds
            overridden = {name.lower() for name in headers}
            signed = {k: v for k, v in signed.items() if k.lower() not in overridden}
            signed.update(headers)
        return signed


class Deliverer(_Base):
    """Signs deliveries with ``signer`` and posts them into a synchronous test client.

    Args:
        signer: The :class:`~service_webhooks.testing.signer.Signer` (its secret must be
            one the app's receiver accepts).
    """

    def __call__(
        self,
        client: Any,
        url: str,
        event_name: str,
        data: Any,
        *,
        version: int = 1,
        timestamp: int | None = None,
        organization_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        unique: bool = True,
    ) -> Any:
        """POST the envelope ``{eventName, version, data}``, signed now, to ``url``.

        Args:
            client: A sync test client (see the module docstring).
            url: The path the app receives webhooks on, e.g. ``"/webhooks"``.
            event_name: ``eventName``, e.g. ``"note.created"``.
            data: The event's ``data`` (anything JSON-serialisable).
            version: The envelope ``version``.
            timestamp: The signed ``t`` in Unix seconds (default: now).
            organization_id: Sign as this ``o`` instead of the signer's.
            headers: Extra or overriding request headers; a name matches the signed
                headers in any case (``content-type`` replaces ``Content-Type``).
            unique: Add a random top-level ``testDeliveryId`` to the envelope (the
                default), so that no two calls send the same body: a persistent store
                never answers ``duplicate`` to a rerun of the test. ``False``: the body
                depends only on the arguments.

        Returns:
            The client's response.

        Raises:
            UnsupportedClientError: ``client`` is not a known sync test client.
            TypeError: ``data`` is not JSON-encodable, or ``headers`` is not a mapping.
        """
        body = _body(event_name, data, version, unique)
        return self.post(
            client, url, body, timestamp=timestamp, organization_id=organization_id, headers=headers
        )

    def post(
        self,
        client: Any,
        url: str,
        body: bytes,
        *,
        timestamp: int | None = None,
        organization_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Sign raw ``body`` bytes and POST them (a retry of a body, or a malformed one).

        Raises:
            TypeError: ``body`` is not ``bytes`` (encode a ``str`` first), or ``headers``
                is not a mapping.
            UnsupportedClientError: ``client`` is not a known sync test client.
        """
        signed = self._sign(body, timestamp, organization_id, headers)
        kind = _framework(client)
        if kind == "httpx":
            return client.post(url, content=body, headers=signed)
        if kind == "werkzeug":
            return client.post(url, data=body, headers=signed)
        if kind == "django":
            return client.post(url, body, **_django_options(signed))
        raise UnsupportedClientError(
            f"{type(client).__qualname__} is asynchronous: use AsyncDeliverer "
            "(the adeliver_webhook fixture) and await it"
        )


class AsyncDeliverer(_Base):
    """Like :class:`Deliverer`, for ``httpx.AsyncClient`` and ``django.test.AsyncClient``;
    awaitable: ``response = await adeliver(client, url, event_name, data)``."""

    async def __call__(
        self,
        client: Any,
        url: str,
        event_name: str,
        data: Any,
        *,
        version: int = 1,
        timestamp: int | None = None,
        organization_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        unique: bool = True,
    ) -> Any:
        """See :meth:`Deliverer.__call__`.

        Raises:
            UnsupportedClientError: ``client`` is not a known async test client.
        """
        body = _body(event_name, data, version, unique)
        return await self.post(
            client, url, body, timestamp=timestamp, organization_id=organization_id, headers=headers
        )

    async def post(
        self,
        client: Any,
        url: str,
        body: bytes,
        *,
        timestamp: int | None = None,
        organization_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Sign raw ``body`` bytes and POST them; see :meth:`Deliverer.post`."""
        signed = self._sign(body, timestamp, organization_id, headers)
        kind = _framework(client)
        if kind == "httpx-async":
            return await client.post(url, content=body, headers=signed)
        if kind == "django-async":
            return await client.post(url, body, **_django_options(signed))
        raise UnsupportedClientError(
            f"{type(client).__qualname__} is synchronous: use Deliverer "
            "(the deliver_webhook fixture) without await"
        )
