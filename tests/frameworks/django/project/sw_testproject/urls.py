from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path, re_path, resolve
from django.views.decorators.csrf import csrf_exempt
from sw_testapp import webhooks

from service_webhooks.adapters.django.conf import build_receiver
from service_webhooks.adapters.django.views import webhook_view

SECRET = "whsec-django-0123456789abcdef0123456789abcdef"

broken = build_receiver(
    {"SECRETS": SECRET, "STORE": {"OPTIONS": {"using": "down"}}},
)  # its database cannot be opened: the store is unreachable
broken.on("note.created", webhooks.note_created)


@csrf_exempt
def bare(request: HttpRequest) -> HttpResponse:
    request.read()
    return HttpResponse(b'{"status":200}', content_type="application/json")


def which(request: HttpRequest) -> JsonResponse:
    import inspect

    view = resolve("/webhooks/").func
    return JsonResponse({"async": inspect.iscoroutinefunction(view)})


urlpatterns = [
    path("webhooks", include("service_webhooks.adapters.django.urls")),
    re_path(r"^broken/?$", webhook_view(broken)),
    re_path(r"^async/webhooks/?$", webhook_view(asynchronous=True)),
    re_path(r"^async/broken/?$", webhook_view(broken, asynchronous=True)),
    path("bare/", bare),
    path("which/", which),
    path("admin/", admin.site.urls),
]
