"""The filter forms of the Usage and Costs pages: period, cluster, grouping, granularity and
idle-cost rule, each with its choices and its default (the form shows the values in effect)."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.utils import timezone

from accounting.rollups import rollup_status
from core.bounds import WithinDates
from engine.cost import IDLE_RULES
from inventory.models import Cluster

MAX_PERIOD_DAYS = 3 * 366
USAGE_GRANULARITIES = [("day", "Day"), ("week", "Week"), ("month", "Month")]
COST_GRANULARITIES = [("week", "Week"), ("month", "Month")]
USAGE_GROUPS = [
    ("cluster", "Cluster"),
    ("pool", "Pool"),
    ("accelerator", "Accelerator"),
    ("team", "Team"),
    ("site", "Site"),
]
COST_GROUPS = [("cluster", "Cluster"), ("pool", "Pool"), ("site", "Site")]
IDLE_RULE_LABELS = {
    "proportional": "Proportional: idle cost shared in proportion to used card-hours",
    "even": "Even: idle cost shared equally among the teams that used the pool",
    "none": "Not charged: idle cost listed as its own row, charged to no team",
}
IDLE_RULE_WORDS = {
    "proportional": (
        "Each team pays its used card-hours at the pool's cost per used card-hour (ownership "
        "plus busy energy). The rest of the pool's cost, its idle cards, is shared among the "
        "teams that used the pool in proportion to their used card-hours. A pool nobody used "
        "is shared over all teams in proportion to their used cost. The charges add up to the "
        "total cost."
    ),
    "even": (
        "Each team pays its used card-hours at the pool's cost per used card-hour (ownership "
        "plus busy energy). The pool's idle cost is split equally among the teams that used "
        "the pool (a pool nobody used: equally among all teams). The charges add up to the "
        "total cost."
    ),
    "none": (
        "Each team pays only its used card-hours at the pool's cost per used card-hour "
        "(ownership plus busy energy). Idle cost is not charged to anyone; it is listed as "
        '"(idle, not charged)" so the rows still add up to the total cost.'
    ),
}


class ClusterChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Cluster) -> str:
        return obj.name


class PeriodForm(forms.Form):
    """Period and cluster, shared by both pages; bad values are errors naming the field."""

    # The fleet-wide rollup status read for a default period (the page shows it again).
    rollups: dict | None = None

    start = forms.DateField(
        label="Period from",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=[WithinDates()],
        help_text="First day (default: the first day with usage, at most a year before the end).",
    )
    end = forms.DateField(
        label="Period to",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=[WithinDates()],
        help_text="Day after the last one (default: the day after the latest usage).",
    )
    cluster = ClusterChoiceField(
        queryset=Cluster.objects.order_by("name"),
        required=False,
        empty_label="Any",
        label="Cluster",
    )

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        end = data.get("end")
        start = data.get("start")
        status = rollup_status() if end is None or start is None else {}
        self.rollups = status or None
        if end is None:
            last_day = status["last_day"]
            end = (
                last_day + dt.timedelta(days=1)
                if last_day
                else timezone.localdate() + dt.timedelta(days=1)
            )
            if start is not None and start >= end:
                end = start + dt.timedelta(days=365)
        if start is None:
            # Fit to data: from the first day with records, at most a year back.
            start = _year_before(end)
            if status["first_day"] is not None and start < status["first_day"] < end:
                start = status["first_day"]
        if end <= start:
            self.add_error("end", "The period must end after it starts.")
        elif (end - start).days > MAX_PERIOD_DAYS:
            self.add_error("end", f"The period is longer than {MAX_PERIOD_DAYS} days.")
        data["start"], data["end"] = start, end
        return data


def rollups_of(form: PeriodForm) -> dict:
    """The fleet-wide rollup status: the one the form read for its defaults, else read now."""
    return form.rollups or rollup_status()


def _year_before(day: dt.date) -> dt.date:
    try:
        return day.replace(year=day.year - 1)
    except ValueError:  # 29 February
        return day.replace(year=day.year - 1, day=28)


class UsageFilterForm(PeriodForm):
    group_by = forms.ChoiceField(label="Group by", choices=USAGE_GROUPS, required=False)
    granularity = forms.ChoiceField(
        label="Granularity", choices=USAGE_GRANULARITIES, required=False
    )
    field_order = ["start", "end", "group_by", "granularity", "cluster"]
    defaults = {"group_by": "cluster", "granularity": "week"}


class CostFilterForm(PeriodForm):
    group_by = forms.ChoiceField(label="Group by", choices=COST_GROUPS, required=False)
    granularity = forms.ChoiceField(label="Granularity", choices=COST_GRANULARITIES, required=False)
    idle_rule = forms.ChoiceField(
        label="Idle cost rule",
        choices=[(rule, IDLE_RULE_LABELS[rule]) for rule in IDLE_RULES],
        required=False,
    )
    field_order = ["start", "end", "group_by", "granularity", "cluster", "idle_rule"]
    defaults = {"group_by": "cluster", "granularity": "month", "idle_rule": "proportional"}
