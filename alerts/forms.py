from __future__ import annotations

from django import forms

from alerts.authorization import check_rule
from alerts.models import AlertRule
from core.text import SafeNamesFormMixin


class AlertRuleForm(SafeNamesFormMixin, forms.ModelForm):
    name_fields = ("name", "team")
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

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user  # the acting user: the rule's scope and recipients are checked for them

    def clean(self) -> dict:
        data = super().clean()
        text = data.get("recipients_text") or ""
        self.instance.recipients = [part.strip() for part in text.split(",") if part.strip()]
        self.instance.currency = (data.get("currency") or "").upper()
        data["currency"] = self.instance.currency
        self._authorize(data)
        return data

    def _authorize(self, data: dict) -> None:
        if not data.get("scope"):
            return  # the scope itself was refused: nothing to judge yet
        scope, team = data["scope"], data.get("team") or ""
        check = check_rule(
            self.user, scope=scope, team=team, recipients=self.instance.recipients, before=None
        )
        if check.forbidden:
            self.add_error(None, check.forbidden)  # the scope and team together are refused
        for name, message in check.errors.items():
            self.add_error("recipients_text" if name == "recipients" else name, message)
