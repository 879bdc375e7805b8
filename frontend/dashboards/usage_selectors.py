"""Data of the Usage and Costs dashboards: the accounting reports, fed from daily rollups.

Every frame here is what a chart plots and what its "download data" file holds. The numbers
are those of `accounting.selectors` (the `/api/v1/accounting/…` reports) for the same query:
the same functions run, only their usage input is rebuilt from
:class:`~accounting.models.UsageDailyRollup` rows (`accounting.rollups`) instead of a year of
raw records, so a page costs a few thousand rows, not 10⁵-10⁶.

Query parameters are the API's: ``start``, ``end`` (dates, end exclusive), ``granularity``,
``group_by``, ``cluster`` (id), ``idle_rule``. Results are memoised on the request (the charts
of one page share one report run) and in the ``dashboards`` cache, which web and worker
processes share (a database table by default), keyed by the data version. After each rollup
refresh the worker precomputes both pages' default views (:func:`precompute_default_views`:
report frames and rendered charts), so a first visit reads one cache entry; other filters are
computed on demand once, then cached.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from typing import Any

import pandas as pd
from django import forms
from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import BadRequest
from django.db import connection
from django.http import HttpRequest, QueryDict
from django.utils import timezone

from access.scoping import request_teams, scope_frame
from accounting import selectors
from accounting.models import SreportUtilization, UsageDailyRollup
from accounting.rollups import rollup_status, rollup_usage_frame
from accounting.selectors import GROUP_COLUMNS, AccountingScope
from core.bounds import WithinDates
from frontend.charts import download_urls, render_chart
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site
from planner.engine.cost import IDLE_RULES, cost_per_effective_pflop_day

MAX_PERIOD_DAYS = 3 * 366
CACHE_ALIAS = "dashboards"
# Keys carry the data version, so entries only age out (or are culled) when superseded.
CACHE_SECONDS = 24 * 3600
# (model, column): a row count and the column's maximum, the latest change. sreport rows keep
# their id when a re-import changes them, but take the new import job; the card catalog has
# no timestamp, its history table records every save.
VERSIONED = (
    (UsageDailyRollup, "refreshed_at"),
    (SreportUtilization, "id"),
    (SreportUtilization, "import_job_id"),
    (Site, "updated"),
    (Cluster, "updated"),
    (Pool, "updated"),
    (NodeGroup, "updated"),
    (AcceleratorModel.history.model, "history_id"),
)
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


def bound_form(form_class: type[PeriodForm], request: HttpRequest) -> PeriodForm:
    """The page's filter form, one per request: validated once (its defaults read the rollups)."""
    cache = _cache(request)
    key = ("form", form_class.__name__)
    if key not in cache:
        params = request.GET.copy()
        # The form shows the values in effect: a missing choice is its default, selected.
        for name, default in form_class.defaults.items():
            if not params.get(name):
                params[name] = default
        form = form_class(params)
        if form.is_valid():
            # ... and the period's default days, written into the date fields.
            for name in ("start", "end"):
                params[name] = form.cleaned_data[name].isoformat()
        cache[key] = form
    return cache[key]


def query(form_class: type[PeriodForm], request: HttpRequest) -> dict[str, Any]:
    """The validated query of a page (defaults filled in); BadRequest naming the field."""
    cache = _cache(request)
    key = ("query", form_class.__name__)
    if key not in cache:
        form = bound_form(form_class, request)
        if not form.is_valid():
            raise BadRequest(
                "; ".join(
                    f"{form.fields[name].label if name in form.fields else name}: {' '.join(errs)}"
                    for name, errs in form.errors.items()
                )
            )
        data = dict(form.cleaned_data)
        for name, default in form_class.defaults.items():
            data[name] = data.get(name) or default
        cache[key] = data
    return cache[key]


def _cache(request: HttpRequest) -> dict:
    if not hasattr(request, "_usage_dashboards"):
        request._usage_dashboards = {}
    return request._usage_dashboards


