"""System checks (``manage.py check``) for ``settings.SERVICE_WEBHOOKS``.

* ``service_webhooks.E001``: no secret configured (every delivery would be refused).
* ``service_webhooks.E002``: the settings do not build a receiver.
* ``service_webhooks.W001``: a secret shorter than 32 bytes (spec §5.2: 256-512 bits).
* ``service_webhooks.W002``: no handler registered (every event answered "unhandled").
* ``service_webhooks.W003``: a handler registered for an event name that is neither in
  the spec's catalogue, declared (``receiver.router.declare(name)``) nor a pattern: most
  likely a typo, and its deliveries would be answered "unhandled". One per name.
* ``service_webhooks.W004``: a webhook URL that resolves in one spelling only (with or
  without its trailing slash): the other answers 404, or 301 under ``APPEND_SLASH``; or
  one inside ``i18n_patterns()``: ``LocaleMiddleware`` answers it without its language
  prefix with a 302.
* ``service_webhooks.W005``: a key of ``SERVICE_WEBHOOKS`` that is no setting (a
  misspelling such as ``TOLERENCE`` is ignored, and its default used); one per key,
  the closest known key as hint.
* ``service_webhooks.E003``: the ``STORE`` or ``INBOX`` names a database alias missing
  from ``DATABASES``: every delivery would be answered 503 and retried until it dies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from service_webhooks import Secret, WebhookReceiver

from .._settings import unknown_settings
from .conf import KEYS, SETTING, build_receiver, get_config
from .conf import receiver as project_receiver

MIN_SECRET_BYTES = 32
_E002 = "service_webhooks.E002"


def check_configuration(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The checks listed in the module docstring."""
    try:
        config = get_config()
    except ImproperlyConfigured as error:  # not a dict
        return [checks.Error("The webhook settings are invalid.", hint=str(error), id=_E002)]
    if not config.get("SECRETS"):
        hint = f"Set settings.{SETTING} = {{'SECRETS': ...}} to the endpoint's signing secret."
        return [
            checks.Error(
                "No webhook signing secret is configured.", hint=hint, id="service_webhooks.E001"
            )
        ]
    try:
        receiver = build_receiver(config)
    except Exception as error:
        hint = f"Fix settings.{SETTING}: {type(error).__name__}: {error}"
        return [checks.Error("The webhook settings are invalid.", hint=hint, id=_E002)]
    found = [*_unknown_keys(config), *_missing_databases(receiver)]
    if any(len(value) < MIN_SECRET_BYTES for value in _secret_values(config["SECRETS"])):
        found.append(
            checks.Warning(
                f"A webhook secret is shorter than {MIN_SECRET_BYTES} bytes.",
                hint="Use a random secret of 256 to 512 bits (service_webhooks.generate_secret()).",
                id="service_webhooks.W001",
            )
        )
    if not project_receiver.router.has_handlers():
        found.append(
            checks.Warning(
                "No webhook handler is registered: every event is answered 'unhandled'.",
                hint="Add @receiver.on('note.created') handlers in an installed app's webhooks.py.",
                id="service_webhooks.W002",
            )
        )
    for name, suggestion in project_receiver.router.unknown_event_names().items():
        meant = f"Did you mean {suggestion!r}? " if suggestion else ""
        found.append(
            checks.Warning(
                f"A webhook handler is registered for {name!r}, which is not a known event name.",
                hint=(
                    f"{meant}If the service sends {name!r} (a new event), declare it with "
                    f"receiver.router.declare({name!r}) before registering."
                ),
                obj=name,
                id="service_webhooks.W003",
            )
        )
    return found


def _unknown_keys(config: Mapping[str, Any]) -> Iterator[checks.CheckMessage]:
    """``W005`` for each key of ``config`` that is no setting."""
    for key, close in unknown_settings(config, KEYS):
        meant = f"Did you mean {close!r}? " if close else ""
        yield checks.Warning(
            f"settings.{SETTING}[{key!r}] is no service-webhooks setting; it is ignored.",
            hint=f"{meant}The settings are: {', '.join(sorted(KEYS))}.",
            obj=key,
            id="service_webhooks.W005",
        )


def _missing_databases(receiver: WebhookReceiver) -> Iterator[checks.CheckMessage]:
    """``E003`` for a Django store or inbox on a database alias ``DATABASES`` lacks."""
    from django.conf import settings

    from .inbox import DjangoInbox
    from .store import DjangoStore

    for role, part in (("STORE", receiver.store), ("INBOX", receiver.inbox)):
        using = getattr(part, "using", None)
        if isinstance(part, (DjangoStore, DjangoInbox)) and using not in settings.DATABASES:
            yield checks.Error(
                f"The webhook {role} uses the database {using!r}, which is not in "
                "settings.DATABASES: every delivery would be answered 503.",
                hint=f"Add {using!r} to DATABASES, or set "
                f"{SETTING}['{role}'] = {{'OPTIONS': {{'using': <an alias of DATABASES>}}}}.",
                obj=using,
                id="service_webhooks.E003",
            )


