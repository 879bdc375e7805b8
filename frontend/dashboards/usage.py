"""The Usage dashboard: measured utilization over time, a team × week heatmap and the
sreport-style card-hour breakdown per cluster, from the daily rollups (`usage_selectors`)."""

from __future__ import annotations

import pandas as pd
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_safe
from plotly.colors import get_colorscale

from access.pages import role_required
from accounting.models import SreportUtilization
from accounting.rollups import rollup_status
from frontend import drilldown
from frontend.charts import SERIES_COLOURS, PlainFigure, plain_figure, register, styled
from frontend.dashboards import dashboard_query, period_forms, telemetry_activity
from frontend.dashboards import usage_selectors as data

GROUP_LABELS = dict(period_forms.USAGE_GROUPS)
# plotly.py's "Blues" written out: plotly.js has its own, different scale of that name.
HEATMAP_COLOURS = get_colorscale("Blues")
BREAKDOWN_PARTS = {
    "allocated_card_hours": ("Allocated", "#1f5fa8"),
    "idle_card_hours": ("Idle", "#a8c5e6"),
    "down_card_hours": ("Down", "#e76f51"),
    "planned_down_card_hours": ("Planned down", "#f4a261"),
}


def utilization_figure(frame: pd.DataFrame) -> PlainFigure:
    group = frame.columns[0]
    figure = plain_figure()
    buckets = sorted(frame["bucket_start"].unique())
    groups = list(frame.groupby(group, sort=True))
    targets = drilldown.mark_urls(group, [name for name, _ in groups], "usage")
    for index, ((name, part), target) in enumerate(zip(groups, targets, strict=True)):
        rows = part
        if group != "team":
            # A cluster, pool or card without data in a bucket is a gap, never a drop to 0 %
            # (a team without a row simply ran nothing there).
            rows = part.set_index("bucket_start").reindex(buckets).rename_axis("bucket_start")
            rows = rows.reset_index()
        figure["data"].append(
            {
                "type": "scatter",
                "x": rows["bucket_start"].to_numpy(),
                "y": rows["utilization_pct"].to_numpy(),
                "name": str(name),
                "mode": "lines+markers",
                "line": {"color": SERIES_COLOURS[index % len(SERIES_COLOURS)]},
                # The last item is the drill-down target of every mark of this line.
                "customdata": rows[["allocated_card_hours", "available_card_hours"]]
                .assign(target=target)
                .to_numpy(dtype=object),
                "hovertemplate": (
                    f"{GROUP_LABELS.get(group, group)} {name}<br>%{{x|%Y-%m-%d}}: "
                    "%{y:.1f} %<br>allocated %{customdata[0]:,.0f} of "
                    "%{customdata[1]:,.0f} card-hours<extra></extra>"
                ),
            }
        )
    return styled(
        figure,
        f"Measured utilization per {GROUP_LABELS.get(group, group).lower()}",
        "Period start (date)",
        "Utilization (% of available card-hours)",
    )


def heatmap_figure(frame: pd.DataFrame) -> PlainFigure:
    table = frame.pivot_table(
        index="team", columns="week_start", values="utilization_pct", aggfunc="sum"
    )
    week_targets = [drilldown.week_chargeback_url(week) for week in table.columns]
    figure = plain_figure(
        {
            "type": "heatmap",
            "x": [str(day) for day in table.columns],
            "y": list(table.index),
            "z": table.to_numpy(),
            # Drill-down: a cell opens that week's chargeback per team on Costs.
            "customdata": [week_targets] * len(table.index),
            "colorscale": HEATMAP_COLOURS,
            "colorbar": {"title": {"text": "Utilization (%)"}},
            "hovertemplate": "%{y}, week of %{x}: %{z:.2f} %<br>(click: the week's chargeback)"
            "<extra></extra>",
        },
        xaxis={"type": "category"},
    )
    return styled(
        figure,
        "Team utilization per week (share of the fleet's available card-hours)",
        "Week starting (date)",
        "Team",
    )


def breakdown_figure(frame: pd.DataFrame) -> PlainFigure:
    figure = plain_figure(barmode="stack")
    targets = drilldown.mark_urls("cluster", frame["cluster"], "usage")
    for column, (label, colour) in BREAKDOWN_PARTS.items():
        figure["data"].append(
            {
                "type": "bar",
                "x": frame["cluster"].to_numpy(),
                "y": frame[column].to_numpy(),
                "name": label,
                "marker": {"color": colour},
                "customdata": targets,
                "hovertemplate": f"%{{x}}: {label.lower()} %{{y:,.0f}} card-hours<extra></extra>",
            }
        )
    return styled(figure, "Card-hours by state per cluster", "Cluster", "Card-hours")


register(
    "usage-utilization",
    "Measured utilization",
    data.usage_timeseries,
    utilization_figure,
    "(Allocated + Down) ÷ available card-hours per period; available = cards in service × "
    "hours − planned downtime.",
)
register(
    "usage-team-heatmap",
    "Team × week utilization",
    data.team_heatmap,
    heatmap_figure,
    "A team's allocated card-hours (plus its share of Down) ÷ the available card-hours of "
    "the clusters in the filter; the teams of a week add up to the fleet's utilization.",
)
register(
    "usage-breakdown",
    "Card-hours by state (sreport style)",
    data.sreport_breakdown,
    breakdown_figure,
    "Allocated from usage records; Down and planned down from imported sreport reports; "
    "idle is the rest of the in-service card-hours.",
)


@role_required()
@require_safe
def usage_dashboard(request):
    form = dashboard_query.bound_form(period_forms.UsageFilterForm, request)
    context = {"form": form, "charts": [], "breakdown": None}
    if not form.is_valid():
        return render(request, "frontend/dashboards/usage.html", context, status=400)
    query = dashboard_query.query(period_forms.UsageFilterForm, request)
    cluster = query.get("cluster")
    cluster_ids = [cluster.pk] if cluster is not None else None
    page = data.usage_page(request)  # precomputed for the defaults, else computed once
    period = (query["start"], query["end"])
    sreports = SreportUtilization.objects.all()
    if cluster_ids is not None:
        sreports = sreports.filter(cluster_id__in=cluster_ids)
    context.update(
        query=query,
        charts=[data.with_downloads(chart, request) for chart in page["charts"]]
        + telemetry_activity.charts(request),
        breakdown=[
            {**row, "url": drilldown.with_page_filters(request, target, period)}
            for row, target in zip(
                page["breakdown"],
                drilldown.mark_urls(
                    "cluster", [row["cluster"] for row in page["breakdown"]], "usage"
                ),
                strict=True,
            )
        ],
        coverage_notes=page.get("coverage_notes", []),
        rollups=(
            period_forms.rollups_of(form) if cluster_ids is None else rollup_status(cluster_ids)
        ),
        sreport_count=sreports.count(),
    )
    return render(request, "frontend/dashboards/usage.html", context)


urlpatterns = [path("usage/", usage_dashboard, name="usage")]
