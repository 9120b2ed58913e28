"""Discovered at startup, like admin.py: register handlers on the project's receiver."""

from service_webhooks import Event, NoteCreated
from service_webhooks.adapters.django import receiver

from .models import Note


@receiver.on("note.created", version=1)
def note_created(event: Event[NoteCreated]) -> None:
    # idempotent: a redelivery (spec §6.1) updates the same row instead of adding one
    Note.objects.update_or_create(
        note_id=event.data.id, defaults={"author": event.data.author, "text": event.data.text}
    )