def data_version(request: HttpRequest) -> str:
    """What the dashboards' numbers depend on, in one query: rollups, sreport, inventory.

    Imports and refreshes bump a count or ``refreshed_at``, inventory edits ``updated`` (or
    the card catalog's history), so a cached result is never served for changed data.
    """
    cache = _cache(request)
    if "version" not in cache:
        quote = connection.ops.quote_name
        parts = []
        for model, column in VERSIONED:
            table = quote(model._meta.db_table)
            # Quoted identifiers of our own model tables; no value from a request.
            parts.append(f"(SELECT COUNT(*) FROM {table})")  # noqa: S608  # nosec B608
            parts.append(f"(SELECT MAX({quote(column)}) FROM {table})")  # noqa: S608  # nosec B608
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(parts))
            row = cursor.fetchone()
        cache["version"] = hashlib.sha256(repr(row).encode()).hexdigest()[:20]
    return cache["version"]


def shared_cache():
    return caches[CACHE_ALIAS]


# Counts computations per key kind (tests check that a precomputed view computes nothing).
computations: dict[str, int] = {}


def _memo(request: HttpRequest, key: tuple, compute: Callable[[], Any]) -> Any:
    """Per request, then across requests and processes (the ``dashboards`` cache) until the
    data version changes."""
    cache = _cache(request)
    if key not in cache:
        shared_key = (
            f"usage-dashboards:{key[0]}:"
            + hashlib.sha256(
                repr((key, data_version(request), settings.TIME_ZONE)).encode()
            ).hexdigest()
        )
        value = shared_cache().get(shared_key)
        if value is None:
            computations[key[0]] = computations.get(key[0], 0) + 1
            value = compute()
            shared_cache().set(shared_key, value, CACHE_SECONDS)
        cache[key] = value
    return cache[key]


def _inputs(request: HttpRequest, data: dict[str, Any]) -> selectors.ScopeInputs:
    """Inventory and sreport rows of the query's clusters and period, read once per request."""
    cache = _cache(request)
    key = ("inputs", _key(data))
    if key not in cache:
        cache[key] = selectors.scope_inputs(scope_of(data, "total", ("cluster",)))
    return cache[key]


def _aware(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time()))


def scope_of(data: dict[str, Any], granularity: str, group_by: tuple[str, ...]) -> AccountingScope:
    cluster = data.get("cluster")
    return AccountingScope(
        period_start=_aware(data["start"]),
        period_end=_aware(data["end"]),
        granularity=granularity,
        cluster_ids=(cluster.pk,) if cluster is not None else None,
        group_by=group_by,
        idle_rule=data.get("idle_rule") or "proportional",
        tz=settings.TIME_ZONE,
    )


# -- usage -----------------------------------------------------------------------------------


def _pool_labels() -> dict[int, str]:
    return {
        pk: f"{cluster}/{name}"
        for pk, cluster, name in Pool.objects.values_list("pk", "cluster__name", "name")
    }


def utilization(request: HttpRequest, group: str, granularity: str) -> pd.DataFrame:
    """Measured utilization per ``group`` × bucket: the API's utilization report rows."""
    data = query(UsageFilterForm, request)

    def compute() -> pd.DataFrame:
        scope = scope_of(data, granularity, (group,))
        usage = rollup_usage_frame(
            scope.cluster_ids,
            scope.period_start,
            scope.period_end,
            keys=[group] if group in ("pool", "accelerator", "team") else [],
            edges=scope.edges(),
            granularity=granularity,
        )
        column = GROUP_COLUMNS[group]
        result = selectors.measured_utilization(
            scope, [column], usage=usage, inputs=_inputs(request, data)
        )
        if result.empty:
            return pd.DataFrame()
        labelled = selectors.add_labels(result, [column])
        if group == "pool":
            labelled["pool"] = labelled["pool_id"].map(_pool_labels()).fillna(selectors.UNKNOWN)
        labelled["group"] = labelled[group]
        return labelled

    frame = _memo(request, ("utilization", group, granularity, _key(data)), compute)
    # Cached for every team; a team-scoped user keeps only their teams' rows.
    return scope_frame(frame, request_teams(request))


