"""``path("webhooks/", include("service_webhooks.adapters.django.urls"))``."""

from __future__ import annotations

from django.urls import path

from .views import webhook_view

app_name = "service_webhooks"
urlpatterns = [path("", webhook_view(), name="deliver")]
