"""The Usage page's telemetry chart: allocated vs. active card-hours per pool and day.

Active = allocated card-hours × measured graphics-engine activity (DCGM via Prometheus,
docs/telemetry.md); the gap between the two lines is allocated-but-idle time. Shown only
when the period has telemetry for the user's teams.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import plotly.graph_objects as go
from django.http import HttpRequest

from frontend.charts import SERIES_COLOURS, register, render_chart, styled
from frontend.dashboards import dashboard_query, period_forms
from telemetry.selectors import daily_activity

KEY = "usage-telemetry-activity"


def activity_frame(request: HttpRequest) -> pd.DataFrame:
    query = dashboard_query.query(period_forms.UsageFilterForm, request)
    cluster = query.get("cluster")
    last_day = query["end"] - dt.timedelta(days=1)  # the page's end is the day after
    cluster_ids = None if cluster is None else (cluster.pk,)
    rows = daily_activity(request.user, cluster_ids, query["start"], last_day)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.rename(columns={"pool__name": "pool"})
    frame["pool"] = frame["pool"].fillna("(unmapped)")
    return frame[["day", "pool", "allocated_card_hours", "active_card_hours", "idle_card_hours"]]


def activity_figure(frame: pd.DataFrame) -> go.Figure:
    figure = go.Figure()
    for index, (pool, rows) in enumerate(frame.groupby("pool", sort=True)):
        colour = SERIES_COLOURS[index % len(SERIES_COLOURS)]
        for column, label, dash in (
            ("allocated_card_hours", "allocated", "solid"),
            ("active_card_hours", "active", "dash"),
        ):
            figure.add_trace(
                go.Scatter(
                    x=rows["day"], y=rows[column], name=f"{pool} {label}",
                    mode="lines+markers", line={"color": colour, "dash": dash},
                )
            )  # fmt: skip
    return styled(
        figure, "Allocated vs. active card-hours (telemetry)", "day", "card-hours per day"
    )


register(
    KEY,
    "Allocated vs. active card-hours (telemetry)",
    activity_frame,
    activity_figure,
    "Active = allocated card-hours × measured graphics-engine activity (DCGM); the gap is "
    "allocated-but-idle time.",
)


def charts(request: HttpRequest) -> list[dict]:
    """The chart's context when the period has telemetry, else nothing (no empty panel)."""
    chart = render_chart(KEY, request)
    return [] if chart["empty"] else [chart]
