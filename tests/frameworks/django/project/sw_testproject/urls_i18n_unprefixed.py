"""``i18n_patterns()`` without the default language's prefix: ``/webhooks`` is answered."""

from django.conf.urls.i18n import i18n_patterns
from django.urls import include, path

urlpatterns = i18n_patterns(
    path("webhooks", include("service_webhooks.adapters.django.urls")),
    prefix_default_language=False,
)
