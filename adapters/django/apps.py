"""The app config: discovers each installed app's ``webhooks.py`` and registers checks."""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks
from django.utils.module_loading import autodiscover_modules


class ServiceWebhooksConfig(AppConfig):
    """``INSTALLED_APPS += ["service_webhooks.adapters.django"]`` (label ``service_webhooks``)."""

    name = "service_webhooks.adapters.django"
    label = "service_webhooks"
    verbose_name = "Service webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Import every installed app's ``webhooks`` module (like ``admin.autodiscover``),
        then connect the signals (when they have listeners) and the system checks."""
        from . import signals
        from .checks import check_configuration, check_delivery_urls

        autodiscover_modules("webhooks")
        signals.install()
        checks.register(check_configuration, "service_webhooks")
        checks.register(check_delivery_urls, "service_webhooks", checks.Tags.urls)
