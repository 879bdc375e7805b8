"""The serving-load form on an inference pool's page (the API is /api/v1/serving-loads/)."""

from __future__ import annotations

from django import forms

from accounting.models import ServingLoad
from inventory.models import Pool, PoolPurpose


class ServingLoadForm(forms.ModelForm):
    """One measured serving load of the pool in the URL; the model's clean() bounds it."""

    class Meta:
        model = ServingLoad
        fields = list(ServingLoad.EDITABLE_FIELDS)
        help_texts = {
            "period_start": "UTC, e.g. 2026-11-01 or 2026-11-01 00:00.",
            "period_end": "UTC, exclusive.",
        }
        widgets = {"notes": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args, pool: Pool, **kwargs):
        super().__init__(*args, **kwargs)
        self.instance.pool = self.pool = pool  # the pool is the URL's, never a form field

    def clean(self):
        cleaned = super().clean()
        if self.pool.purpose != PoolPurpose.INFERENCE:
            raise forms.ValidationError("Serving loads are for inference pools.")
        return cleaned
