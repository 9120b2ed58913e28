"""``manage.py service_webhooks_replay (ID... | --status S [--since D]) [--event E]
[--organization O] [--force] [--dry-run]``: run the project receiver's handlers again
on received deliveries (its inbox), as ``service-webhooks inbox replay`` does, with the
same lines and exit codes: 1 when a delivery is not found or a replay did not succeed
(not 2xx), 2 on a usage error."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from service_webhooks.inbox.commands import (
    check_replay_selection,
    dry_run_line,
    find,
    replay_line,
    replay_selection,
    replay_total,
    selection,
)

NO_INBOX = (
    "the project receiver keeps no inbox (INBOX is False, or no INBOX beside a memory or Redis "
    "STORE: set SERVICE_WEBHOOKS['INBOX'] = "
    "{'BACKEND': 'service_webhooks.adapters.django.inbox.DjangoInbox'})"
)
"""As ``service-webhooks inbox replay`` says it: the default INBOX is none beside such a STORE."""


class Command(BaseCommand):
    help = "Replay received webhook deliveries: IDs (or prefixes), or a --status selection."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("ids", nargs="*", metavar="ID", help="delivery IDs or prefixes")
        parser.add_argument(
            "--status", action="append", default=[], help="reason or class (5xx); repeatable"
        )
        parser.add_argument("--event", help="only this eventName")
        parser.add_argument("--organization", help="only this organization ID")
        parser.add_argument("--since", help="received since: 30m, 2h, 7d, or an ISO time")
        parser.add_argument("--force", action="store_true", help="re-run processed ones too")
        parser.add_argument("--dry-run", action="store_true", help="only list what would run")

    def handle(self, *args: Any, **options: Any) -> None:
        from ...conf import receiver

        inbox = receiver.inbox
        if inbox is None:
            raise CommandError(NO_INBOX)
        filters = {
            "--status": options["status"],
            "--event": options["event"],
            "--organization": options["organization"],
        }
        try:
            check_replay_selection(options["ids"], filters, options["since"])
            if options["ids"]:
                records = [find(inbox, prefix) for prefix in options["ids"]]
            else:
                query = selection(
                    options["status"], options["event"], options["organization"], options["since"]
                )
                records = replay_selection(inbox, query)  # oldest first: arrival order
        except ValueError as error:  # a usage error: exit 2, as `service-webhooks inbox replay`
            raise CommandError(str(error), returncode=2) from error
        except LookupError as error:  # no such delivery, or a prefix matching several: 1
            raise CommandError(str(error)) from error
        if options["dry_run"]:
            for record in records:
                self.stdout.write(dry_run_line(record))
            self.stderr.write(replay_total(len(records)))
            return
        failed = 0
        for record in records:
            try:
                outcome = receiver.replay(record.id, force=options["force"])
            except KeyError:  # pruned since it was selected
                self.stderr.write(f"{record.id}\tnot in the receiver's inbox")
                failed += 1
                continue
            failed += not outcome.ok
            self.stdout.write(replay_line(record, outcome))
        self.stderr.write(replay_total(len(records), failed))
        if failed:
            raise CommandError(f"{failed} replay(s) did not succeed", returncode=1)