def _key(data: dict[str, Any]) -> tuple:
    cluster = data.get("cluster")
    return (data["start"], data["end"], cluster.pk if cluster is not None else None)


def _teams_key(request: HttpRequest) -> tuple[str, ...] | None:
    """Rendered pages show team rows: one cache entry per set of visible teams."""
    teams = request_teams(request)
    return None if teams is None else tuple(sorted(teams))


def _day(values: pd.Series) -> pd.Series:
    return pd.to_datetime(values).dt.tz_localize(None).dt.date


def usage_timeseries(request: HttpRequest) -> pd.DataFrame:
    data = query(UsageFilterForm, request)
    group = data["group_by"]
    frame = utilization(request, group, data["granularity"])
    if frame.empty:
        return frame
    return pd.DataFrame(
        {
            group: frame["group"],
            "bucket_start": _day(frame["bucket_start"]),
            "bucket_end": _day(frame["bucket_end"]),
            "utilization_pct": frame["utilization"] * 100.0,
            "allocated_card_hours": frame["allocated_card_hours"],
            "down_card_hours": frame["down_card_hours"],
            "available_card_hours": frame["available_card_hours"],
            "effective_time_pct": frame["effective_time"] * 100.0,
        }
    )


def team_heatmap(request: HttpRequest) -> pd.DataFrame:
    frame = utilization(request, "team", "week")
    if frame.empty:
        return frame
    return pd.DataFrame(
        {
            "team": frame["team"],
            "week_start": _day(frame["bucket_start"]),
            "utilization_pct": frame["utilization"] * 100.0,
            "allocated_card_hours": frame["allocated_card_hours"],
            "available_card_hours": frame["available_card_hours"],
        }
    ).sort_values(["team", "week_start"], ignore_index=True)


def sreport_breakdown(request: HttpRequest) -> pd.DataFrame:
    """Per cluster over the period: allocated, Down, planned down and idle card-hours."""
    frame = utilization(request, "cluster", "total")
    if frame.empty:
        return frame
    allocated = frame["allocated_card_hours"]
    down = frame["down_card_hours"]
    planned = frame["planned_down_card_hours"]
    idle = (frame["in_service_card_hours"] - planned - allocated - down).clip(lower=0.0)
    return pd.DataFrame(
        {
            "cluster": frame["cluster"],
            "allocated_card_hours": allocated,
            "idle_card_hours": idle,
            "down_card_hours": down,
            "planned_down_card_hours": planned,
            "in_service_card_hours": frame["in_service_card_hours"],
            "utilization_pct": frame["utilization"] * 100.0,
        }
    ).sort_values("cluster", ignore_index=True)


# -- costs -----------------------------------------------------------------------------------

COST_PARTS = {
    "ownership_cost": "Ownership or rental",
    "it_energy_cost": "IT energy",
    "pue_overhead_cost": "PUE overhead (cooling, power losses)",
}


def _pool_costs(request: HttpRequest, granularity: str) -> selectors.PoolCosts:
    """Every pool's money per bucket: one run serves the cost report and, monthly, the
    chargeback (its usage then carries the teams)."""
    data = query(CostFilterForm, request)

    def compute() -> selectors.PoolCosts:
        scope = scope_of(data, granularity, ("site", "cluster", "pool"))
        usage = rollup_usage_frame(
            scope.cluster_ids,
            scope.period_start,
            scope.period_end,
            keys=["pool", "team"] if granularity == CHARGEBACK_GRANULARITY else ["pool"],
            edges=scope.edges(),
            granularity=granularity,
        )
        return selectors.pool_costs(scope, usage, inputs=_inputs(request, data))

    return _memo(request, ("pool-costs", granularity, _key(data)), compute)


