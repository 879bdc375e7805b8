"""The analyses section: list and start analyses, watch their progress, read their results.

Results come from `Analysis.results` as the worker stored them (see analysis_selectors);
pages never run the engine. Reading needs the viewer role, starting and recomputing the
planner role.
"""

from __future__ import annotations

import hashlib
import textwrap
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from django.contrib import messages
from django.core.cache import cache
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import floatformat
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST, require_safe

from access.pages import role_required
from access.roles import PLANNER, has_role
from frontend import charts
from frontend.dashboards import analysis_selectors as sel
from frontend.dashboards.money import (
    NO_MONEY_REASON,
    factor_money_lines,
    money_context,
    money_rows,
)
from frontend.dashboards.pool_missing import pool_not_in_analysis
from frontend.forms_analysis import AnalysisStartForm, start_from_form
from inventory.models import Pool
from planner import services
from planner.models import Analysis

# --- charts ------------------------------------------------------------------------------------

WATERFALL = "analyses-waterfall"
FACTORS = "analyses-factors"
COMPUTE_BY_SCOPE = "analyses-compute-by-scope"
STRATEGIES = "analyses-hetero-strategies"

# The pools table's factor columns (short labels; each sorts the pools, worst first).
POOL_FACTOR_COLUMNS = (
    ("energy", "Energy"),
    ("mfu", "MFU"),
    ("scaling", "Scaling"),
    ("effective_time", "Eff. time"),
    ("utilization", "Utilization"),
)
# With inference pools in the table, the two columns whose definitions differ say both.
SERVING_COLUMN_LABELS = {"mfu": "MFU / MBU", "effective_time": "Eff. time / avail."}


