"""The planner section: capacity plans listed and created, their results compared, what-ifs.

Results come from `Plan.results` as the worker stored them (planner.plans.compute); pages
never run the engine. The what-if panel calls the stateless training estimate from the
browser. Reading needs the viewer role, creating and cloning the planner role, recomputing
the plan's owner or an administrator.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_POST, require_safe
from plotly.subplots import make_subplots

from access.pages import role_required
from access.roles import PLANNER, has_role
from core.jobs.status import JobStatus
from engine.capacity.workload import MOE_SHAPE_FIELDS, MOE_TRAINING_FIELDS, SHAPE_SPEC_FIELDS
from engine.factors import FACTOR_LABELS as ENGINE_FACTOR_LABELS
from engine.factors import FACTOR_NAMES
from engine.reliability import PRESET_LABELS, RELIABILITY_PRESETS
from frontend import charts
from frontend.dashboards.plan_facts import batch_summary, utilization_summary
from frontend.dashboards.plan_model import (
    mixture_of,
    model_summary,
    shape_summary,
    split_summary,
    with_expert_parallel,
)
from frontend.dashboards.plan_scatter import scatter_figure
from frontend.forms_planner import PlanForm
from planner import plans
from planner.models import InferencePlan, Plan

SCATTER = "planner-days-vs-cost"
TORNADO = "planner-sensitivity"
IN_FLIGHT = (JobStatus.QUEUED, JobStatus.RUNNING)
PLANS_PER_PAGE = 25
OPTIONS_PER_PAGE = 100
FACTORS = FACTOR_NAMES
FACTOR_LABELS = {**ENGINE_FACTOR_LABELS, "combined": "All five combined"}

# The options table: (key, heading, sortable). Sorting is on the stored column. Why an option
# does not fit (or is not priced) is written under its name, where the eye lands first.
OPTION_TABLE_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("rank_by_cost", "Rank by cost", True),
    ("rank_by_days", "Rank by time", True),
    ("on_pareto_front", "Pareto front", True),
    ("label", "Option", True),
    ("cards", "Cards", True),
    ("split", "TP × PP × DP", False),
    ("days", "Days", True),
    ("running_days", "Running days", True),
    ("utilization", FACTOR_LABELS["utilization"], True),
    ("effective_time", f"{FACTOR_LABELS['effective_time']} (ETTR)", True),
    ("scaling", FACTOR_LABELS["scaling"], True),
    ("card_hours", "Card-hours", True),
    ("total_cost", "Total cost", True),
    ("cost_per_effective_pflop_day", "Cost per effective PFLOP-day", True),
    ("effective_utilization", "Effective utilization", True),
    ("facility_energy_mwh", "Facility energy (MWh)", True),
    ("co2_tonnes", "CO₂ (t)", True),
    ("provenance", "Factors measured", False),
)
SORTABLE = {key for key, _, sortable in OPTION_TABLE_COLUMNS if sortable}
DEFAULT_SORT = "rank_by_cost"


# --- reading stored results (no engine, no queries beyond the plan) -----------------------------


def has_results(plan: Plan) -> bool:
    return bool(plan.results and plan.results.get("options") is not None)


def options_frame(plan: Plan) -> pd.DataFrame:
    """The stored option rows, one per option (index: option id)."""
    frame = pd.DataFrame.from_records(plans.option_table(plan))
    if frame.empty:
        return frame
    return frame.set_index("option_id", drop=False).rename_axis(None)


def currency_of(frame: pd.DataFrame) -> str:
    """The plan's currency, or "" when the options mix currencies (costs are not converted)."""
    currencies = set(frame["currency"].dropna()) if "currency" in frame else set()
    return currencies.pop() if len(currencies) == 1 else ""


def option_currency(frame: pd.DataFrame, option_id: int | None) -> str:
    """The chosen option's currency: its sensitivity and levers are money in that currency."""
    if option_id is None or frame.empty or "currency" not in frame:
        return currency_of(frame) if not frame.empty else ""
    return str(frame.loc[option_id, "currency"] or "")


