"""Browser forms: a report schedule, and "run now" for a chosen period."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils import timezone

from core.bounds import WithinDates
from core.text import SafeNamesFormMixin
from reports import periods
from reports.authorization import Recipients, check_schedule
from reports.models import ReportFormat, ReportSchedule

SCHEDULE_FIELDS = (
    "name",
    "template",
    "scope",
    "site",
    "cluster",
    "team",
    "frequency",
    "send_time",
    "cron_expression",
    "timezone",
    "reporting_currency",
    "recipient_users",
    "recipient_addresses",
    "formats",
    "enabled",
)


def parse_addresses(text: str) -> list[str]:
    """Addresses separated by newlines, commas or semicolons; a bad one names itself."""
    addresses = [
        part.strip() for chunk in text.splitlines() for part in chunk.replace(";", ",").split(",")
    ]
    addresses = [address for address in addresses if address]
    for address in addresses:
        try:
            validate_email(address)
        except ValidationError as exc:
            raise ValidationError(f'"{address}" is not an e-mail address.') from exc
    return list(dict.fromkeys(addresses))


class ScheduleForm(SafeNamesFormMixin, forms.ModelForm):
    name_fields = ("name", "team")
    timezone = forms.ChoiceField(choices=[], help_text="IANA time zone the times are read in.")
    recipient_addresses = forms.CharField(
        label="Other recipients",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="Plain e-mail addresses, one per line.",
    )
    formats = forms.MultipleChoiceField(
        choices=ReportFormat.choices,
        widget=forms.CheckboxSelectMultiple,
        help_text="The HTML body is the e-mail itself; the others are attached and archived.",
    )
    send_time = forms.TimeField(
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
        help_text="Local time of day (daily, weekly, monthly, quarterly).",
    )

    class Meta:
        model = ReportSchedule
        fields = SCHEDULE_FIELDS
        widgets = {"recipient_users": forms.SelectMultiple(attrs={"size": 6})}
        labels = {"template": "Content", "recipient_users": "Recipients (users)"}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user  # the acting user: scope and recipients are checked for them
        self.fields["timezone"].choices = [(name, name) for name in periods.timezone_names()]
        # The zone in effect is the one selected (not the list's first name when nothing is).
        self.fields["timezone"].initial = self.instance.timezone or settings.TIME_ZONE
        self.fields["recipient_users"].queryset = (
            get_user_model().objects.filter(is_active=True).exclude(email="").order_by("username")
        )
        self.fields["recipient_users"].help_text = "Users with an e-mail address."
        if self.instance.pk:
            self.initial["recipient_addresses"] = "\n".join(self.instance.recipient_addresses)
        else:
            self.initial.setdefault("formats", ["html_email", "xlsx"])

    def clean_recipient_addresses(self) -> list[str]:
        return parse_addresses(self.cleaned_data.get("recipient_addresses") or "")

    def clean(self):
        cleaned = super().clean()
        # Fields that do not apply to the chosen scope/frequency are emptied, not rejected.
        scope = cleaned.get("scope")
        for name in ("site", "cluster"):
            if scope != name:
                cleaned[name] = None
        if scope != "team":
            cleaned["team"] = ""
        if cleaned.get("frequency") != periods.CRON:
            cleaned["cron_expression"] = ""
        self._authorize(cleaned)
        return cleaned

    def _authorize(self, cleaned: dict) -> None:
        if "scope" not in cleaned:
            return  # the scope itself was refused: nothing to judge yet
        recipients = Recipients(
            tuple(cleaned.get("recipient_users") or ()),
            tuple(cleaned.get("recipient_addresses") or ()),
        )
        before = ReportSchedule.objects.filter(pk=self.instance.pk).first()
        check = check_schedule(
            self.user,
            scope=cleaned["scope"],
            team=cleaned.get("team") or "",
            recipients=recipients,
            before=before,
        )
        if check.forbidden:
            self.add_error("team" if cleaned["scope"] == "team" else "scope", check.forbidden)
        for name, message in check.errors.items():
            self.add_error(name if name in self.fields else None, message)


class RunNowForm(forms.Form):
    day = forms.DateField(
        label="A day inside the period",
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=[WithinDates()],  # year 9999 or 0001 has no period: its end overflows
        help_text="The report covers the schedule's period (day, week, month, quarter or the "
        "span between cron firings) that holds this day.",
    )
    deliver = forms.BooleanField(label="E-mail it to the recipients", required=False, initial=True)

    def __init__(self, *args, schedule: ReportSchedule, **kwargs):
        super().__init__(*args, **kwargs)
        self.schedule = schedule
        if not self.is_bound:
            spec = schedule.spec()
            last = periods.period_for_fire(spec, periods.previous_fire(spec, timezone.now()))
            self.initial["day"] = last.start.date()

    def clean_day(self) -> dt.date:
        day = self.cleaned_data["day"]
        period = self.period_for(day)
        if period.end > timezone.now():
            raise ValidationError(
                f"The period {period.label()} has not ended yet; choose an earlier day."
            )
        return day

    def period_for(self, day: dt.date) -> periods.Period:
        return periods.period_containing(self.schedule.spec(), day)


class ArchivePeriodForm(forms.Form):
    """The archive's time range: reports whose period overlaps [start, end), end exclusive."""

    start = forms.DateField(
        label="Period from",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=[WithinDates()],
    )
    end = forms.DateField(
        label="Period to",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=[WithinDates()],
        help_text="Day after the last one.",
    )

    def clean(self):
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        if start and end and end <= start:
            self.add_error("end", "The period must end after it starts.")
        return data
