"""``manage.py service_webhooks_prune [--database ALIAS]``: delete expired records."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from ...store import DjangoStore


class Command(BaseCommand):
    help = "Delete idempotency records past their lease or retention."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default="default", help="database alias")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["database"] not in connections.settings:
            raise CommandError(f"no database {options['database']!r} in settings.DATABASES")
        deleted = DjangoStore(using=options["database"]).prune()
        self.stdout.write(f"Deleted {deleted} expired webhook idempotency record(s).")
