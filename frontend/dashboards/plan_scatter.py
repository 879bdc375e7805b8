"""The planner's days-vs-cost scatter with the Pareto front, one panel per currency."""

from __future__ import annotations

import pandas as pd

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


def scatter_figure(frame: pd.DataFrame) -> charts.PlainFigure:
    """Days vs cost, one panel per currency: options in different currencies are not compared."""
    hover = pd.Series(_hover(frame), index=frame.index)
    figure = None
    for figure, currency, rows, panel in currency_panels(frame):
        for accelerator, part in rows.groupby("accelerator", sort=True):
            panel.add_trace(
                figure,
                {
                    "type": "scatter",
                    "x": part["days"].to_numpy(),
                    "y": part["total_cost"].to_numpy(),
                    "mode": "markers",
                    "name": str(accelerator),
                    "legendgroup": str(accelerator),
                    "showlegend": panel.col == 1,
                    "text": hover[part.index].to_numpy(),
                    "hovertemplate": "%{text}<extra></extra>",
                    "marker": {"size": 10, "opacity": 0.8},
                },
            )
        front = rows[rows["on_pareto_front"].astype(bool)].sort_values("days")
        panel.add_trace(
            figure,
            {
                "type": "scatter",
                "x": front["days"].to_numpy(),
                "y": front["total_cost"].to_numpy(),
                "mode": "lines+markers",
                "name": "Pareto front",
                "legendgroup": "pareto",
                "showlegend": panel.col == 1,
                "text": hover[front.index].to_numpy(),
                "hovertemplate": "Pareto front<br>%{text}<extra></extra>",
                "line": {"color": "#222", "width": 2, "dash": "dot"},
                "marker": {"symbol": "diamond-open", "size": 14, "color": "#222"},
            },
        )
        panel.title_axis(figure, "y", _cost_title(currency))
    return charts.styled(figure, "Days vs cost of every feasible option", "Calendar time (days)")
