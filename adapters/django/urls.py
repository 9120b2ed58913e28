"""``path("webhooks", include("service_webhooks.adapters.django.urls"))``.

The one pattern matches both ``/webhooks`` and ``/webhooks/``: the service follows no
redirect (spec §7), and with ``APPEND_SLASH`` (Django's default) a URL that resolved
in one spelling only would answer ``POST /webhooks`` with a 301, or a 500 under
``DEBUG``. Include it with a prefix that has no trailing slash. (``(?:/)?`` rather than ``/?``:
Django's ``urls.W002`` check warns about a regex starting with ``^/``.)
"""

from __future__ import annotations

from django.urls import re_path

from .views import webhook_view

app_name = "service_webhooks"
urlpatterns = [re_path(r"^(?:/)?$", webhook_view(), name="deliver")]