def scatter_frame(plan: Plan) -> pd.DataFrame:
    """Feasible options: days and total cost, with the Pareto flag (the scatter's numbers)."""
    frame = options_frame(plan)
    if frame.empty:
        return pd.DataFrame()
    feasible = frame[frame["feasible"].astype(bool)]
    columns = [
        "option_id",
        "label",
        "accelerator",
        "site",
        "pool",
        "cards",
        "days",
        "total_cost",
        "currency",
        "on_pareto_front",
    ]
    return feasible[columns].sort_values(["days", "total_cost"]).reset_index(drop=True)


def chosen_option(plan: Plan, frame: pd.DataFrame, raw: str | None) -> int | None:
    """?option=<id> when it exists, else the cheapest feasible option (of the first currency),
    else the first."""
    if frame.empty:
        return None
    if raw:
        if not raw.isdecimal() or int(raw) not in frame.index:
            raise Http404("no such option in this plan")
        return int(raw)
    summary = (plan.results or {}).get("summary") or {}
    groups = summary.get("by_currency") or [{}]  # mixed currencies: the first one's cheapest
    cheapest = summary.get("cheapest") or groups[0].get("cheapest") or {}
    if cheapest.get("option_id") in frame.index:
        return int(cheapest["option_id"])
    return int(frame.index[0])


def tornado_frame(plan: Plan, option_id: int | None, currency: str) -> pd.DataFrame:
    """Days and money saved by lifting each factor (then all five) to best practice."""
    rows = [r for r in (plan.results or {}).get("sensitivity", []) if r["option_id"] == option_id]
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame.from_records(rows)
    frame["factor_label"] = frame["factor"].map(FACTOR_LABELS).fillna(frame["factor"])
    frame["currency"] = currency
    return frame[
        [
            "factor",
            "factor_label",
            "current",
            "target",
            "days",
            "days_saved",
            "total_cost",
            "cost_saved",
            "co2_saved_tonnes",
            "currency",
        ]
    ]


def levers_frame(plan: Plan, option_id: int | None) -> pd.DataFrame:
    rows = [r for r in (plan.results or {}).get("levers", []) if r["option_id"] == option_id]
    return pd.DataFrame.from_records(rows)


def plan_for_chart(request: HttpRequest) -> Plan:
    raw = request.GET.get("plan", "")
    if not raw.isdecimal():
        raise Http404("plan must be an id")
    return get_object_or_404(Plan.objects.only("pk", "results"), pk=int(raw))


def scatter_data(request: HttpRequest) -> pd.DataFrame:
    return scatter_frame(plan_for_chart(request))


def tornado_data(request: HttpRequest) -> pd.DataFrame:
    plan = plan_for_chart(request)
    frame = options_frame(plan)
    option_id = chosen_option(plan, frame, request.GET.get("option"))
    return tornado_frame(plan, option_id, option_currency(frame, option_id))


# --- figures ------------------------------------------------------------------------------------


def tornado_figure(frame: pd.DataFrame) -> go.Figure:
    currency = frame["currency"].iloc[0]
    figure = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=("Days saved", "Money saved"),
    )
    labels = frame["factor_label"]
    hover = [
        f"{label}: {current:.3g} → {target:.3g}<br>saves {days:,.1f} days, "
        f"{money:,.0f} {currency}, {co2:,.0f} t CO₂"
        for label, current, target, days, money, co2 in zip(
            labels,
            frame["current"],
            frame["target"],
            frame["days_saved"],
            frame["cost_saved"],
            frame["co2_saved_tonnes"],
            strict=True,
        )
    ]
    colours = [charts.FACTOR_COLOURS.get(f, "#555") for f in frame["factor"]]
    for column, col in (("days_saved", 1), ("cost_saved", 2)):
        figure.add_trace(
            go.Bar(
                x=frame[column],
                y=labels,
                orientation="h",
                marker={"color": colours},
                hovertext=hover,
                hovertemplate="%{hovertext}<extra></extra>",
                showlegend=False,
            ),
            row=1,
            col=col,
        )
    figure = charts.styled(figure, "Which factor's improvement saves most")
    figure.update_yaxes(autorange="reversed", title_text="Factor lifted to best practice", col=1)
    figure.update_xaxes(title_text="Days saved (days)", row=1, col=1)
    figure.update_xaxes(title_text=f"Money saved ({currency or 'mixed currencies'})", row=1, col=2)
    figure.update_layout(margin={"l": 150, "t": 80})
    return figure