def _cost_units(request: HttpRequest) -> pd.DataFrame:
    """The cost report per site × cluster × pool × bucket (one run serves every chart)."""
    data = query(CostFilterForm, request)

    def compute() -> pd.DataFrame:
        scope = scope_of(data, data["granularity"], ("site", "cluster", "pool"))
        costs = _pool_costs(request, data["granularity"])
        # The cost report's rows, without the JSON round trip of the API.
        frame = selectors.cost_rows_frame(scope, costs)
        if frame.empty:
            return frame
        frame["pool"] = frame["pool_id"].map(_pool_labels()).fillna(selectors.UNKNOWN)
        for name in ("bucket_start", "bucket_end"):
            local = pd.to_datetime(frame[name], utc=True).dt.tz_convert(settings.TIME_ZONE)
            frame[name] = _day(local)
        frame.attrs["warnings"] = costs.warnings
        return frame

    return _memo(request, ("costs", data["granularity"], _key(data)), compute)


def cost_breakdown(request: HttpRequest) -> pd.DataFrame:
    """Ownership, IT energy and PUE overhead per group over the period."""
    data = query(CostFilterForm, request)
    units = _cost_units(request)
    if units.empty:
        return units
    group = data["group_by"]
    summed = units.groupby([group, "currency"], as_index=False, sort=True)[
        ["compute_cost", "energy_cost", "energy_overhead_cost", "total_cost"]
    ].sum()
    return pd.DataFrame(
        {
            group: summed[group],
            "currency": summed["currency"],
            "ownership_cost": summed["compute_cost"],
            "it_energy_cost": summed["energy_cost"] - summed["energy_overhead_cost"],
            "pue_overhead_cost": summed["energy_overhead_cost"],
            "total_cost": summed["total_cost"],
        }
    )


ALL_CLUSTERS = "All clusters"


def cost_per_pflop_day(request: HttpRequest) -> pd.DataFrame:
    """Cost per effective PFLOP-day per cluster and bucket, plus all clusters together."""
    units = _cost_units(request)
    if units.empty:
        return units
    keys = ["cluster", "currency", "bucket_start"]
    summed = ["total_cost", "effective_pflop_days", "peak_pflop_days"]
    per_cluster = units.groupby(keys, as_index=False, sort=True)[summed].sum()
    fleet = (
        units.groupby(["currency", "bucket_start"], as_index=False, sort=True)[summed]
        .sum()
        .assign(cluster=ALL_CLUSTERS)
    )
    frame = pd.concat([per_cluster, fleet], ignore_index=True)
    frame["cost_per_effective_pflop_day"] = cost_per_effective_pflop_day(
        frame["total_cost"], frame["effective_pflop_days"], frame["peak_pflop_days"]
    )
    return frame[
        [
            "cluster",
            "currency",
            "bucket_start",
            "total_cost",
            "effective_pflop_days",
            "cost_per_effective_pflop_day",
        ]
    ]


CHARGEBACK_GRANULARITY = "month"
CHARGEBACK_SORTS = (
    "team",
    "used_card_hours",
    "used_cost",
    "idle_cost_share",
    "chargeback_cost",
    "share_of_total_pct",
)


def chargeback(request: HttpRequest) -> pd.DataFrame:
    """Chargeback per team over the period: the report's monthly charges summed."""
    data = query(CostFilterForm, request)

    def compute() -> pd.DataFrame:
        # Charged per calendar month (how bills go out), whatever the charts' granularity.
        scope = scope_of(data, CHARGEBACK_GRANULARITY, ("cluster",))
        costs = _pool_costs(request, CHARGEBACK_GRANULARITY)
        report = selectors.chargeback_report(scope, costs=costs)
        rows = pd.DataFrame(report["rows"])
        if rows.empty:
            return rows
        summed = rows.groupby(["team", "currency"], as_index=False, sort=True)[
            ["used_card_hours", "used_cost", "idle_cost_share", "chargeback_cost"]
        ].sum()
        totals = pd.DataFrame(report["totals"]).groupby("currency")["total_cost"].sum()
        summed["share_of_total_pct"] = (
            summed["chargeback_cost"] / summed["currency"].map(totals) * 100.0
        )
        return summed

    frame = _memo(request, ("chargeback", data["idle_rule"], _key(data)), compute)
    return scope_frame(frame, request_teams(request))


