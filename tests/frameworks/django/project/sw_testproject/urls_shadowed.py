"""A URLconf whose webhook URL an earlier pattern takes in both spellings (check W004)."""

from django.http import HttpResponse
from django.urls import path, re_path

from service_webhooks.adapters.django.views import webhook_view

urlpatterns = [
    re_path(r"^hooks/?$", lambda request: HttpResponse("not a webhook view")),
    path("hooks", webhook_view()),
]