charts.register(
    SCATTER,
    "Days vs cost of every feasible option",
    scatter_data,
    scatter_figure,
    "Each point is a feasible option (infeasible ones are in the table with their reason); "
    "the dotted line joins the Pareto front: no other option is both faster and cheaper.",
)
charts.register(
    TORNADO,
    "Sensitivity: which factor's improvement saves most",
    tornado_data,
    tornado_figure,
    "One factor at a time lifted to best practice (PUE 1.1, MFU 70 %, scaling 90 %, effective "
    "time 99 %, utilization 90 %), same cards and split; then all five together. PUE saves "
    "money and CO₂, never days.",
)


# --- the options table --------------------------------------------------------------------------


def sorted_options(frame: pd.DataFrame, sort: str, descending: bool) -> list[dict[str, Any]]:
    """Table rows sorted on a stored column, empty values last; ties by option id."""
    if frame.empty:
        return []
    ordered = frame.sort_values(
        [sort, "option_id"], ascending=[not descending, True], na_position="last", kind="stable"
    )
    rows = ordered.astype(object).where(ordered.notna(), None).to_dict("records")
    for row in rows:
        split = (row.get("tp"), row.get("pp"), row.get("dp"))
        row["split"] = " × ".join(str(v) for v in split) if all(split) else ""
        row["measured"] = [
            FACTOR_LABELS[f] for f in FACTORS if row.get(f"{f}_provenance") == "measured"
        ]
        row["overridden"] = [
            FACTOR_LABELS[f] for f in FACTORS if row.get(f"{f}_provenance") == "override"
        ]
        # The assumptions that move days: days = running days ÷ utilization.
        row["assumptions"] = [
            (f, row.get(f), row.get(f"{f}_provenance") or "")
            for f in ("utilization", "effective_time", "scaling")
        ]
    return rows


def table_headers(sort: str, descending: bool, option: int | None) -> list[dict[str, Any]]:
    headers = []
    for key, label, sortable in OPTION_TABLE_COLUMNS:
        header: dict[str, Any] = {"key": key, "label": label, "sortable": sortable}
        if sortable:
            flip = key == sort and not descending
            header["query"] = {"sort": key, "dir": "desc" if flip else "asc", "option": option}
            header["aria_sort"] = (
                ("descending" if descending else "ascending") if key == sort else "none"
            )
        headers.append(header)
    return headers


# --- the what-if panel --------------------------------------------------------------------------


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


# The what-if sliders: (factor, minimum, maximum, start value when the option has none, unit).
WHATIF_SLIDERS = (
    ("pue", 1.0, 2.0, 1.5, ""),
    ("mfu", 0.05, 0.9, 0.4, "share"),
    ("scaling", 0.3, 1.0, 0.9, "share"),
    ("effective_time", 0.3, 1.0, 0.95, "share"),
    ("utilization", 0.05, 1.0, 0.5, "share"),
)
WHATIF_WORKLOAD_KEYS = (
    "model_params",
    "tokens",
    "total_flops",
    "flops_per_param_token",
    "precision",
    "seq_len",
    "global_batch_sequences",
    "global_batch_tokens",
    "max_batch_tokens",
    "zero_stage",
    "software_stack",
    "micro_batch",
    *(f"{degree}_degree" for degree in ("tp", "pp", "vp", "cp", "dp", "ep")),
    *SHAPE_SPEC_FIELDS,
    "model",  # a catalog model, dense or a mixture of experts
    *MOE_SHAPE_FIELDS,
    *MOE_TRAINING_FIELDS,
)


