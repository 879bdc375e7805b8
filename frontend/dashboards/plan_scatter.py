"""The planner's days-vs-cost scatter with the Pareto front, one panel per currency."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from frontend import charts
from frontend.dashboards.money import currency_panels


def _cost_title(currency: str) -> str:
    return f"Total cost ({currency})" if currency else "Total cost (mixed currencies)"


def _hover(frame: pd.DataFrame) -> list[str]:
    place = (
        frame["site"]
        .fillna("")
        .astype(str)
        .where(frame["pool"].isna(), "pool " + frame["pool"].astype(str))
    )
    return [
        f"{label}<br>{days:,.1f} days · {cost:,.0f} {currency or ''}<br>{cards:,.0f} cards"
        + (f" · {where}" if where else "")
        for label, days, cost, currency, cards, where in zip(
            frame["label"],
            frame["days"],
            frame["total_cost"],
            frame["currency"].fillna(""),
            frame["cards"],
            place,
            strict=True,
        )
    ]


def scatter_figure(frame: pd.DataFrame) -> go.Figure:
    """Days vs cost, one panel per currency: options in different currencies are not compared."""
    hover = pd.Series(_hover(frame), index=frame.index)
    figure = None
    for figure, currency, rows, row, col in currency_panels(frame):
        for accelerator, part in rows.groupby("accelerator", sort=True):
            figure.add_trace(
                go.Scatter(
                    x=part["days"],
                    y=part["total_cost"],
                    mode="markers",
                    name=str(accelerator),
                    legendgroup=str(accelerator),
                    showlegend=col == 1,
                    text=hover[part.index],
                    hovertemplate="%{text}<extra></extra>",
                    marker={"size": 10, "opacity": 0.8},
                ),
                row=row,
                col=col,
            )
        front = rows[rows["on_pareto_front"].astype(bool)].sort_values("days")
        figure.add_trace(
            go.Scatter(
                x=front["days"],
                y=front["total_cost"],
                mode="lines+markers",
                name="Pareto front",
                legendgroup="pareto",
                showlegend=col == 1,
                text=hover[front.index],
                hovertemplate="Pareto front<br>%{text}<extra></extra>",
                line={"color": "#222", "width": 2, "dash": "dot"},
                marker={"symbol": "diamond-open", "size": 14, "color": "#222"},
            ),
            row=row,
            col=col,
        )
        figure.update_yaxes(title_text=_cost_title(currency), row=row, col=col)
    return charts.styled(figure, "Days vs cost of every feasible option", "Calendar time (days)")
