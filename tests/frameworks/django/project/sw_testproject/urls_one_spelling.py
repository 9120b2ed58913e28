"""A URLconf that answers each webhook URL in one spelling only (check W004)."""

from django.urls import include, path

from service_webhooks.adapters.django.views import webhook_view

urlpatterns = [
    path("webhooks/", include("service_webhooks.adapters.django.urls")),
    path("hooks", webhook_view()),
]