def _whatif_base(workload: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The estimate's fixed inputs: the workload, the card, and the option's own prices as
    per-card-hour and per-kWh figures derived from its stored cost."""
    base = {key: workload[key] for key in WHATIF_WORKLOAD_KEYS if workload.get(key) is not None}
    base["accelerator"] = row.get("accelerator_id") or row.get("accelerator")
    card_hours = _finite(row.get("card_hours"))
    compute_cost = _finite(row.get("compute_cost"))
    if card_hours and compute_cost is not None:
        base["price_per_card_hour"] = compute_cost / card_hours
    facility_kwh = (_finite(row.get("facility_energy_mwh")) or 0.0) * 1000.0
    if facility_kwh > 0:
        base["tariff_per_kwh"] = (_finite(row.get("energy_cost")) or 0.0) / facility_kwh
        base["grid_carbon_g_per_kwh"] = (_finite(row.get("co2_tonnes")) or 0.0) * 1e6 / facility_kwh
    if row.get("cooling_type"):
        base["cooling_type"] = row["cooling_type"]
    return base


def _whatif_sliders(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "label": "PUE" if name == "pue" else FACTOR_LABELS[name],
            "min": low,
            "max": high,
            "step": 0.01,
            "value": round(_finite(row.get(name)) or fallback, 2),
            "unit": unit,
        }
        for name, low, high, fallback, unit in WHATIF_SLIDERS
    ]


def whatif_context(plan: Plan, row: dict[str, Any]) -> dict[str, Any]:
    """Sliders' start values and the estimate's fixed inputs for one option: the what-if at
    the stored factors reproduces the stored days and cost."""
    workload = plan.workload or {}
    cards = _finite(row.get("cards")) or _finite(row.get("min_cards_memory")) or 8
    return {
        "endpoint": reverse("estimate-training"),
        "base": _whatif_base(workload, row),
        "cards": int(cards),
        "dp_degree": workload.get("dp_degree"),
        "sliders": _whatif_sliders(row),
        "stored": {
            "days": _finite(row.get("days")),
            "card_hours": _finite(row.get("card_hours")),
            "facility_energy_mwh": _finite(row.get("facility_energy_mwh")),
            "total_cost": _finite(row.get("total_cost")),
        },
        "currency": row.get("currency") or "",
    }


# --- views --------------------------------------------------------------------------------------


def _create(request: HttpRequest, form: PlanForm) -> Plan | None:
    if not form.is_valid():
        return None
    try:
        return plans.create_plan(owner=request.user, **form.plan_inputs())
    except plans.PlanInputError as exc:
        form.add_service_errors(exc.errors)
        return None


@role_required()
def planner_index(request: HttpRequest):
    can_create = has_role(request.user, PLANNER)
    form = None
    if request.method == "POST":
        form = PlanForm(request.POST)
        plan = _create(request, form)
        if plan is not None:
            messages.success(request, f"Plan “{plan.name}” queued.")
            return redirect("frontend:plan-detail", plan.pk)
    elif can_create:
        form = PlanForm()
    stale_only = request.GET.get("stale") == "1"
    listed = plans.plans_for_list()
    if stale_only:
        listed = listed.filter(stale=True)
    page = Paginator(listed, PLANS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page_obj": page,
        "paginator": page.paginator,
        "is_paginated": page.has_other_pages(),
        "plans": page.object_list,
        "stale_only": stale_only,
        "form": form,
        "can_create": can_create,
        "inference_plans": InferencePlan.objects.select_related("owner")[:PLANS_PER_PAGE],
    }
    return render(request, "frontend/dashboards/planner.html", context)


@role_required()
@require_safe
def plan_detail(request: HttpRequest, pk: int):
    plan = get_object_or_404(Plan.objects.select_related("owner").defer("input_snapshot"), pk=pk)
    context: dict[str, Any] = {
        "plan": plan,
        "in_flight": plan.status in IN_FLIGHT,
        "poll_url": reverse("plan-detail", args=[plan.pk]),
        "can_edit": plans.can_edit(request.user, plan),
        "can_clone": has_role(request.user, PLANNER),
        "has_results": has_results(plan),
        "workload": plan.workload or {},
        "model_summary": model_summary(plan.workload or {}),
        "shape_summary": shape_summary(plan.workload or {}, plan.results),
        "split_summary": split_summary(plan.workload or {}),
        "mixture": mixture_of(plan.workload or {}),
        "batch_summary": batch_summary(plan.workload or {}),
        "utilization_summary": utilization_summary(plan.overrides),
        "preset_label": PRESET_LABELS.get(
            (plan.options_spec or {}).get("site_kind") or RELIABILITY_PRESETS[0], ""
        ),
        "options_export": {
            fmt: reverse("plan-options", args=[plan.pk]) + f"?format={fmt}"
            for fmt in ("csv", "xlsx")
        },
    }
    if context["has_results"]:
        frame = options_frame(plan)
        option_id = chosen_option(plan, frame, request.GET.get("option"))
        currency = option_currency(frame, option_id)
        sort = request.GET.get("sort") or DEFAULT_SORT
        if sort not in SORTABLE:
            sort = DEFAULT_SORT
        descending = request.GET.get("dir") == "desc"
        rows = sorted_options(frame, sort, descending)
        headers = table_headers(sort, descending, option_id)
        if context["mixture"] is not None:
            with_expert_parallel(rows, headers)
        page = Paginator(rows, OPTIONS_PER_PAGE).get_page(request.GET.get("page"))
        chosen = next((r for r in rows if r["option_id"] == option_id), None)
        tornado = tornado_frame(plan, option_id, currency)
        levers = levers_frame(plan, option_id)
        results = plan.results
        context |= {
            "results": results,
            "summary": results.get("summary") or {},
            "currency": currency,
            "page_obj": page,
            "paginator": page.paginator,
            "is_paginated": page.has_other_pages(),
            "option_rows": page.object_list,
            "headers": headers,
            "sort": sort,
            "chosen": chosen,
            "tornado_rows": tornado.to_dict("records"),
            # No figure is "nan" on the page: a missing one is None (shown as "—" or "never").
            "lever_rows": levers.astype(object).where(levers.notna(), None).to_dict("records"),
            "whatif": whatif_context(plan, chosen) if chosen else None,
            "measured_history": results.get("measured_history") or [],
            "warnings": results.get("warnings") or [],
            "exchange_rates": results.get("exchange_rates") or [],
            "stale_reasons": plans.stale_rate_reasons(plan) if plan.stale else [],
            "scatter_chart": charts.render_chart(
                SCATTER, charts.chart_request(request, plan=plan.pk), scatter_frame(plan)
            ),
            "tornado_chart": charts.render_chart(
                TORNADO, charts.chart_request(request, plan=plan.pk, option=option_id), tornado
            ),
        }
    return render(request, "frontend/dashboards/plan_detail.html", context)


@role_required()
@require_POST
def plan_recompute(request: HttpRequest, pk: int):
    plan = get_object_or_404(Plan.objects.only("pk", "name", "owner_id"), pk=pk)
    if not plans.can_edit(request.user, plan):
        raise PermissionDenied("only the plan's owner or an administrator may recompute it")
    plans.recompute_plan(plan)
    messages.success(request, f"Recompute of “{plan.name}” queued.")
    return redirect("frontend:plan-detail", pk)


@role_required()
@require_POST
def plan_clone(request: HttpRequest, pk: int):
    plan = get_object_or_404(Plan, pk=pk)  # the clone shows this result until it recomputes
    clone = plans.clone_plan(plan, owner=request.user)
    messages.success(request, f"Cloned into “{clone.name}”; it is being recomputed.")
    return redirect("frontend:plan-detail", clone.pk)


urlpatterns = [
    path("planner/", planner_index, name="planner"),
    path("planner/<int:pk>/", plan_detail, name="plan-detail"),
    path("planner/<int:pk>/recompute/", plan_recompute, name="plan-recompute"),
    path("planner/<int:pk>/clone/", plan_clone, name="plan-clone"),
]
