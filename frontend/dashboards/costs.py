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
from frontend.dashboards.money import Panel, currency_panels, reporting_currency
from inventory.currency import in_reporting_currency

PART_COLOURS = {
    "ownership_cost": "#264653",
    "it_energy_cost": "#2a9d8f",
    "pue_overhead_cost": "#f4a261",
}
GROUP_LABELS = dict(period_forms.COST_GROUPS)
# Used cost + idle cost share + no usage records = Total, row by row and in the totals.
CHARGEBACK_COLUMNS = [
    ("team", "Team", False),
    ("used_card_hours", "Used card-hours", True),
    ("used_cost", "Used cost", True),
    ("idle_cost_share", "Idle cost share", True),
    ("uncovered_cost", "No usage records (not charged)", True),
    ("chargeback_cost", "Total", True),
    ("share_of_total_pct", "Share of total cost (%)", True),
]
CHARGEBACK_PARTS = (
    ("used_cost", "Used", "#1f5fa8"),
    ("idle_cost_share", "Idle share", "#a8c5e6"),
    ("uncovered_cost", "No usage records (not charged)", "#b8b8b8"),
)
# One name per definition: analyses score inference pools with serving definitions (MBU,
# availability), so their figure is another number and carries another name.
PFLOP_DAY_NAME = "Cost per effective PFLOP-day (training definitions)"


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


def _single_bucket_axes(figure: PlainFigure, panel: Panel, values: pd.Series, day: str) -> None:
    """A panel of one bucket: the money axis from 0 (an autorange around one point spans a
    few units and reads as noise) and one category per cluster, the date in the axis title."""
    top = float(values.max()) if values.notna().any() else 0.0
    layout = figure["layout"]
    layout.setdefault(panel.y_key, {}).update({"range": [0.0, top * 1.3 if top > 0 else 1.0]})
    layout.setdefault(panel.x_key, {}).update(
        # Short: on a phone "Cluster (period from …)" ran past the chart's left edge.
        {"type": "category", "title": {"text": f"Cluster (from {day})"}}
    )


def _pflop_day_trace(
    rows: pd.DataFrame, cluster: str, currency: str, colour: str, single: bool, url: str
) -> dict:
    """One cluster's series; over one bucket a marker at the cluster's name with its value."""
    fleet = cluster == data.ALL_CLUSTERS
    values = rows["cost_per_effective_pflop_day"]
    trace = {
        "type": "scatter",
        "x": [cluster] * len(rows) if single else rows["bucket_start"].to_numpy(),
        "y": values.to_numpy(),
        "name": f"{cluster} ({currency})",
        "mode": "lines+markers",
        "line": {"color": "#111" if fleet else colour, "dash": "dash" if fleet else "solid"},
        "customdata": rows[["total_cost", "effective_pflop_days"]]
        .assign(url=url)
        .to_numpy(dtype=object),
        "hovertemplate": (
            f"{cluster}<br>{'' if single else '%{x|%Y-%m-%d}: '}%{{y:,.0f}} {currency} per "
            f"effective PFLOP-day (training definitions)<br>%{{customdata[0]:,.0f}} "
            f"{currency} ÷ %{{customdata[1]:,.2f}} PFLOP-days<extra></extra>"
        ),
    }
    if single:
        trace |= {
            "mode": "markers+text",
            "marker": {"size": 12, "color": "#111" if fleet else colour},
            "text": [f"{value:,.0f} {currency}" if pd.notna(value) else "—" for value in values],
            "textposition": "top center",
            "cliponaxis": False,
        }
    return trace


def pflop_day_figure(frame: pd.DataFrame) -> PlainFigure:
    figure = None
    index = 0
    clusters = frame["cluster"].unique()
    targets = dict(zip(clusters, drilldown.mark_urls("cluster", clusters, "costs"), strict=True))
    for figure, currency, rows_of_currency, panel in currency_panels(frame):
        known = rows_of_currency[rows_of_currency["cost_per_effective_pflop_day"].notna()]
        single = known["bucket_start"].nunique() <= 1
        if single and not known.empty:  # the buckets without a figure hold no point
            rows_of_currency = known
        # One cluster (and the all-clusters rows) in a currency: they are the same series.
        if rows_of_currency["cluster"].nunique() <= 2:
            rows_of_currency = rows_of_currency[rows_of_currency["cluster"] != data.ALL_CLUSTERS]
        for cluster, rows in rows_of_currency.groupby("cluster", sort=False):
            colour = SERIES_COLOURS[index % len(SERIES_COLOURS)]
            trace = _pflop_day_trace(rows, cluster, currency, colour, single, targets[cluster])
            panel.add_trace(figure, trace)
            index += 1
        panel.title_axis(figure, "y", f"Per effective PFLOP-day ({currency})")
        if single:
            values = rows_of_currency["cost_per_effective_pflop_day"]
            day = str(rows_of_currency["bucket_start"].iloc[0])
            _single_bucket_axes(figure, panel, values, day)
        else:
            panel.title_axis(figure, "x", "Period start (date)")
    return styled(figure, PFLOP_DAY_NAME)


def chargeback_figure(frame: pd.DataFrame) -> PlainFigure:
    frame = frame.sort_values("chargeback_cost", ascending=True)
    figure = None
    panels = frame["currency"].nunique()
    height_px = max(320, 110 * panels + 28 * len(frame))
    in_legend: set[str] = set()
    for figure, currency, rows, panel in currency_panels(frame, True, height_px):
        for column, label, colour in CHARGEBACK_PARTS:
            if column == "uncovered_cost" and not rows[column].any():
                continue  # every hour has usage records: no empty legend entry
            panel.add_trace(
                figure,
                {
                    "type": "bar",
                    "y": rows["team"].to_numpy(),
                    "x": rows[column].to_numpy(),
                    "name": label,
                    "legendgroup": column,
                    "showlegend": column not in in_legend,
                    "orientation": "h",
                    "marker": {"color": colour},
                    "customdata": rows[["currency"]].to_numpy(),
                    "hovertemplate": (
                        f"%{{y}}: {label.lower()} %{{x:,.0f}} %{{customdata[0]}}<extra></extra>"
                    ),
                },
            )
            in_legend.add(column)
        panel.title_axis(figure, "x", _money_title(currency))
        panel.title_axis(figure, "y", "Team")
    figure["layout"]["barmode"] = "stack"
    figure["layout"]["height"] = height_px
    return styled(figure, "Chargeback per team")


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
    PFLOP_DAY_NAME,
    data.cost_per_pflop_day,
    pflop_day_figure,
    "Total cost ÷ effective PFLOP-days (peak PFLOP-days × the five efficiency factors with "
    "their training definitions: MFU, scaling, effective training time, measured "
    "utilization); the dashed line is all clusters together. For training pools an "
    "analysis gives the same figure; for inference pools it gives a serving figure instead, "
    "“cost per million tokens” served.",
)
register(
    "costs-chargeback",
    "Chargeback per team",
    data.chargeback,
    chargeback_figure,
    "Each team's used cost plus its share of the idle cost, by the rule below; the money of "
    "hours without usage records is drawn apart, charged to no team.",
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
    keys = ("used_cost", "idle_cost_share", "uncovered_cost", "chargeback_cost", "charged_cost")
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
