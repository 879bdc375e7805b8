from __future__ import annotations

from django import forms

from alerts.authorization import check_rule
from alerts.models import AlertRule
from alerts.selectors import OBJECT_SCOPES, object_choices
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
        # The site, cluster or pool picked by name ("cluster:4" → 4), never a typed id.
        self.fields["object_id"] = forms.ChoiceField(
            label="Site, cluster or pool",
            required=False,
            choices=[("", "None (a fleet or team rule)"), *object_choices()],
            help_text="For a site, cluster or pool rule: the one it watches (the scope says "
            "which kind).",
        )
        if self.instance.object_id and self.instance.scope in OBJECT_SCOPES:
            self.initial["object_id"] = f"{self.instance.scope}:{self.instance.object_id}"

    def clean_object_id(self) -> tuple[str, int] | None:
        value = self.cleaned_data.get("object_id") or ""
        if not value:
            return None
        kind, _, pk = value.partition(":")  # the choices hold only well-formed values
        return kind, int(pk)

    def clean(self) -> dict:
        data = super().clean()
        self._object_of_scope(data)
        text = data.get("recipients_text") or ""
        self.instance.recipients = [part.strip() for part in text.split(",") if part.strip()]
        self.instance.currency = (data.get("currency") or "").upper()
        data["currency"] = self.instance.currency
        self._authorize(data)
        return data

    def _object_of_scope(self, data: dict) -> None:
        """The picked object's id when its kind is the scope's (the model judges the rest)."""
        if "object_id" not in data:
            return  # not one of the choices: already refused
        picked, scope = data["object_id"], data.get("scope")
        if picked is not None and scope in OBJECT_SCOPES and picked[0] != scope:
            self.add_error(
                "object_id", f"This is a {picked[0]}; choose a {scope} or change the scope."
            )
            return
        data["object_id"] = None if picked is None else picked[1]

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
