"""A URLconf with the webhook URL inside ``i18n_patterns()`` (check W004)."""

from django.conf.urls.i18n import i18n_patterns
from django.urls import include, path

urlpatterns = i18n_patterns(path("webhooks", include("service_webhooks.adapters.django.urls")))
