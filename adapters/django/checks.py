"""System checks (``manage.py check``) for ``settings.SERVICE_WEBHOOKS``.

* ``service_webhooks.E001``: no secret configured (every delivery would be refused).
* ``service_webhooks.E002``: the settings do not build a receiver.
* ``service_webhooks.W001``: a secret shorter than 32 bytes (spec §5.2: 256-512 bits).
* ``service_webhooks.W002``: no handler registered (every event answered "unhandled").
* ``service_webhooks.W003``: a handler registered for an event name that is neither in
  the spec's catalogue, declared (``receiver.router.declare(name)``) nor a pattern: most
  likely a typo, and its deliveries would be answered "unhandled". One per name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core import checks

from service_webhooks import Secret

from .conf import SETTING, build_receiver, get_config
from .conf import receiver as project_receiver

MIN_SECRET_BYTES = 32


def check_configuration(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The checks listed in the module docstring."""
    config = get_config()
    if not config.get("SECRETS"):
        hint = f"Set settings.{SETTING} = {{'SECRETS': ...}} to the endpoint's signing secret."
        return [
            checks.Error(
                "No webhook signing secret is configured.", hint=hint, id="service_webhooks.E001"
            )
        ]
    try:
        build_receiver(config)
    except Exception as error:
        hint = f"Fix settings.{SETTING}: {type(error).__name__}: {error}"
        return [
            checks.Error("The webhook settings are invalid.", hint=hint, id="service_webhooks.E002")
        ]
    found: list[checks.CheckMessage] = []
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
