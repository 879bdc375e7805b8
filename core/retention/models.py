"""What the retention task deleted: one row per file, so a page can say "file expired"."""

from __future__ import annotations

from django.db import models


class ExpiredFile(models.Model):
    """A job's file deleted after its retention period (the row's file field is now empty)."""

    model_label = models.CharField(max_length=100, help_text='e.g. "accounting.ImportJob".')
    object_id = models.BigIntegerField()
    field = models.CharField(max_length=100)
    name = models.CharField(max_length=300, help_text="The stored name the file had.")
    size_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    kept_days = models.FloatField(help_text="The retention period that applied.")
    expired_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["model_label", "object_id", "field"], name="expired_file_once_per_field"
            )
        ]

    def __str__(self) -> str:
        return (
            f"{self.model_label} {self.object_id} {self.field} expired {self.expired_at:%Y-%m-%d}"
        )

    @property
    def message(self) -> str:
        return (
            f"The file was deleted on {self.expired_at:%Y-%m-%d}: files are kept "
            f"{self.kept_days:g} days."
        )
