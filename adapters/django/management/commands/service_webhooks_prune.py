"""``manage.py service_webhooks_prune [--database ALIAS]``: delete expired records."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections

from ...store import DjangoStore


class Command(BaseCommand):
    help = "Delete idempotency records past their lease or retention."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", help="database alias (default: the STORE's)")

    def handle(self, *args: Any, **options: Any) -> None:
        from ...conf import receiver

        store = receiver.store  # by default where the project receiver keeps its records
        if options["database"] is None and not isinstance(store, DjangoStore):
            # a STORE given as a URL or an object (shared with other servers, say): its
            # records are in that store, not in an ORM table
            prune = getattr(store, "prune", None)
            if prune is None:  # Redis expires its keys itself; a MemoryStore is one process's
                name = type(store).__name__
                self.stdout.write(f"Nothing to prune: {name} expires its records itself.")
                return
            try:
                deleted = prune()
            except Exception as error:  # the server is down, refused, or has no table
                raise CommandError(f"cannot prune {store!r}: {error}") from error
        else:
            default = store.using if isinstance(store, DjangoStore) else "default"
            using = options["database"] or default
            if using not in connections.settings:
                raise CommandError(f"no database {using!r} in settings.DATABASES")
            try:
                deleted = DjangoStore(using=using).prune()
            except DatabaseError as error:  # no table (not migrated there), server down
                raise CommandError(f"cannot prune in database {using!r}: {error}") from error
        self.stdout.write(f"Deleted {deleted} expired webhook idempotency record(s).")
