"""The project's ASGI entry with deliveries answered before Django reads the body."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sw_testproject.settings")
django_application = get_asgi_application()

from service_webhooks.adapters.django.asgi import webhook_asgi  # noqa: E402

application = webhook_asgi(django_application, path="/webhooks")