def sorted_chargeback(request: HttpRequest, sort: str) -> pd.DataFrame:
    frame = chargeback(request)
    column = sort.lstrip("-")
    if frame.empty or column not in CHARGEBACK_SORTS:
        return frame
    return frame.sort_values(
        [column, "team"], ascending=[not sort.startswith("-"), True], ignore_index=True
    )


def chargeback_totals(frame: pd.DataFrame) -> list[dict[str, Any]]:
    if frame.empty:
        return []
    summed = frame.groupby("currency", as_index=False, sort=True)[
        ["used_card_hours", "used_cost", "idle_cost_share", "chargeback_cost"]
    ].sum()
    return summed.to_dict("records")


# -- pages -----------------------------------------------------------------------------------


def _chart(key: str, request: HttpRequest, frame: pd.DataFrame) -> dict[str, Any]:
    """A chart's template context without its download links (they follow the query string)."""
    context = render_chart(key, request, frame)
    context.pop("downloads")
    return context


def with_downloads(chart: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
    return {**chart, "downloads": download_urls(chart["key"], request)}


def usage_page(request: HttpRequest) -> dict[str, Any]:
    """The Usage page's charts (rendered) and breakdown table: one cache entry per query."""
    data = query(UsageFilterForm, request)

    def compute() -> dict[str, Any]:
        breakdown = sreport_breakdown(request)
        return {
            "charts": [
                _chart("usage-utilization", request, usage_timeseries(request)),
                _chart("usage-team-heatmap", request, team_heatmap(request)),
                _chart("usage-breakdown", request, breakdown),
            ],
            "breakdown": breakdown.to_dict("records") if not breakdown.empty else [],
            "coverage_notes": _inputs(request, data).notes,
        }

    key = ("usage-page", data["group_by"], data["granularity"], _key(data), _teams_key(request))
    return _memo(request, key, compute)


def costs_page(request: HttpRequest) -> dict[str, Any]:
    """The Costs page's charts (rendered) and report warnings: one cache entry per query."""
    data = query(CostFilterForm, request)

    def compute() -> dict[str, Any]:
        return {
            "charts": [
                _chart("costs-breakdown", request, cost_breakdown(request)),
                _chart("costs-pflop-day", request, cost_per_pflop_day(request)),
            ],
            "chargeback_chart": _chart("costs-chargeback", request, chargeback(request)),
            # From the pool costs, so "no usage data" notes show even when no row is left.
            "warnings": _pool_costs(request, data["granularity"]).warnings,
        }

    key = (
        "costs-page",
        data["granularity"],
        data["group_by"],
        data["idle_rule"],
        _key(data),
        _teams_key(request),
    )
    return _memo(request, key, compute)


def _request(params: dict[str, str]) -> HttpRequest:
    request = HttpRequest()
    request.GET = QueryDict(mutable=True)
    request.GET.update(params)
    return request


def precompute_default_views(cluster_ids: Any = None) -> None:
    """Worker side, after a rollup refresh: compute and store both pages' default views (the
    first visit of a manager reads them), and the reports behind every other option of the
    default period (a page then only draws its charts). The defaults cover every cluster,
    whichever ``cluster_ids`` were refreshed."""
    usage_page(HttpRequest())
    costs_page(HttpRequest())
    for granularity, _ in USAGE_GRANULARITIES:
        for group, _ in USAGE_GROUPS:
            request = _request({"granularity": granularity, "group_by": group})
            utilization(request, group, granularity)
    for granularity, _ in COST_GRANULARITIES:
        _cost_units(_request({"granularity": granularity}))
    for rule in IDLE_RULES:
        chargeback(_request({"idle_rule": rule}))
