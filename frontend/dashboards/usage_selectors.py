"""Data of the Usage and Costs dashboards: the accounting reports, fed from daily rollups.

Every frame here is what a chart plots and what its "download data" file holds. The numbers
are those of `accounting.selectors` (the `/api/v1/accounting/…` reports) for the same query:
the same functions run, only their usage input is rebuilt from
:class:`~accounting.models.UsageDailyRollup` rows (`accounting.rollups`) instead of a year of
raw records, so a page costs a few thousand rows, not 10⁵-10⁶.

Query parameters are the API's: ``start``, ``end`` (dates, end exclusive), ``granularity``,
``group_by``, ``cluster`` (id), ``idle_rule``; the filter forms are in `period_forms`. Results
are memoised per view and in the shared cache (`dashboard_query`). After each rollup refresh
the worker precomputes both pages' default views (:func:`precompute_default_views`: report
frames and rendered charts) for a fleet-wide view of plain parameters, so a first visit reads
one cache entry; other filters are computed on demand once, then cached.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from access.scoping import scope_frame
from accounting import selectors
from accounting.rollups import rollup_usage_frame
from accounting.selectors import GROUP_COLUMNS, AccountingScope
from accounting.selectors.uncovered import UNCOVERED_TEAM
from engine.cost import IDLE_RULES, UNALLOCATED_IDLE_TEAM, cost_per_effective_pflop_day
from frontend.charts import download_urls, render_chart
from frontend.dashboards.dashboard_query import (
    DashboardQuery,
    View,
    memo,
    query,
    view_memo,
    view_teams,
)
from frontend.dashboards.period_forms import (
    COST_GRANULARITIES,
    USAGE_GRANULARITIES,
    USAGE_GROUPS,
    CostFilterForm,
    UsageFilterForm,
)
from inventory.models import Pool


def _inputs(view: View, data: dict[str, Any]) -> selectors.ScopeInputs:
    """Inventory and sreport rows of the query's clusters and period, read once per view."""
    cache = view_memo(view)
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


def utilization(view: View, group: str, granularity: str) -> pd.DataFrame:
    """Measured utilization per ``group`` × bucket: the API's utilization report rows."""
    data = query(UsageFilterForm, view)

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
            scope, [column], usage=usage, inputs=_inputs(view, data)
        )
        if result.empty:
            return pd.DataFrame()
        labelled = selectors.add_labels(result, [column])
        if group == "pool":
            labelled["pool"] = labelled["pool_id"].map(_pool_labels()).fillna(selectors.UNKNOWN)
        labelled["group"] = labelled[group]
        return labelled

    frame = memo(view, ("utilization", group, granularity, _key(data)), compute)
    # Cached for every team; a team-scoped user keeps only their teams' rows.
    return scope_frame(frame, view_teams(view))


def _key(data: dict[str, Any]) -> tuple:
    cluster = data.get("cluster")
    return (data["start"], data["end"], cluster.pk if cluster is not None else None)


def _teams_key(view: View) -> tuple[str, ...] | None:
    """Rendered pages show team rows: one cache entry per set of visible teams."""
    teams = view_teams(view)
    return None if teams is None else tuple(sorted(teams))


def _day(values: pd.Series) -> pd.Series:
    return pd.to_datetime(values).dt.tz_localize(None).dt.date


def usage_timeseries(view: View) -> pd.DataFrame:
    data = query(UsageFilterForm, view)
    group = data["group_by"]
    frame = utilization(view, group, data["granularity"])
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


def team_heatmap(view: View) -> pd.DataFrame:
    frame = utilization(view, "team", "week")
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


def sreport_breakdown(view: View) -> pd.DataFrame:
    """Per cluster over the period: allocated, Down, planned down and idle card-hours."""
    frame = utilization(view, "cluster", "total")
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


def _pool_costs(view: View, granularity: str, money_only: bool = False) -> selectors.PoolCosts:
    """Every pool's money per bucket: one run serves the cost report and, monthly, the
    chargeback (its usage then carries the teams). ``money_only``: only the chargeback's
    columns (`selectors.pool_costs`), for pages whose charts are not monthly."""
    data = query(CostFilterForm, view)

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
        return selectors.pool_costs(scope, usage, inputs=_inputs(view, data), money_only=money_only)

    return memo(view, _pool_costs_key(granularity, money_only, data), compute, intermediate=True)


def _pool_costs_key(granularity: str, money_only: bool, data: dict[str, Any]) -> tuple:
    return ("pool-costs", granularity, money_only, _key(data))


