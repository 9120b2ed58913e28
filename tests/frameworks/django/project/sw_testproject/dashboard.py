"""The dashboard beside the project, as docs/dashboard.md serves it (uvicorn)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sw_testproject.settings")
django.setup()  # loads the apps: their webhooks.py registers the handlers

from service_webhooks.adapters.django import receiver  # noqa: E402
from service_webhooks.adapters.django.asgi import with_request_signals  # noqa: E402
from service_webhooks.dashboard import dashboard  # noqa: E402

app = dashboard(receiver=receiver, basic_auth="ops:dashboard-test-password")
application = with_request_signals(app)
