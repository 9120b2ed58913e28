from django.db import models


class Note(models.Model):
    """A note the service told us about (``note.created``)."""

    note_id = models.CharField(max_length=64)
    author = models.EmailField()
    text = models.TextField()