def _cost_units(view: View) -> pd.DataFrame:
    """The cost report per site × cluster × pool × bucket (one run serves every chart), with
    the report's warnings in ``attrs["warnings"]`` (also when no row is left)."""
    data = query(CostFilterForm, view)

    def compute() -> pd.DataFrame:
        scope = scope_of(data, data["granularity"], ("site", "cluster", "pool"))
        costs = _pool_costs(view, data["granularity"])
        # The cost report's rows, without the JSON round trip of the API, and without the
        # factors no Costs chart draws.
        frame = selectors.cost_rows_frame(scope, costs, factors=False)
        if not frame.empty:
            frame["pool"] = frame["pool_id"].map(_pool_labels()).fillna(selectors.UNKNOWN)
            for name in ("bucket_start", "bucket_end"):
                local = pd.to_datetime(frame[name], utc=True).dt.tz_convert(settings.TIME_ZONE)
                frame[name] = _day(local)
        frame.attrs["warnings"] = costs.warnings
        return frame

    return memo(view, ("costs", data["granularity"], _key(data)), compute)


def cost_breakdown(view: View) -> pd.DataFrame:
    """Ownership, IT energy and PUE overhead per group over the period."""
    data = query(CostFilterForm, view)
    units = _cost_units(view)
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


def cost_per_pflop_day(view: View) -> pd.DataFrame:
    """Cost per effective PFLOP-day per cluster and bucket, plus all clusters together."""
    units = _cost_units(view)
    if units.empty:
        return units
    keys = ["cluster", "currency", "bucket_start"]
    # Over the hours usage records cover: the others have no effective compute (no data).
    summed = ["total_cost", "uncovered_cost", "effective_pflop_days", "covered_peak_pflop_days"]
    per_cluster = units.groupby(keys, as_index=False, sort=True)[summed].sum(min_count=1)
    fleet = (
        units.groupby(["currency", "bucket_start"], as_index=False, sort=True)[summed]
        .sum(min_count=1)
        .assign(cluster=ALL_CLUSTERS)
    )
    frame = pd.concat([per_cluster, fleet], ignore_index=True)
    frame["cost_per_effective_pflop_day"] = cost_per_effective_pflop_day(
        frame["total_cost"] - frame["uncovered_cost"],
        frame["effective_pflop_days"],
        frame["covered_peak_pflop_days"],
    )
    if frame["cost_per_effective_pflop_day"].isna().all():
        return frame.iloc[:0]  # nothing delivered is known: the chart's no-data state
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


# In the shared-cache keys of frames and pages whose columns changed: a cached entry of the
# old layout is never read (2: the chargeback's "uncovered_cost" column).
CACHED_LAYOUT = 2
CHARGEBACK_GRANULARITY = "month"
CHARGEBACK_SORTS = (
    "team",
    "used_card_hours",
    "used_cost",
    "idle_cost_share",
    "uncovered_cost",
    "chargeback_cost",
    "share_of_total_pct",
)
# Per row used + idle share + no usage records = the row's total (``chargeback_cost``).
CHARGEBACK_MONEY = ["used_card_hours", "used_cost", "idle_cost_share", "uncovered_cost"]
# Rows whose money no team pays: hours without usage records, idle cost under the rule "none".
NOT_CHARGED_ROWS = (UNCOVERED_TEAM, UNALLOCATED_IDLE_TEAM)


def chargeback(view: View) -> pd.DataFrame:
    """Chargeback per team over the period: the report's monthly charges summed."""
    data = query(CostFilterForm, view)

    def compute() -> pd.DataFrame:
        # Charged per calendar month (how bills go out), whatever the charts' granularity.
        scope = scope_of(data, CHARGEBACK_GRANULARITY, ("cluster",))
        # The report's rows and bills without its JSON round trip (NaN and ±inf as JSON has
        # them: no value).
        # The full monthly run if this view made it for its charts, else only the money.
        full = view_memo(view).get(_pool_costs_key(CHARGEBACK_GRANULARITY, False, data))
        costs = full or _pool_costs(view, CHARGEBACK_GRANULARITY, money_only=True)
        rows, bills = selectors.chargeback_frames(scope, costs)
        if rows.empty:
            return pd.DataFrame()
        money = [*CHARGEBACK_MONEY, "chargeback_cost"]
        rows = rows.assign(**{name: _finite(rows[name]) for name in money})
        summed = rows.groupby(["team", "currency"], as_index=False, sort=True)[money].sum()
        totals = _finite(bills["total_cost"]).groupby(level="currency").sum()
        summed["share_of_total_pct"] = (
            summed["chargeback_cost"] / summed["currency"].map(totals) * 100.0
        )
        return summed

    key = ("chargeback", data["idle_rule"], _key(data), CACHED_LAYOUT)
    frame = memo(view, key, compute)
    return scope_frame(frame, view_teams(view))


