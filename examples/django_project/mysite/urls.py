from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("webhooks", include("service_webhooks.adapters.django.urls")),
    path("admin/", admin.site.urls),
]