def pool_factor_columns(pools: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    if not sel.serving_pool_names(pools):
        return POOL_FACTOR_COLUMNS
    return tuple((key, SERVING_COLUMN_LABELS.get(key, label)) for key, label in POOL_FACTOR_COLUMNS)


def analysis_for_chart(request: HttpRequest) -> Analysis | None:
    """?analysis=<id>, else the latest successful fleet analysis."""
    raw = request.GET.get("analysis", "")
    if not raw:
        return sel.latest_fleet_analysis()
    if not raw.isdecimal():
        raise Http404("analysis must be an id")
    return get_object_or_404(sel.analyses_light(), pk=int(raw))


def _scope_from(request: HttpRequest, analysis: Analysis | None):
    """(results, scope key, row) of the request's analysis and scope; row None without results."""
    if analysis is None or not sel.has_results(analysis.results):
        return None, sel.SUMMARY, None
    key = request.GET.get("scope") or sel.SUMMARY
    try:
        return analysis.results, key, sel.scope_row(analysis.results, key)
    except sel.UnknownScopeError as exc:
        raise Http404(str(exc)) from exc


def waterfall_data(request: HttpRequest) -> pd.DataFrame:
    analysis = analysis_for_chart(request)
    results, key, row = _scope_from(request, analysis)
    if row is None:
        return pd.DataFrame()
    return _waterfall(analysis, key, row)


def _waterfall(analysis: Analysis, key: str, row: dict) -> pd.DataFrame:
    """The scope's waterfall; each factor step drills to the analysis's pools, worst first."""
    results = analysis.results
    order = results.get("waterfall_order") or sel.WATERFALL_ORDER
    frame = sel.waterfall_frame(row, order, sel.scope_currency(results, key))
    # Where telemetry replaced the model: marked on the MFU step (and in its download).
    note = sel.telemetry_note(results, key)
    frame["telemetry"] = [note if factor == "mfu" else "" for factor in frame["factor"]]
    frame.attrs["targets"] = _factor_targets(analysis, key, frame["factor"])
    return frame


def _factors(analysis: Analysis, key: str, row: dict) -> pd.DataFrame:
    frame = sel.factor_frame(row)
    frame.attrs["targets"] = _factor_targets(analysis, key, frame["factor"])
    return frame


def _factor_targets(analysis: Analysis, key: str, factors: pd.Series) -> list[str]:
    """Drill-down of a factor mark: the analysis's pools sorted by it, worst first ("" for
    the nameplate and effective totals). Targets ride in attrs, not in the download."""
    detail = reverse("frontend:analysis-detail", args=[analysis.pk])
    scope = "" if key == sel.SUMMARY else f"scope={key}&"
    return [f"{detail}?{scope}sort={factor}#pools-heading" if factor else "" for factor in factors]


def _signed(value: float, digits: int = 0) -> str:
    return f"{value:+,.{digits}f}".replace("-", "−")


def _percent(share: float) -> str:
    return f"{share * 100:.1f} %"


def _money_text(value: float, currency: str) -> str:
    if pd.isna(value):
        return ""
    unit = f" {currency}" if currency else " (mixed currencies)"
    for scale, suffix in ((1e9, "bn"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{_signed(value / scale, 1)}{suffix}{unit}"
    return f"{_signed(value)}{unit}"


def waterfall_figure(frame: pd.DataFrame) -> go.Figure:
    currency = frame["currency"].iloc[0]
    labels, text, hover = [], [], []
    for row in frame.itertuples(index=False):
        if row.measure == "relative":
            label = f"{row.step}<br>{_percent(row.factor_value_share)} · {row.provenance}"
            labels.append(label + (f"<br>{row.telemetry}" if getattr(row, "telemetry", "") else ""))
            money = _money_text(row.lost_money, currency)
            text.append(f"{_signed(row.pflop_days)} PFLOP-days" + (f"<br>{money}" if money else ""))
            hover.append(
                f"{row.step} = {_percent(row.factor_value_share)} ({row.provenance})<br>"
                f"lost {_signed(row.pflop_days, 1)} PFLOP-days"
                + (f", {money}" if money else "")
                + f"<br>left {row.level_pflop_days:,.1f} PFLOP-days"
            )
        else:
            labels.append(row.step)
            text.append(f"{row.pflop_days:,.0f} PFLOP-days")
            hover.append(f"{row.step}: {row.pflop_days:,.1f} PFLOP-days")
    figure = go.Figure(
        go.Waterfall(
            x=labels,
            y=frame["pflop_days"].tolist(),
            measure=frame["measure"].tolist(),
            text=text,
            textposition="outside",
            cliponaxis=False,
            customdata=_with_targets(frame, hover),
            hovertemplate="%{customdata[0]}<extra></extra>",
            connector={"line": {"color": "#8d99ae", "width": 1}},
            decreasing={"marker": {"color": charts.FACTOR_COLOURS["mfu"]}},
            increasing={"marker": {"color": charts.FACTOR_COLOURS["energy"]}},
            totals={"marker": {"color": charts.SERIES_COLOURS[0]}},
        )
    )
    figure = charts.styled(
        figure,
        "From nameplate to effective compute",
        "Step (factor value · provenance)",
        "Compute in the period (PFLOP-days)",
    )
    figure.update_layout(showlegend=False, margin={"t": 70, "b": 90})
    figure.update_yaxes(rangemode="tozero")
    return figure


def factors_data(request: HttpRequest) -> pd.DataFrame:
    analysis = analysis_for_chart(request)
    _, key, row = _scope_from(request, analysis)
    return pd.DataFrame() if row is None else _factors(analysis, key, row)


def _factor_tick(label: str, provenance: str) -> str:
    """A factor's axis label with its provenance, wrapped: at 390 px the longest label on one
    line left the bars too little room, and their values were cut at the chart's edge."""
    return "<br>".join(textwrap.wrap(f"{label} · {provenance}", width=26))


def factors_figure(frame: pd.DataFrame) -> go.Figure:
    labels = frame["factor_label"].tolist()
    figure = go.Figure(
        go.Bar(
            x=frame["value_share"].tolist(),
            y=labels,
            orientation="h",
            marker_color=[charts.FACTOR_COLOURS[f] for f in frame["factor"]],
            text=[_percent(value) for value in frame["value_share"]],
            textposition="auto",
            customdata=[
                [*values, target]
                for values, target in zip(
                    frame[["provenance", "lost_share"]].to_numpy().tolist(),
                    frame.attrs.get("targets") or [""] * len(frame),
                    strict=True,
                )
            ],
            hovertemplate="%{y}: %{x:.1%} (%{customdata[0]})<br>"
            "share of peak compute lost to it: %{customdata[1]:.1%}<extra></extra>",
        )
    )
    figure = charts.styled(figure, "The five factors", "Factor value (% of peak)", "Factor")
    figure.update_xaxes(range=[0, 1], tickformat=".0%")
    ticks = [_factor_tick(*pair) for pair in zip(labels, frame["provenance"], strict=True)]
    figure.update_yaxes(autorange="reversed", tickmode="array", tickvals=labels, ticktext=ticks)
    figure.update_layout(showlegend=False, height=320)
    return figure


def compute_by_scope_data(request: HttpRequest) -> pd.DataFrame:
    analysis = analysis_for_chart(request)
    if analysis is None:
        return pd.DataFrame()
    frame = sel.compute_by_scope_frame(analysis.results)
    # Drill-down targets ride in attrs, not in the download's columns.
    detail = reverse("frontend:analysis-detail", args=[analysis.pk])
    frame.attrs["targets"] = [
        f"{detail}?scope={level}-{row[f'{level}_id']}"
        for level in ("site", "cluster")
        for row in analysis.results.get(f"{level}s", [])
    ]
    return frame


def _with_targets(frame: pd.DataFrame, values: list) -> list:
    """Each mark's value with its drill-down target last (page-tools.js opens it on click)."""
    targets = frame.attrs.get("targets") or [""] * len(values)
    return [[value, target] for value, target in zip(values, targets, strict=True)]


def compute_by_scope_figure(frame: pd.DataFrame) -> go.Figure:
    names = [
        f"{level}: {scope}" for level, scope in zip(frame["level"], frame["scope"], strict=True)
    ]
    figure = go.Figure(
        [
            go.Bar(
                name="Nameplate (peak)",
                x=names,
                y=frame["nameplate_pflop_days"].tolist(),
                marker_color="#c9d3df",
                customdata=_with_targets(frame, frame["nameplate_pflop_days"].tolist()),
                hovertemplate="%{x}<br>nameplate %{y:,.1f} PFLOP-days<extra></extra>",
            ),
            go.Bar(
                name="Effective",
                x=names,
                y=frame["effective_pflop_days"].tolist(),
                marker_color=charts.SERIES_COLOURS[0],
                customdata=_with_targets(frame, frame["effective_utilization_share"].tolist()),
                hovertemplate="%{x}<br>effective %{y:,.1f} PFLOP-days "
                "(%{customdata[0]:.1%} of nameplate)<extra></extra>",
            ),
        ]
    )
    figure = charts.styled(
        figure, "Nameplate vs effective compute", "Site or cluster", "Compute (PFLOP-days)"
    )
    figure.update_layout(barmode="group")
    return figure


def strategies_data(request: HttpRequest) -> pd.DataFrame:
    analysis = analysis_for_chart(request)
    raw = request.GET.get("pool", "")
    if analysis is None or not raw.isdecimal():
        return pd.DataFrame()
    try:
        row = sel.scope_row(analysis.results, f"pool-{raw}")
    except sel.UnknownScopeError as exc:
        raise Http404(str(exc)) from exc
    return sel.strategy_frame(row)


def strategies_figure(frame: pd.DataFrame) -> go.Figure:
    labels = [
        label + (" ★ recommended" if recommended else "")
        for label, recommended in zip(frame["strategy_label"], frame["recommended"], strict=True)
    ]
    outline = [3 if recommended else 0 for recommended in frame["recommended"]]
    # One rounding for chart and table: the table's floatformat:3 rounds halves up.
    h_text = [floatformat(h, 3) for h in frame["heterogeneity_factor"]]
    custom = [[text] for text in h_text]
    figure = go.Figure(
        [
            go.Bar(
                name="Bucket throughput W·h",
                x=labels,
                y=frame["throughput_pflops"].tolist(),
                marker={"color": "#c9d3df", "line": {"width": outline, "color": "#1a7f37"}},
                text=[f"h = {text}" for text in h_text],
                textposition="outside",
                customdata=custom,
                hovertemplate="%{x}<br>throughput %{y:,.1f} PFLOP/s, "
                "h = %{customdata[0]}<extra></extra>",
            ),
            go.Bar(
                name="Delivered (after scaling and effective time)",
                x=labels,
                y=frame["delivered_pflops"].tolist(),
                marker={
                    "color": charts.SERIES_COLOURS[0],
                    "line": {"width": outline, "color": "#1a7f37"},
                },
                customdata=custom,
                hovertemplate="%{x}<br>delivered %{y:,.1f} PFLOP/s, "
                "h = %{customdata[0]}<extra></extra>",
            ),
        ]
    )
    figure = charts.styled(figure, "Four ways to run one mixed pool", "Strategy", "PFLOP/s")
    figure.update_layout(barmode="group", margin={"t": 70})
    return figure


charts.register(
    WATERFALL,
    "Five-factor waterfall: nameplate to effective compute",
    waterfall_data,
    waterfall_figure,
    "Each loss is the factor's share of the lost compute split in proportion to −ln(factor) "
    "(order-independent, as stored by the analysis); the bars are drawn in the order "
    "utilization → effective time → scaling → MFU → energy for reading only. "
    "Each factor's label says whether it was measured, modeled or a default.",
)
charts.register(
    FACTORS,
    "The five factors",
    factors_data,
    factors_figure,
    "Peak-FLOP-weighted mean of each factor over the scope's pools; the label gives its "
    "provenance (measured, modeled or default).",
)
charts.register(
    COMPUTE_BY_SCOPE,
    "Nameplate vs effective compute by site and cluster",
    compute_by_scope_data,
    compute_by_scope_figure,
    "Peak PFLOP-days of the cards in the period and the part that became useful training work.",
)
charts.register(
    STRATEGIES,
    "Heterogeneous pool: the four strategies",
    strategies_data,
    strategies_figure,
    "Bucket throughput W·h is the pool's summed card speed W times the strategy's "
    "heterogeneity factor h; delivered also counts the strategy's scaling and effective time.",
)


# A stored result never changes, so its figures are built once per run and kept (plotly's
# styling costs ~70 ms a figure); a recompute changes succeeded_at and so the key.
CHART_CACHE_S = 24 * 3600


def chart_context(
    key: str, request: HttpRequest, frame: pd.DataFrame, analysis: Analysis, **params
) -> dict:
    chart_req = charts.chart_request(request, analysis=analysis.pk, **params)
    version = f"{analysis.pk}:{analysis.run_id}:{analysis.succeeded_at}:{chart_req.GET.urlencode()}"
    cache_key = f"fleetwise:chart:{key}:" + hashlib.sha256(version.encode()).hexdigest()
    context = cache.get(cache_key)
    if context is None:
        context = charts.render_chart(key, chart_req, frame)
        cache.set(cache_key, context, CHART_CACHE_S)
    return context


def _money_lost_positive(steps: list[dict]) -> list[dict]:
    """The table's "Money lost" reads as a loss (positive, as the tiles and the per-currency
    lines print it), not as the waterfall's step down (negative)."""
    for step in steps:
        if step["measure"] == "relative" and step["lost_money"] is not None:
            step["lost_money"] = -step["lost_money"]
    return steps


def _with_money_lines(steps: list[dict], rows: list[dict]) -> list[dict]:
    """Factor steps without one money figure (a scope in several currencies, or unpriced)
    get the money per currency, or the reason there is none, beside the dash."""
    for step in steps:
        if step["measure"] != "relative" or step["lost_money"] is not None:
            continue
        step["money_lines"] = factor_money_lines(rows, step["factor"])
        step["money_reason"] = "" if step["money_lines"] else NO_MONEY_REASON
    return steps


def result_charts(request: HttpRequest, analysis: Analysis, key: str, row: dict) -> dict:
    """The charts of one analysis result at one scope (frames from the stored results)."""
    results = analysis.results
    scope_param = None if key == sel.SUMMARY else key
    waterfall = _waterfall(analysis, key, row)
    context = {
        "waterfall_rows": _with_money_lines(
            _money_lost_positive(
                waterfall.astype(object).where(waterfall.notna(), None).to_dict("records")
            ),
            money_rows(results, key),
        ),
        "waterfall_chart": chart_context(
            WATERFALL, request, waterfall, analysis=analysis, scope=scope_param
        ),
        "factors_chart": chart_context(
            FACTORS, request, _factors(analysis, key, row), analysis=analysis, scope=scope_param
        ),
    }
    by_scope = sel.compute_by_scope_frame(results)
    if len(by_scope) > 1:
        context["compute_chart"] = chart_context(
            COMPUTE_BY_SCOPE, request, by_scope, analysis=analysis
        )
    return context


# --- views -------------------------------------------------------------------------------------


@role_required()
def analyses_index(request: HttpRequest):
    can_start = has_role(request.user, PLANNER)
    form = None
    if request.method == "POST":
        form = AnalysisStartForm(request.POST)
        analysis = start_from_form(form, request.user)
        if analysis is not None:
            messages.success(request, f"Analysis of {analysis.scope_label} queued.")
            return redirect("frontend:analysis-detail", analysis.pk)
    elif can_start:
        form = AnalysisStartForm()
    stale_only = request.GET.get("stale") == "1"
    page = Paginator(sel.list_analyses(stale_only), 50).get_page(request.GET.get("page"))
    context = {
        "page_obj": page,
        "paginator": page.paginator,
        "is_paginated": page.has_other_pages(),
        "analyses": page.object_list,
        "stale_only": stale_only,
        "form": form,
        "can_edit": can_start,
    }
    return render(request, "frontend/dashboards/analyses_list.html", context)


@role_required()
@require_safe
def analysis_detail(request: HttpRequest, pk: int):
    analysis = get_object_or_404(sel.analyses_light(), pk=pk)
    results = analysis.results
    context: dict[str, Any] = {
        "analysis": analysis,
        "in_flight": analysis.status in sel.IN_FLIGHT,
        "poll_url": reverse("analysis-detail", args=[analysis.pk]),
        "can_edit": has_role(request.user, PLANNER),
        "has_results": sel.has_results(results),
    }
    if context["has_results"]:
        key = request.GET.get("scope") or sel.SUMMARY
        try:
            row = sel.scope_row(results, key)
        except sel.UnknownScopeError as exc:
            raise Http404(str(exc)) from exc
        options = sel.scope_options(results, f"Whole analysis: {analysis.scope_label}")
        pools = results.get("pools", [])
        sort = request.GET.get("sort", "")
        context |= {
            "scope_key": key,
            "scope_options": options,
            "scope_label": next(o.label for o in options if o.key == key),
            "row": row,
            "summary": results["summary"],
            "money": sel.money_lost(row),
            "currency": sel.scope_currency(results, key),
            "pools": sel.pools_worst_first(pools, sort),
            "pool_sort": sort if sort in sel.FACTOR_LABELS else "",
            "pool_sort_label": sel.FACTOR_LABELS.get(sort, ""),
            "pool_factor_columns": pool_factor_columns(pools),
            "serving_pools": sel.serving_pool_names(pools),
            "pool_sort_scope": "" if key == sel.SUMMARY else f"scope={key}&",
            **money_context(request, results, analysis.period_end.date(), key),
            "hetero_pools": [
                {**p, "strategy_label": sel.STRATEGY_LABELS.get(p.get("strategy"), "")}
                for p in pools
                if sel.is_heterogeneous(p)
            ],
            "site_tiles": sel.scope_tiles(results, "site"),
            "cluster_tiles": sel.scope_tiles(results, "cluster"),
            **result_charts(request, analysis, key, row),
        }
    elif results:
        context["note"] = results.get("note")
    return render(request, "frontend/dashboards/analyses_detail.html", context)


def _safe_next(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return fallback


@role_required()
@require_POST
def analysis_recompute(request: HttpRequest, pk: int):
    analysis = get_object_or_404(Analysis.objects.only("pk", "scope_label"), pk=pk)
    services.recompute(analysis)
    messages.success(request, f"Recompute of {analysis.scope_label} queued.")
    return redirect(_safe_next(request, reverse("frontend:analysis-detail", args=[pk])))


@role_required()
@require_safe
def heterogeneous_pool(request: HttpRequest, pk: int, pool_id: int):
    # The input snapshot is loaded here only: it holds the card speeds of the run.
    analysis = get_object_or_404(Analysis, pk=pk)
    try:
        row = sel.scope_row(analysis.results, f"pool-{pool_id}")
    except sel.UnknownScopeError as exc:
        pool = Pool.objects.select_related("cluster").filter(pk=pool_id).first()
        if pool is None:
            raise Http404(str(exc)) from exc
        return pool_not_in_analysis(request, pool, analysis)
    strategies = sel.strategy_frame(row)
    speeds = sel.card_speeds(analysis.input_snapshot, pool_id)
    context = {
        "analysis": analysis,
        "pool": row,
        "heterogeneous": sel.is_heterogeneous(row),
        "strategies": strategies.to_dict("records"),
        "speeds": speeds.to_dict("records"),
        "slowest": speeds.loc[speeds["slowest"], "accelerator"].tolist()
        if not speeds.empty
        else [],
        "recommended_label": sel.STRATEGY_LABELS.get(row.get("recommended_strategy"), ""),
        "best_single_job": sel.best_single_job(strategies),
        "used_label": sel.STRATEGY_LABELS.get(row.get("strategy"), ""),
        "strategies_chart": chart_context(
            STRATEGIES, request, strategies, analysis=analysis, pool=pool_id
        ),
    }
    return render(request, "frontend/dashboards/hetero_pool.html", context)


@role_required()
@require_safe
def pool_latest_analysis(request: HttpRequest, pool_id: int):
    """The pool's view in the newest successful analysis that covers it (for inventory links)."""
    pool = get_object_or_404(Pool.objects.select_related("cluster"), pk=pool_id)
    analysis = sel.latest_analysis_covering_pool(pool)
    if analysis is None:
        messages.info(request, f"No finished analysis covers {pool.name} yet; start one here.")
        return redirect("frontend:analyses")
    if not any(row.get("pool_id") == pool.pk for row in (analysis.results or {}).get("pools", [])):
        return pool_not_in_analysis(request, pool, analysis)
    return redirect("frontend:analysis-pool", analysis.pk, pool_id)


urlpatterns = [
    path("analyses/", analyses_index, name="analyses"),
    path("analyses/<int:pk>/", analysis_detail, name="analysis-detail"),
    path("analyses/<int:pk>/recompute/", analysis_recompute, name="analysis-recompute"),
    path("analyses/<int:pk>/pools/<int:pool_id>/", heterogeneous_pool, name="analysis-pool"),
    path("analyses/pools/<int:pool_id>/", pool_latest_analysis, name="pool-analysis"),
]
