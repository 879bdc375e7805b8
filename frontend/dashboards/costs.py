"""The Costs dashboard: cost breakdown per cluster / pool / site, cost per effective PFLOP-day
over time and the chargeback table per team, from the daily rollups (`usage_selectors`)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_safe

from access.pages import role_required
from frontend import drilldown
from frontend.charts import SERIES_COLOURS, PlainFigure, register, styled
from frontend.dashboards import dashboard_query, period_forms
from frontend.dashboards import usage_selectors as data
from frontend.dashboards.money import currency_panels, reporting_currency
from inventory.currency import in_reporting_currency

PART_COLOURS = {
    "ownership_cost": "#264653",
    "it_energy_cost": "#2a9d8f",
    "pue_overhead_cost": "#f4a261",
}
GROUP_LABELS = dict(period_forms.COST_GROUPS)
CHARGEBACK_COLUMNS = [
    ("team", "Team", False),
    ("used_card_hours", "Used card-hours", True),
    ("used_cost", "Used cost", True),
    ("idle_cost_share", "Idle cost share", True),
    ("chargeback_cost", "Chargeback", True),
    ("share_of_total_pct", "Share of total (%)", True),
]


def _money_title(currency: str) -> str:
    return f"Cost ({currency})" if currency else "Cost"


def breakdown_figure(frame: pd.DataFrame) -> PlainFigure:
    group = frame.columns[0]
    figure = None
    # Drill-down: the last customdata item opens the scope's page (frontend/drilldown.py).
    labels = frame[group].unique()
    urls = dict(zip(labels, drilldown.mark_urls(group, labels, "costs"), strict=True))
    for figure, currency, rows, panel in currency_panels(frame):
        targets = rows[["currency"]].assign(url=rows[group].map(urls))
        for column, label in data.COST_PARTS.items():
            panel.add_trace(
                figure,
                {
                    "type": "bar",
                    "x": rows[group].astype(str).to_numpy(),
                    "y": rows[column].to_numpy(),
                    "name": label,
                    "legendgroup": column,
                    "showlegend": panel.col == 1,
                    "marker": {"color": PART_COLOURS[column]},
                    "customdata": targets.to_numpy(dtype=object),
                    "hovertemplate": (
                        f"%{{x}}: {label} %{{y:,.0f}} %{{customdata[0]}}<extra></extra>"
                    ),
                },
            )
        panel.title_axis(figure, "y", _money_title(currency))
    figure["layout"]["barmode"] = "stack"
    return styled(
        figure,
        f"Cost per {GROUP_LABELS.get(group, group).lower()}: ownership, energy, PUE overhead",
        GROUP_LABELS.get(group, group),
    )


def pflop_day_figure(frame: pd.DataFrame) -> PlainFigure:
    figure = None
    index = 0
    clusters = frame["cluster"].unique()
    targets = dict(zip(clusters, drilldown.mark_urls("cluster", clusters, "costs"), strict=True))
    for figure, currency, rows_of_currency, panel in currency_panels(frame):
        for cluster, rows in rows_of_currency.groupby("cluster", sort=False):
            fleet = cluster == data.ALL_CLUSTERS
            panel.add_trace(
                figure,
                {
                    "type": "scatter",
                    "x": rows["bucket_start"].to_numpy(),
                    "y": rows["cost_per_effective_pflop_day"].to_numpy(),
                    "name": f"{cluster} ({currency})",
                    "mode": "lines+markers",
                    "line": {
                        "color": "#111" if fleet else SERIES_COLOURS[index % len(SERIES_COLOURS)],
                        "dash": "dash" if fleet else "solid",
                    },
                    "customdata": rows[["total_cost", "effective_pflop_days"]]
                    .assign(url=targets[cluster])
                    .to_numpy(dtype=object),
                    "hovertemplate": (
                        f"{cluster}<br>%{{x|%Y-%m-%d}}: %{{y:,.0f}} {currency} per effective "
                        f"PFLOP-day<br>%{{customdata[0]:,.0f}} {currency} ÷ "
                        "%{customdata[1]:,.2f} PFLOP-days<extra></extra>"
                    ),
                },
            )
            index += 1
        panel.title_axis(figure, "y", f"Cost per effective PFLOP-day ({currency})")
    return styled(figure, "Cost per effective PFLOP-day", "Period start (date)")


def chargeback_figure(frame: pd.DataFrame) -> PlainFigure:
    frame = frame.sort_values("chargeback_cost", ascending=True)
    figure = None
    panels = 0
    for figure, currency, rows, panel in currency_panels(frame, horizontal=True):
        panels += 1
        for column, label, colour in (
            ("used_cost", "Used", "#1f5fa8"),
            ("idle_cost_share", "Idle share", "#a8c5e6"),
        ):
            panel.add_trace(
                figure,
                {
                    "type": "bar",
                    "y": rows["team"].to_numpy(),
                    "x": rows[column].to_numpy(),
                    "name": label,
                    "legendgroup": column,
                    "showlegend": panel.row == 1,
                    "orientation": "h",
                    "marker": {"color": colour},
                    "customdata": rows[["currency"]].to_numpy(),
                    "hovertemplate": (
                        f"%{{y}}: {label.lower()} %{{x:,.0f}} %{{customdata[0]}}<extra></extra>"
                    ),
                },
            )
        panel.title_axis(figure, "x", _money_title(currency))
        panel.title_axis(figure, "y", "Team")
    figure["layout"]["barmode"] = "stack"
    figure["layout"]["height"] = max(320, 60 * panels + 28 * len(frame))
    return styled(figure, "Chargeback per team: used cost and idle share")


register(
    "costs-breakdown",
    "Cost breakdown",
    data.cost_breakdown,
    breakdown_figure,
    "Ownership (amortized capital + opex) or rental over the in-service card-hours, IT energy "
    "at the site's tariff, and the PUE overhead on top of it, summed over the period.",
)
register(
    "costs-pflop-day",
    "Cost per effective PFLOP-day",
    data.cost_per_pflop_day,
    pflop_day_figure,
    "Total cost ÷ effective PFLOP-days (peak PFLOP-days × the five efficiency factors, with "
    "measured utilization and effective time); the dashed line is all clusters together.",
)
register(
    "costs-chargeback",
    "Chargeback per team",
    data.chargeback,
    chargeback_figure,
    "Each team's used cost plus its share of the idle cost, by the rule below.",
)


def _sort_links(request, current: str) -> list[dict]:
    """Column headers: each links to the page sorted by it (again: the other direction)."""
    params = request.GET.copy()
    headers = []
    for column, label, numeric in CHARGEBACK_COLUMNS:
        ascending = current == column
        descending = current == f"-{column}"
        params["sort"] = f"-{column}" if ascending or (numeric and not descending) else column
        headers.append(
            {
                "column": column,
                "label": label,
                "numeric": numeric,
                "url": f"?{params.urlencode()}#chargeback",
                "aria_sort": "ascending" if ascending else "descending" if descending else "none",
            }
        )
    return headers


def _converted(request, totals: list[dict], query: dict) -> dict | None:
    """?currency=: the chargeback totals in the reporting currency, each rate named."""
    target = reporting_currency(request)
    if target is None or not totals:
        return None
    last_day = query["end"] - dt.timedelta(days=1)  # "end" is the day after the period
    keys = ("used_cost", "idle_cost_share", "chargeback_cost")
    return in_reporting_currency(totals, keys, target, last_day)


@role_required()
@require_safe
def costs_dashboard(request):
    form = dashboard_query.bound_form(period_forms.CostFilterForm, request)
    context = {"form": form, "charts": []}
    if not form.is_valid():
        return render(request, "frontend/dashboards/costs.html", context, status=400)
    query = dashboard_query.query(period_forms.CostFilterForm, request)
    sort = request.GET.get("sort", "-chargeback_cost")
    if sort.lstrip("-") not in data.CHARGEBACK_SORTS:
        sort = "-chargeback_cost"
    page = data.costs_page(request)  # precomputed for the defaults, else computed once
    table = data.sorted_chargeback(request, sort)
    context.update(
        query=query,
        charts=[data.with_downloads(chart, request) for chart in page["charts"]],
        chargeback_chart=data.with_downloads(page["chargeback_chart"], request),
        chargeback_rows=table.to_dict("records") if not table.empty else [],
        chargeback_totals=(totals := data.chargeback_totals(table)),
        headers=_sort_links(request, sort),
        idle_rule_words=period_forms.IDLE_RULE_WORDS[query["idle_rule"]],
        warnings=page["warnings"],
        converted=_converted(request, totals, query),
        rollups=period_forms.rollups_of(form),  # for the range presets, read once
    )
    return render(request, "frontend/dashboards/costs.html", context)


urlpatterns = [path("costs/", costs_dashboard, name="costs")]