def _finite(values: pd.Series) -> pd.Series:
    return values.astype("float64").replace([np.inf, -np.inf], np.nan)


def sorted_chargeback(view: View, sort: str) -> pd.DataFrame:
    frame = chargeback(view)
    column = sort.lstrip("-")
    if frame.empty or column not in CHARGEBACK_SORTS:
        return frame
    return frame.sort_values(
        [column, "team"], ascending=[not sort.startswith("-"), True], ignore_index=True
    )


def chargeback_totals(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Per currency: each column's sum (used + idle share + no usage records = total) and
    what the teams are charged (the total less the rows no team pays)."""
    if frame.empty:
        return []
    charged = frame["chargeback_cost"].where(~frame["team"].isin(NOT_CHARGED_ROWS), 0.0)
    summed = (
        frame.assign(charged_cost=charged)
        .groupby("currency", as_index=False, sort=True)[
            [*CHARGEBACK_MONEY, "chargeback_cost", "charged_cost"]
        ]
        .sum()
    )
    total = summed["chargeback_cost"]
    summed["charged_share_pct"] = summed["charged_cost"] / total.where(total != 0) * 100.0
    return summed.astype(object).where(summed.notna(), None).to_dict("records")


# -- pages -----------------------------------------------------------------------------------


def _chart(key: str, frame: pd.DataFrame) -> dict[str, Any]:
    """A chart's template context without its download links (they follow the query string)."""
    context = render_chart(key, None, frame)
    context.pop("downloads")
    return context


def with_downloads(chart: dict[str, Any], request: HttpRequest) -> dict[str, Any]:
    return {**chart, "downloads": download_urls(chart["key"], request)}


def usage_page(view: View) -> dict[str, Any]:
    """The Usage page's charts (rendered) and breakdown table: one cache entry per query."""
    data = query(UsageFilterForm, view)

    def compute() -> dict[str, Any]:
        breakdown = sreport_breakdown(view)
        return {
            "charts": [
                _chart("usage-utilization", usage_timeseries(view)),
                _chart("usage-team-heatmap", team_heatmap(view)),
                _chart("usage-breakdown", breakdown),
            ],
            "breakdown": breakdown.to_dict("records") if not breakdown.empty else [],
            "coverage_notes": _inputs(view, data).notes,
        }

    key = ("usage-page", data["group_by"], data["granularity"], _key(data), _teams_key(view))
    return memo(view, key, compute)


def costs_page(view: View) -> dict[str, Any]:
    """The Costs page's charts (rendered) and report warnings: one cache entry per query."""
    data = query(CostFilterForm, view)

    def compute() -> dict[str, Any]:
        return {
            "charts": [
                _chart("costs-breakdown", cost_breakdown(view)),
                _chart("costs-pflop-day", cost_per_pflop_day(view)),
            ],
            "chargeback_chart": _chart("costs-chargeback", chargeback(view)),
            # Also when no row is left ("no usage data" notes).
            "warnings": _cost_units(view).attrs["warnings"],
        }

    key = (
        "costs-page",
        CACHED_LAYOUT,
        data["granularity"],
        data["group_by"],
        data["idle_rule"],
        _key(data),
        _teams_key(view),
    )
    return memo(view, key, compute)


def precompute_default_views(cluster_ids: Any = None) -> None:
    """Worker side, after a rollup refresh: compute and store both pages' default views (the
    first visit of a manager reads them), and the reports behind every other option of the
    default period (a page then only draws its charts). The defaults cover every cluster,
    whichever ``cluster_ids`` were refreshed."""
    fleet_view = DashboardQuery.of_params
    usage_page(fleet_view({}))
    costs_page(fleet_view({}))
    for granularity, _ in USAGE_GRANULARITIES:
        for group, _ in USAGE_GROUPS:
            view = fleet_view({"granularity": granularity, "group_by": group})
            utilization(view, group, granularity)
    for granularity, _ in COST_GRANULARITIES:
        _cost_units(fleet_view({"granularity": granularity}))
    for rule in IDLE_RULES:
        chargeback(fleet_view({"idle_rule": rule}))
