from django.db import models


class Delivery(models.Model):
    """One row per handler run (no unique key: duplicates would show)."""

    note_id = models.CharField(max_length=64)
