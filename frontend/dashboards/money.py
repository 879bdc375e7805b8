"""Money on the result pages, per currency; one converted figure only on request, with its rate.

``?currency=EUR`` (a reporting currency) converts the per-currency figures with the newest
rate on or before the period's end (entered, else the shipped ECB reference rate:
``inventory.currency.conversions``); each converted figure names its rate and a shipped one
its source.
Without a rate for every currency the figures stay per currency, and the page says why.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
from dataclasses import dataclass
from typing import Any

import pandas as pd
from django.http import HttpRequest
from plotly.subplots import make_subplots

from frontend.charts import PlainFigure, plain_figure
from frontend.dashboards.analysis_selectors import FACTOR_LABELS, SUMMARY
from inventory.currency import ISO_4217_CODES, conversions, converted_total
from planner.money import money_by_currency


def scope_pools(results: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The pool rows of one scope of an analysis (``summary``, ``site-<id>``, ``cluster-<id>``)."""
    pools = results.get("pools") or []
    if key in ("", SUMMARY):
        return pools
    level, _, raw_id = key.partition("-")
    return [pool for pool in pools if pool.get(f"{level}_id") == int(raw_id)]


def money_rows(results: dict[str, Any], key: str = SUMMARY) -> list[dict[str, Any]]:
    """Per-currency money of one scope (stored for the whole analysis, else from its pools)."""
    stored = results["summary"].get("money_by_currency") if key in ("", SUMMARY) else None
    if stored is None:
        stored = money_by_currency(pd.DataFrame.from_records(scope_pools(results, key)))
    rows = []
    for entry in stored:
        worst = entry.get("worst_factor")
        rows.append(
            {
                **entry,
                "worst_factor_label": FACTOR_LABELS.get(worst or "", ""),
                "worst_factor_money": (entry.get("lost_by_factor") or {}).get(worst or ""),
            }
        )
    return rows


def factor_money_lines(rows: list[dict[str, Any]], factor: str) -> list[dict[str, Any]]:
    """Money one factor lost, one line per currency of ``money_rows`` (never summed across
    currencies); a currency without prices has ``value`` None and says so in ``note``."""
    lines = []
    for entry in rows:
        value = (entry.get("lost_by_factor") or {}).get(factor)
        note = "" if value is not None else "no prices"
        lines.append({"currency": entry["currency"], "value": value, "note": note})
    return lines


NO_MONEY_REASON = "no prices for these pools: the money lost is unknown, not zero"


NO_MEASURED_USAGE = (
    "modeled: no usage measured in this scope and period; the losses rest on planned "
    "utilization and modeled or default factors"
)


def money_rests_on(results: dict[str, Any], key: str = SUMMARY) -> str | None:
    """What the money lost rests on when no pool of the scope has measured utilization."""
    pools = scope_pools(results, key)
    if not pools or any(p.get("utilization_provenance") == "measured" for p in pools):
        return None
    return NO_MEASURED_USAGE


def reporting_currency(request: HttpRequest) -> str | None:
    code = (request.GET.get("currency") or "").strip().upper()
    return code if code in ISO_4217_CODES else None


def money_context(
    request: HttpRequest, results: dict, on: dt.date, key: str = SUMMARY
) -> dict[str, Any]:
    """``money_rows``; with a reporting currency also ``converted`` (or ``unconverted``)."""
    rows = money_rows(results, key)
    context: dict[str, Any] = {
        "money_rows": rows,
        "reporting_currency": None,
        "money_rests_on": money_rests_on(results, key),
    }
    target = reporting_currency(request)
    if target is None or not rows:
        return context
    rates = conversions([entry["currency"] for entry in rows], target, on)
    context["reporting_currency"] = target
    context["converted"] = converted_total(rows, "lost_money", rates, target)
    context["unconverted"] = sorted(code for code, rate in rates.items() if rate is None)
    return context


@dataclass(frozen=True)
class Panel:
    """One currency's subplot: the axes its traces name and their layout keys."""

    row: int
    col: int
    trace_axes: dict[str, str]
    x_key: str
    y_key: str

    def add_trace(self, figure: PlainFigure, trace: dict[str, Any]) -> None:
        figure["data"].append({**trace, **self.trace_axes})

    def title_axis(self, figure: PlainFigure, letter: str, text: str) -> None:
        key = self.x_key if letter == "x" else self.y_key
        figure["layout"].setdefault(key, {})["title"] = {"text": text}


@functools.lru_cache(maxsize=64)
def _panel_grid(
    rows: int, cols: int, titles: tuple[str, ...] | None, vertical_spacing: float | None = None
) -> tuple[dict[str, Any], tuple[Panel, ...]]:
    """make_subplots' layout (without template) and panels, made once per panel layout."""
    # make_subplots costs ~7 ms a figure (grid and template validated); a copy of its cached
    # layout draws the same figure.
    figure = make_subplots(
        rows=rows, cols=cols, subplot_titles=titles, vertical_spacing=vertical_spacing
    )
    layout = figure.layout.to_plotly_json()
    layout.pop("template", None)
    panels = []
    for row in range(1, rows + 1):
        for col in range(1, cols + 1):
            ref = figure._grid_ref[row - 1][col - 1][0]
            x_key, y_key = ref.layout_keys
            panels.append(Panel(row, col, dict(ref.trace_kwargs), x_key, y_key))
    return layout, tuple(panels)


# Between stacked panels: the upper one's tick labels and axis title, the lower one's title.
STACKED_GAP_PX = 110
# Plot-area height a stacked figure loses to its margins and legend (frontend.charts.LOOK).
STACKED_CHROME_PX = 170


def stacked_spacing(count: int, height_px: int) -> float | None:
    """make_subplots' vertical_spacing (a share of the plot area) for a gap of
    :data:`STACKED_GAP_PX` between ``count`` stacked panels of a ``height_px`` figure."""
    if count <= 1:
        return None
    area = max(height_px - STACKED_CHROME_PX, 1)
    return round(min(STACKED_GAP_PX / area, 0.6 / (count - 1)), 3)


def currency_panels(frame: pd.DataFrame, horizontal: bool = False, height_px: int = 0):
    """One panel (own money axis) per currency: money in two currencies never shares an axis.

    Yields (figure, currency, rows of that currency, panel) of one plain figure
    (`frontend.charts.plain_figure`); ``horizontal`` stacks the panels (bars laid out
    sideways share a team axis badly side by side), ``height_px`` apart enough that a panel's
    title never sits on the axis title of the one above (:func:`stacked_spacing`).
    """
    currencies = sorted(frame["currency"].dropna().unique()) or [""]
    count = len(currencies)
    layout, panels = _panel_grid(
        count if horizontal else 1,
        1 if horizontal else count,
        tuple(currencies) if count > 1 else None,
        stacked_spacing(count, height_px) if horizontal else None,
    )
    figure = plain_figure(**copy.deepcopy(layout))
    for currency, panel in zip(currencies, panels, strict=True):
        rows = frame[frame["currency"] == currency] if currency else frame
        yield figure, currency, rows, panel
