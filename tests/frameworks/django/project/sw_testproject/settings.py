"""Settings of the Django project the adapter tests drive (in-process and on servers).

Environment: ``SW_DJANGO_SQLITE`` (SQLite file), ``SW_DJANGO_PG`` (a PostgreSQL database
on 127.0.0.1:5432, optional), ``SW_DJANGO_DEFAULT`` (``sqlite`` or ``pg``: which one
is ``default``), ``SW_DJANGO_DOWN`` (a SQLite path in a missing directory: a database
that cannot be reached), ``SW_DJANGO_DEBUG`` (``1``: ``DEBUG = True``).
"""

import os

SECRET_KEY = "test-only-not-secret"
DEBUG = os.environ.get("SW_DJANGO_DEBUG") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
ROOT_URLCONF = "sw_testproject.urls"
WSGI_APPLICATION = "sw_testproject.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "service_webhooks.adapters.django",
    "sw_testapp",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
if os.environ.get("SW_DJANGO_NO_COMMON_MIDDLEWARE") == "1":  # nothing sets Content-Length
    MIDDLEWARE.remove("django.middleware.common.CommonMiddleware")
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

_sqlite = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": os.environ["SW_DJANGO_SQLITE"],
    "OPTIONS": {"timeout": 30},
    "TEST": {"NAME": os.environ["SW_DJANGO_SQLITE"]},
}
_pg = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": os.environ.get("SW_DJANGO_PG", ""),
    "USER": "postgres",
    "HOST": "127.0.0.1",
    "PORT": 5432,
    "OPTIONS": {"connect_timeout": 3},
}
DATABASES = {
    "default": _pg if os.environ.get("SW_DJANGO_DEFAULT") == "pg" else _sqlite,
    "down": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["SW_DJANGO_DOWN"]},
}
if os.environ.get("SW_DJANGO_PG"):
    DATABASES["pg"] = _pg

SERVICE_WEBHOOKS = {
    "SECRETS": "whsec-django-0123456789abcdef0123456789abcdef",
    "TOLERANCE": 300,
    "SUCCESS_BODY": os.environ.get("SW_DJANGO_SUCCESS_BODY") != "0",
}
