"""Chart images for the e-mail and the print page: matplotlib to PNG (headless, no browser).

Each chart reads only the report's stored numbers; the PNG carries no timestamp, so the same
numbers give the same bytes.
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: workers and CI are headless

import matplotlib.pyplot as plt  # noqa: E402

CURRENT = "#0b5cad"
PREVIOUS = "#9fb3c8"
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
    current = [(row["value"] or 0.0) * 100 for row in rows]
    previous = [(row["previous"] or 0.0) * 100 for row in rows]
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
    names = [str(row["name"]) for row in rows] or ["(no data)"]
    values = [(row.get("allocation_share") or 0.0) * 100 for row in rows] or [0.0]
    axes.barh(names, values, color=CURRENT)
    axes.set_xlim(0, 100)
    axes.set_xlabel("% of available card-hours allocated")
    axes.set_title("Utilization per cluster", fontsize=10)
    return _png(figure)


def chargeback_chart(numbers: dict[str, Any]) -> bytes:
    """Chargeback per team (used cost + idle share)."""
    rows = numbers["chargeback"]["teams"][:12]
    figure, axes = _axes(len(rows))
    names = [f"{row['team']} ({row['currency']})" for row in rows] or ["(no data)"]
    used = [row.get("used_cost") or 0.0 for row in rows] or [0.0]
    idle = [row.get("idle_cost_share") or 0.0 for row in rows] or [0.0]
    axes.barh(names, used, color=CURRENT, label="Used")
    axes.barh(names, idle, left=used, color=PREVIOUS, label="Idle share")
    axes.invert_yaxis()
    axes.legend(loc="lower right", frameon=False, fontsize=8)
    axes.set_title("Chargeback per team", fontsize=10)
    return _png(figure)


def waste_chart(numbers: dict[str, Any]) -> bytes:
    """Money lost per factor (attribution in proportion to −ln(factor))."""
    rows = numbers["waste"]
    figure, axes = _axes(len(rows))
    names = [row["label"] for row in rows] or ["(no data)"]
    values = [row.get("lost_cost") or 0.0 for row in rows] or [0.0]
    axes.barh(names, values, color="#a40e26")
    axes.invert_yaxis()
    axes.set_title("Money lost per factor (−ln attribution)", fontsize=10)
    return _png(figure)


CHARTS = {
    "factors": ("summary", factors_chart),
    "utilization": ("utilization", utilization_chart),
    "chargeback": ("chargeback", chargeback_chart),
    "waste": ("waste", waste_chart),
}


def render_charts(numbers: dict[str, Any]) -> dict[str, bytes]:
    """PNG bytes of every chart whose section the report shows, by chart name."""
    sections = set(numbers["sections"])
    return {name: draw(numbers) for name, (section, draw) in CHARTS.items() if section in sections}