def _secret_values(config: Any) -> list[bytes]:
    """Every statically configured secret's bytes (a callable's are unknown)."""
    if isinstance(config, Secret):
        return [config.value]
    if isinstance(config, str):
        return [config.encode()]
    if isinstance(config, bytes):
        return [config]
    if isinstance(config, Mapping):
        return [v for value in config.values() for v in _secret_values(value)]
    if isinstance(config, Sequence):
        return [v for value in config for v in _secret_values(value)]
    return []


def check_delivery_urls(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``service_webhooks.W004``: every URL routed to a webhook view (found in the
    project's URLconf) must resolve to one both with and without its trailing slash.

    The service follows no redirect (spec §7): ``APPEND_SLASH`` turns ``POST /webhooks``
    into a 301 (a 500 under ``DEBUG``), and a missing spelling is a 404. URLs whose
    patterns hold converters or regular expressions beyond an optional ``/?`` are not
    checked.
    """
    from django.urls import get_resolver

    patterns = get_resolver().url_patterns
    found = list(_localized_delivery_urls(patterns))
    for url in sorted(set(_delivery_urls(patterns, ""))):
        bare = url.rstrip("/")
        missing = [spelling for spelling in (bare, bare + "/") if not _routed(spelling)]
        routed = [spelling for spelling in (bare, bare + "/") if spelling not in missing]
        if bare and missing:  # name the spelling routed (if any), then those that are not
            found.append(
                checks.Warning(
                    f"The webhook URL {(routed or [url])[0]!r} is not answered as "
                    f"{' nor as '.join(map(repr, missing))}; the service follows no redirect, "
                    "so deliveries sent there would fail.",
                    hint=f'Include it as path("{bare[1:]}", include('
                    '"service_webhooks.adapters.django.urls")) (no trailing slash), or route '
                    f'both spellings with re_path(r"^{re.escape(bare[1:])}/?$", webhook_view()).',
                    id="service_webhooks.W004",
                )
            )
    return found


def _localized_delivery_urls(patterns: Any) -> Iterator[checks.CheckMessage]:
    """``W004`` for webhook URLs under ``i18n_patterns()`` (the root URLconf's only):
    they start with the language, and ``LocaleMiddleware`` answers ``/webhooks`` with a
    302 to ``/en/webhooks``, which the service retries without following."""
    from django.urls.resolvers import LocalePrefixPattern

    localized = [p for p in patterns if isinstance(p.pattern, LocalePrefixPattern)]
    if any(p.pattern.prefix_default_language and any(_delivery_urls([p], "")) for p in localized):
        yield checks.Warning(
            "A webhook URL is inside i18n_patterns(): it starts with a language code, and "
            "LocaleMiddleware answers it without one with a 302, which the service retries "
            "without following until the event is dead.",
            hint='Include it outside i18n_patterns(): urlpatterns = [path("webhooks", '
            'include("service_webhooks.adapters.django.urls"))] + i18n_patterns(...).',
            id="service_webhooks.W004",
        )


def _delivery_urls(patterns: Any, prefix: str) -> Iterator[str]:
    """The literal URLs (``"/" + route``) of every pattern routed to a webhook view."""
    for pattern in patterns:
        piece = _literal(pattern.pattern)
        if piece is not None and hasattr(pattern, "url_patterns"):  # an include()
            yield from _delivery_urls(pattern.url_patterns, prefix + piece)
        elif piece is not None and getattr(pattern.callback, "service_webhooks_view", False):
            yield "/" + prefix + piece


def _literal(pattern: Any) -> str | None:
    """The fixed text a route or regex matches (an optional trailing slash dropped), or
    ``None`` when it matches more than one text (converters, other regex syntax)."""
    from django.urls.resolvers import RegexPattern

    text = str(pattern)
    if isinstance(pattern, RegexPattern):
        text = text.removeprefix("^").removesuffix("$").removesuffix("(?:/)?").removesuffix("/?")
    return None if set(text) & _SPECIALS else text


_SPECIALS = frozenset("<>.^$*+?{}[]\\|()")


def _routed(path: str) -> bool:
    """``path`` resolves to a webhook view."""
    from django.urls import Resolver404, resolve

    try:
        return bool(getattr(resolve(path).func, "service_webhooks_view", False))
    except Resolver404:
        return False
