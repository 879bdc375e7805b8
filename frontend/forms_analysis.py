"""The form that starts an analysis: scope, the site, cluster or pool, and the period."""

from __future__ import annotations

import datetime as dt

from django import forms

from core.bounds import WithinDates
from core.scopes import Scope
from inventory.models import Cluster, Pool, Site
from planner import services
from planner.models import Analysis


def _object_choices() -> list:
    """Sites, clusters and pools as option groups; values say the kind ("pool:3")."""
    sites = Site.objects.order_by("name").values_list("pk", "name")
    clusters = Cluster.objects.order_by("site__name", "name").values_list(
        "pk", "site__name", "name"
    )
    pools = Pool.objects.order_by("cluster__name", "name").values_list(
        "pk", "cluster__name", "name"
    )
    return [
        ("", "— (whole fleet)"),
        ("Sites", [(f"site:{pk}", name) for pk, name in sites]),
        ("Clusters", [(f"cluster:{pk}", f"{name} ({site})") for pk, site, name in clusters]),
        ("Pools", [(f"pool:{pk}", f"{name} ({cluster})") for pk, cluster, name in pools]),
    ]


class AnalysisStartForm(forms.Form):
    scope = forms.ChoiceField(
        choices=[
            (Scope.FLEET, "Fleet"),
            (Scope.SITE, "Site"),
            (Scope.CLUSTER, "Cluster"),
            (Scope.POOL, "Pool"),
        ],
        initial=Scope.FLEET,
    )
    object_id = forms.ChoiceField(
        label="Site, cluster or pool",
        required=False,
        help_text="Leave empty for the whole fleet; otherwise pick one of the scope's kind.",
    )
    period_start = forms.DateField(
        label="Period start",
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=[WithinDates()],
        help_text="From 00:00 UTC of this day.",
    )
    period_end = forms.DateField(
        label="Period end",
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=[WithinDates()],
        help_text="Included: to 24:00 UTC of this day.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["object_id"].choices = _object_choices()
        today = dt.datetime.now(dt.UTC).date()
        self.fields["period_end"].initial = today - dt.timedelta(days=1)
        self.fields["period_start"].initial = today - dt.timedelta(days=30)

    def clean(self):
        cleaned = super().clean()
        scope, target = cleaned.get("scope"), cleaned.get("object_id") or ""
        kind, _, raw_id = target.partition(":")
        cleaned["object_pk"] = None
        if scope and scope != Scope.FLEET and target:
            if kind != scope:
                self.add_error(
                    "object_id", f"This is a {kind}; choose a {scope} or change the scope."
                )
            else:
                cleaned["object_pk"] = int(raw_id)
        start, end = cleaned.get("period_start"), cleaned.get("period_end")
        if start and end and end < start:
            self.add_error("period_end", "The period must end on or after its start day.")
        return cleaned

    def period(self) -> tuple[dt.datetime, dt.datetime]:
        start = dt.datetime.combine(self.cleaned_data["period_start"], dt.time.min, tzinfo=dt.UTC)
        end = dt.datetime.combine(self.cleaned_data["period_end"], dt.time.min, tzinfo=dt.UTC)
        return start, end + dt.timedelta(days=1)


def start_from_form(form: AnalysisStartForm, user) -> Analysis | None:
    """Start the analysis, or put the service's errors next to their fields."""
    if not form.is_valid():
        return None
    start, end = form.period()
    scope = form.cleaned_data["scope"]
    try:
        return services.start_analysis(
            scope=scope,
            object_id=None if scope == Scope.FLEET else form.cleaned_data["object_pk"],
            period_start=start,
            period_end=end,
            user=user,
        )
    except services.AnalysisInputError as exc:
        for field, message in exc.errors.items():
            form.add_error(field if field in form.fields else None, message)
        return None
