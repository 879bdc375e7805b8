"""Chart images for the e-mail and the print page: matplotlib to PNG (headless, no browser).

Each chart reads only the report's stored numbers; the PNG carries no timestamp, so the same
numbers give the same bytes.
"""

from __future__ import annotations

import io
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: workers and CI are headless

import matplotlib.pyplot as plt

CURRENT = "#0b5cad"
PREVIOUS = "#9fb3c8"
UNCOVERED = "#c9c9c9"  # money of hours without usage records (charged to no team)
WIDTH_IN, HEIGHT_IN, DPI = 6.4, 3.0, 110


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


def _axes(rows: int = 1):
    figure, axes = plt.subplots(figsize=(WIDTH_IN, max(HEIGHT_IN, 0.45 * rows + 1.2)))
    axes.spines[["top", "right"]].set_visible(False)
    return figure, axes


def factors_chart(numbers: dict[str, Any]) -> bytes:
    """Effective utilization and its five factors, this period vs the previous one."""
    rows = list(reversed(numbers["summary"]["factors"]))
    labels = [row["label"] for row in rows]
    # No figure draws no bar (NaN), never a bar at 0.
    current = [math.nan if row["value"] is None else row["value"] * 100 for row in rows]
    previous = [math.nan if row["previous"] is None else row["previous"] * 100 for row in rows]
    figure, axes = _axes(len(rows))
    positions = range(len(rows))
    axes.barh([p + 0.2 for p in positions], current, 0.4, color=CURRENT, label="This period")
    axes.barh([p - 0.2 for p in positions], previous, 0.4, color=PREVIOUS, label="Previous")
    axes.set_yticks(list(positions), labels)
    axes.set_xlim(0, 100)
    axes.set_xlabel("%")
    axes.legend(loc="lower right", frameon=False, fontsize=8)
    axes.set_title("Effective utilization and its factors", fontsize=10)
    return _png(figure)


def utilization_chart(numbers: dict[str, Any]) -> bytes:
    """Utilization (allocated ÷ available) per cluster."""
    rows = numbers["utilization"]["cluster"]
    figure, axes = _axes(len(rows))
    known = [row for row in rows if row.get("allocation_share") is not None]
    if not known:
        _no_data(axes, "no usage records in this period")
    else:
        names = [str(row["name"]) for row in known]
        axes.barh(names, [row["allocation_share"] * 100 for row in known], color=CURRENT)
    axes.set_xlim(0, 100)
    axes.set_xlabel("% of available card-hours allocated")
    axes.set_title("Utilization per cluster", fontsize=10)
    return _png(figure)


def chargeback_chart(numbers: dict[str, Any]) -> bytes:
    """Chargeback per team (used cost + idle share; hours without usage records apart)."""
    figure, panels = _currency_panels(numbers["chargeback"]["teams"][:12])
    for axes, currency, rows in panels:
        if not rows:
            _no_data(axes, "no usage records in this period")
            continue
        rows = [row for row in rows if _has_cost(row)]
        if not rows:
            _no_data(axes, "no price in the inventory for this usage")
            continue
        names = [str(row["team"]) for row in rows]
        used = [row.get("used_cost") or 0.0 for row in rows]
        idle = [row.get("idle_cost_share") or 0.0 for row in rows]
        uncovered = [row.get("uncovered_cost") or 0.0 for row in rows]
        axes.barh(names, used, color=CURRENT, label="Used")
        axes.barh(names, idle, left=used, color=PREVIOUS, label="Idle share")
        if any(uncovered):  # the hours without usage records: a bar of their own
            left = [a + b for a, b in zip(used, idle, strict=True)]
            axes.barh(names, uncovered, left=left, color=UNCOVERED, label="No usage records")
        axes.invert_yaxis()
        axes.set_xlabel(f"Cost ({currency})")
        axes.legend(loc="lower right", frameon=False, fontsize=8)
    panels[0][0].set_title("Chargeback per team, per currency", fontsize=10)
    return _png(figure)


def _currency_panels(rows: list[dict[str, Any]]):
    """(figure, [(axes, currency, its rows)]): one stacked panel, own money axis, per currency;
    one panel with currency None when there are no rows."""
    currencies = sorted({row["currency"] for row in rows}) or [None]
    figure, panels = plt.subplots(
        len(currencies), 1, figsize=(WIDTH_IN, max(HEIGHT_IN, 0.3 * len(rows) + 1.6))
    )
    panels = list(panels) if len(currencies) > 1 else [panels]
    for axes in panels:
        axes.spines[["top", "right"]].set_visible(False)
    return figure, [
        (axes, currency, [row for row in rows if row["currency"] == currency])
        for axes, currency in zip(panels, currencies, strict=True)
    ]


def _no_data(axes, reason: str) -> None:
    """An empty chart says so: no bar at 0 for a figure nobody measured."""
    axes.text(0.5, 0.5, f"— {reason}", ha="center", va="center", transform=axes.transAxes)
    axes.set_xticks([])
    axes.set_yticks([])


def waste_chart(numbers: dict[str, Any]) -> bytes:
    """Money lost per factor (attribution in proportion to −ln(factor)), one panel per
    currency: money in two currencies never shares an axis."""
    figure, panels = _currency_panels(numbers["waste"])
    for axes, currency, rows in panels:
        known = [row for row in rows if row["lost_cost"] is not None]
        if not known:
            _no_data(axes, "no cost data in this period" if currency is None else "no data")
            continue
        axes.barh([r["label"] for r in known], [r["lost_cost"] for r in known], color="#a40e26")
        axes.invert_yaxis()
        axes.set_xlabel(f"Lost ({currency})")
    panels[0][0].set_title("Money lost per factor (−ln attribution)", fontsize=10)
    return _png(figure)


CHARTS = {
    "factors": ("summary", factors_chart),
    "utilization": ("utilization", utilization_chart),
    "chargeback": ("chargeback", chargeback_chart),
    "waste": ("waste", waste_chart),
}


def _has_cost(row: dict[str, Any]) -> bool:
    return row.get("used_cost") is not None or row.get("idle_cost_share") is not None


def chart_gaps(numbers: dict[str, Any]) -> dict[str, str]:
    """Why a chart has nothing to draw, by chart name; a chart with data is absent."""
    factors = numbers["summary"]["factors"]
    teams = numbers.get("chargeback", {}).get("teams", [])
    empty = {
        "factors": all(r["value"] is None and r["previous"] is None for r in factors),
        "utilization": all(
            r.get("allocation_share") is None
            for r in numbers.get("utilization", {}).get("cluster", [])
        ),
        "chargeback": not any(_has_cost(row) for row in teams),
        "waste": all(row["lost_cost"] is None for row in numbers.get("waste", [])),
    }
    reasons = {
        "factors": "no usage records in this period or the previous one",
        "utilization": "no usage records in this period",
        "chargeback": "no price in the inventory for this usage"
        if teams
        else "no usage records in this period",
        "waste": "no cost data in this period (no inventory with a price in scope)",
    }
    return {name: reasons[name] for name, is_empty in empty.items() if is_empty}


def render_charts(numbers: dict[str, Any]) -> dict[str, bytes]:
    """PNG bytes of every chart whose section the report shows and that has data, by chart
    name: an empty axis would read as a measured zero."""
    sections = set(numbers["sections"])
    gaps = chart_gaps(numbers)
    return {
        name: draw(numbers)
        for name, (section, draw) in CHARTS.items()
        if section in sections and name not in gaps
    }
