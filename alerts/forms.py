from __future__ import annotations

from django import forms

from alerts.models import AlertRule


class AlertRuleForm(forms.ModelForm):
    recipients_text = forms.CharField(
        label="E-mail recipients",
        required=False,
        help_text="Addresses separated by commas; empty: the alert shows on this page only.",
    )

    class Meta:
        model = AlertRule
        fields = [
            "name",
            "metric",
            "scope",
            "object_id",
            "team",
            "direction",
            "threshold",
            "currency",
            "window_days",
            "enabled",
        ]
        help_texts = {
            "threshold": "Shares as 0–1 (0.6 = 60 %); money in the rule's currency.",
            "window_days": "Usage figures look back this many days (1–366).",
        }

    def clean(self) -> dict:
        data = super().clean()
        text = data.get("recipients_text") or ""
        self.instance.recipients = [part.strip() for part in text.split(",") if part.strip()]
        self.instance.currency = (data.get("currency") or "").upper()
        data["currency"] = self.instance.currency
        return data
