"""``settings.SERVICE_WEBHOOKS`` -> the :class:`~service_webhooks.WebhookReceiver`.

Keys (only ``SECRETS`` is required)::

    SERVICE_WEBHOOKS = {
        "SECRETS": "whsec-...",          # or a list (rotation, newest first), or a dict
                                         # {organization ID: secret(s)}, or a callable
        "TOLERANCE": 300,                # seconds (spec §5.2)
        "MAX_BODY_SIZE": 1048576,        # bytes (spec §6.1)
        "LEASE": 120, "RETENTION": 259200,   # seconds
        "UNHANDLED_STATUS": 200,
        "SUCCESS_BODY": True,            # False: 200 answers carry no body
        "STRICT": False,                 # True: a handler for an unknown event name raises
        "IDEMPOTENCY_KEY": "myapp.keys.by_data_id",   # callable or dotted path
        "STORE": {"BACKEND": "service_webhooks.adapters.django.store.DjangoStore",
                  "OPTIONS": {"using": "default"}},   # or a store, "memory", "sqlite:PATH"
        "INBOX": {"BACKEND": "service_webhooks.adapters.django.inbox.DjangoInbox",
                  "OPTIONS": {"using": <the store's alias>}},  # default with a DjangoStore;
                                         # or False (none), a URL, an Inbox
        "TRANSACTIONAL": False,          # handler DB work + record in one transaction
        "ASYNC_VIEW": None,              # None: async view under ASGI, sync under WSGI
    }
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.functional import SimpleLazyObject, empty
from django.utils.module_loading import import_string

from service_webhooks import SETTINGS, Router, WebhookReceiver

from .._settings import check_secrets_setting, named_settings

__all__ = ["KEYS", "SETTING", "build_receiver", "flag_setting", "get_config", "receiver"]

SETTING = "SERVICE_WEBHOOKS"
_STORES = "service_webhooks.adapters.django.store."
_INBOXES = "service_webhooks.adapters.django.inbox."
_ARGUMENTS = {key: arg for key, arg in SETTINGS.items() if key not in ("STORE", "INBOX")}
KEYS = frozenset([*SETTINGS, "TRANSACTIONAL", "ASYNC_VIEW"])
"""Every key ``SERVICE_WEBHOOKS`` may hold; ``manage.py check`` warns about others."""


def get_config() -> Mapping[str, Any]:
    """The ``SERVICE_WEBHOOKS`` settings dict (empty when unset)."""
    config = getattr(settings, SETTING, None) or {}
    if not isinstance(config, Mapping):  # SERVICE_WEBHOOKS = "whsec-..." (the secret alone)
        kind = type(config).__name__
        raise ImproperlyConfigured(
            f"settings.{SETTING} must be a dict such as {{'SECRETS': ...}}, not {kind}"
        )
    return config


def build_receiver(config: Mapping[str, Any] | None = None) -> WebhookReceiver:
    """A receiver from ``config`` (default: ``settings.SERVICE_WEBHOOKS``).

    Raises:
        ImproperlyConfigured: No ``SECRETS``; ``TRANSACTIONAL`` not ``True``/``False``
            or ``ASYNC_VIEW`` not ``True``/``False``/``None`` (a string such as
            ``"false"`` would read as true); a ``STORE`` or ``INBOX`` dict with a key
            other than ``BACKEND`` and ``OPTIONS`` (a misspelt ``OPTION`` would be
            ignored); or a ``STORE`` backend that cannot be imported or (with
            ``TRANSACTIONAL``) is not a ``DjangoStore``.
        ConfigurationError: A value out of range (messages never show a secret).
    """
    return _build(get_config() if config is None else config)


def _build(config: Mapping[str, Any], router: Router | None = None) -> WebhookReceiver:
    """:func:`build_receiver`, its handlers on ``router`` when given."""
    if not config.get("SECRETS"):
        raise ImproperlyConfigured(f"settings.{SETTING}['SECRETS'] is not set")
    check_secrets_setting(config["SECRETS"], f"settings.{SETTING}['SECRETS']")
    options = {arg: config[key] for key, arg in _ARGUMENTS.items() if key in config}
    if isinstance(options.get("idempotency_key"), str):
        with _naming("IDEMPOTENCY_KEY"):
            options["idempotency_key"] = import_string(options["idempotency_key"])
    transactional = flag_setting(config, "TRANSACTIONAL") is True
    flag_setting(config, "ASYNC_VIEW", none=True)
    default = _STORES + "DjangoStore"
    store = config.get("STORE", {"BACKEND": default})
    if isinstance(store, Mapping):
        _check_backend_keys("STORE", store)
        with _naming("STORE"):
            store = import_string(store.get("BACKEND", default))(**store.get("OPTIONS", {}))
    with _naming("INBOX"):
        options["inbox"] = _inbox(config.get("INBOX"), store)
    # plain handlers and a SECRETS callable under ASGI: in the delivery's thread, as Django
    # runs a sync view, so their connections end with the request (a worker thread of
    # their own would keep them for ever, dead after a database restart)
    options["to_thread"] = lambda function, argument: sync_to_async(function)(argument)
    if router is not None:
        options["router"] = router
    given = {arg: f"settings.{SETTING}[{key!r}]" for key, arg in SETTINGS.items() if key in config}
    with named_settings(given):  # its errors name the key set, not the argument
        if not transactional:
            return WebhookReceiver(store=store, **options)
        from .store import DjangoStore, TransactionalReceiver

        if not isinstance(store, DjangoStore):
            raise ImproperlyConfigured("TRANSACTIONAL needs a DjangoStore backend (its database)")
        return TransactionalReceiver(store=store, **options)


def _inbox(inbox: Any, store: Any) -> Any:
    """``INBOX`` -> the receiver's ``inbox=``: unset, the ORM inbox on a ``DjangoStore``'s
    database (else the receiver's own default); a ``BACKEND``/``OPTIONS`` dict; or as is."""
    from .store import DjangoStore

    if inbox is None and isinstance(store, DjangoStore):
        inbox = {"OPTIONS": {"using": store.using}}
    if isinstance(inbox, Mapping):
        _check_backend_keys("INBOX", inbox)
        backend = import_string(inbox.get("BACKEND", _INBOXES + "DjangoInbox"))
        return backend(**inbox.get("OPTIONS", {}))
    return inbox


def flag_setting(config: Mapping[str, Any], key: str, *, none: bool = False) -> bool | None:
    """``config[key]`` (``False`` when absent, or ``None`` with ``none=True``), which must
    be ``True`` or ``False`` (or ``None`` with ``none=True``): ``bool("false")`` is true,
    so a string from the environment is refused rather than read as ``True``.

    Raises:
        ImproperlyConfigured: Naming the key.
    """
    value = config.get(key, None if none else False)
    if isinstance(value, bool) or (none and value is None):
        return value
    allowed = "True, False or None" if none else "True or False"
    raise ImproperlyConfigured(f"settings.{SETTING}[{key!r}] must be {allowed}, not {value!r:.40}")


@contextmanager
def _naming(key: str) -> Iterator[None]:
    """Re-raise what building ``key``'s value raises (a ``BACKEND`` or an
    ``IDEMPOTENCY_KEY`` path that does not import, ``OPTIONS`` the backend refuses) as
    ``ImproperlyConfigured`` naming the key: ``No module named 'myapp'`` or ``retention
    must be ...`` alone does not say which setting holds it."""
    try:
        yield
    except (ImportError, TypeError, ValueError) as error:  # ConfigurationError too
        name = f"settings.{SETTING}[{key!r}]"
        raise ImproperlyConfigured(f"{name}: {type(error).__name__}: {error}") from error


def _check_backend_keys(key: str, backend: Mapping[str, Any]) -> None:
    """Refuse a ``STORE``/``INBOX`` dict key other than ``BACKEND`` and ``OPTIONS``: a
    misspelt ``OPTION`` would be ignored and the backend built with its defaults."""
    if unknown := sorted(map(repr, set(backend) - {"BACKEND", "OPTIONS"})):
        raise ImproperlyConfigured(
            f"settings.{SETTING}[{key!r}] takes 'BACKEND' and 'OPTIONS', not {', '.join(unknown)}"
        )


def _unconfigured(organization_id: str) -> None:
    return None  # no secret at all: every delivery is refused (401); check E001 says why


_routers: list[Router] = []
"""The project receiver's router, once built: a receiver rebuilt keeps its handlers."""


def _project_receiver() -> WebhookReceiver:
    config = get_config()
    try:  # built by the first webhooks.py as Django starts, before any check (E002) runs
        built = _build(
            config if config.get("SECRETS") else {**config, "SECRETS": _unconfigured},
            router=_routers[0] if _routers else None,
        )
    except ImproperlyConfigured:  # names the setting already
        raise
    except Exception as error:  # so say which setting is wrong, not only "tolerance ... str"
        raise ImproperlyConfigured(f"settings.{SETTING} is invalid: {error!r}") from error
    _routers[:] = [built.router]
    return built


receiver = cast(WebhookReceiver, SimpleLazyObject(_project_receiver))
"""The project's receiver, built from settings on first use; register handlers on it.
Without ``SECRETS`` it refuses every delivery (fail closed) and ``manage.py check``
reports ``service_webhooks.E001``. Settings that do not build a receiver raise
``ImproperlyConfigured`` naming ``SERVICE_WEBHOOKS`` on first use. When
``SERVICE_WEBHOOKS`` changes (``override_settings`` in tests), it is built again from
the new settings on its next use, with the handlers registered so far."""


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING:
        receiver._wrapped = empty  # type: ignore[attr-defined]  # rebuilt on next use


setting_changed.connect(_settings_changed)
