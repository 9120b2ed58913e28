"""Django adapter: an installable app (spec §5.2, §6.1, §7).

::

    INSTALLED_APPS += ["service_webhooks.adapters.django"]
    SERVICE_WEBHOOKS = {"SECRETS": env("SERVICE_WEBHOOKS_SECRET")}
    urlpatterns += [path("webhooks", include("service_webhooks.adapters.django.urls"))]

    # yourapp/webhooks.py, discovered at startup like admin.py
    from service_webhooks.adapters.django import receiver

    @receiver.on("note.created")
    def note_created(event): ...

:data:`receiver` is built from ``settings.SERVICE_WEBHOOKS`` on first use (see
:mod:`.conf` for the keys). Idempotency records live in the database
(:class:`.store.DjangoStore`); ``"TRANSACTIONAL": True`` commits a handler's database
work and its record in one transaction.
"""

from .. import require_extra

require_extra("django", "django")

from .conf import receiver  # noqa: E402

__all__ = ["receiver"]
