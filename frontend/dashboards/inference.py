"""The planner's Inference tab: cards, latency and cost to serve a model (docs/inference.md).

A GET form (the query string is the input, so a result is a link: every field of the API is
honoured there), the model from the model catalog or a custom shape, the options table of
every card model's best tensor-parallel degree, and the latency–throughput curve per card
model. The engine runs in the request: an estimate over the catalog takes milliseconds.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from django.contrib import messages
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import HttpRequest, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_POST, require_safe

from access.pages import role_required
from access.roles import PLANNER, has_role
from engine.inference.curve import latency_throughput_curve
from engine.inference.engines import DEFAULT_ENGINE, ENGINES
from engine.limits import EngineInputError
from engine.model_catalog import SHAPE_FIELDS, CatalogModel, find_model, load_catalog
from engine.text import name_error
from frontend import charts
from inventory.models import AcceleratorModel
from planner import inference_plans
from planner.inference_estimate import estimate_inference
from planner.inference_inputs import InferenceEstimateInputSerializer
from planner.inference_moe_shape import LATENT_FIELDS
from planner.models import InferencePlan
from planner.plans import can_edit

CURVE = "planner-inference-roofline"
# The example the page opens with (Llama-3-70B, chat-like lengths, 10 requests/s).
EXAMPLE = {
    "model": "Llama-3-70B",
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": "1000",
    "output_tokens": "500",
    "requests_per_s": "10",
    "tpot_ms": "50",
}
FORM_FIELDS = (
    ("input_tokens", "Input tokens per request"),
    ("output_tokens", "Output tokens per request"),
    ("requests_per_s", "Target requests/s"),
    ("ttft_ms", "TTFT bound (ms)"),
    ("tpot_ms", "TPOT bound (ms)"),
    ("ttft_p95_ms", "TTFT p95 bound (ms)"),
    ("tpot_p95_ms", "TPOT p95 bound (ms)"),
    ("context_tokens", "Context reserved per sequence (tokens)"),
)
# The custom model: N and the shape (planner.inference_model), used when no model is picked.
SHAPE_FORM_FIELDS = (
    ("model_params", "Parameters (alone: the shape is inferred)"),
    ("layers", "Layers"),
    ("hidden_size", "Hidden size"),
    ("attention_heads", "Attention heads"),
    ("kv_heads", "KV heads"),
    ("head_dim", "Head dimension"),
    ("ffn_hidden_size", "FFN hidden size"),
    ("vocab_size", "Vocabulary size"),
)
# A mixture of experts by its shape (planner.inference_moe_shape); "attention" is a choice.
MOE_FORM_FIELDS = (
    ("experts", "Routed experts (> 1: a mixture of experts)"),
    ("experts_per_token", "Experts per token (top-k)"),
    ("shared_experts", "Shared experts"),
    ("expert_ffn_hidden_size", "Expert FFN hidden size"),
    ("dense_layers", "Leading dense layers"),
    ("q_lora_rank", "MLA query rank"),
    ("kv_lora_rank", "MLA KV latent rank"),
    ("qk_rope_head_dim", "MLA RoPE key width"),
    ("v_head_dim", "MLA value head width"),
)
SHAPE_LABELS = dict(SHAPE_FORM_FIELDS)
MOE_LABELS = {**dict(MOE_FORM_FIELDS), "attention": "Attention"}
TRUE_VALUES = ("true", "True", "1", "on")  # a ticked box, however the URL spells it
SHAPE_SOURCE_WORDS = {
    "catalog": "from the model catalog",
    "entered": "entered",
    "inferred": "inferred from the parameter count",
}
TABLE_COLUMNS = (
    ("accelerator", "Card model"),
    ("cards", "Cards"),
    ("tp", "TP"),
    ("replicas", "Replicas"),
    ("batch", "Batch per replica"),
    ("ttft_ms", "TTFT (ms)"),
    ("tpot_ms", "TPOT (ms)"),
    ("ttft_p95_ms", "TTFT p95 (ms)"),
    ("tpot_p95_ms", "TPOT p95 (ms)"),
    ("utilization", "Load / capacity"),
    ("tokens_per_s", "Output tokens/s"),
    ("mbu", "MBU"),
    ("energy_kwh_per_million_tokens", "kWh per million tokens"),
    ("cost_per_million_tokens", "Cost per million tokens (currency)"),
    ("price_basis", "Price"),
    ("pareto", "Pareto front"),
    ("reason", "Cannot serve: why"),
)


def input_names() -> set[str]:
    """Every field of the estimate but the card models (a list, read apart)."""
    return set(InferenceEstimateInputSerializer().fields) - {"accelerator"}


def query_input(request: HttpRequest, query: QueryDict | None = None) -> dict:
    """The form's values: the query string (every input of the API), or the example when it
    holds none (a saved plan's POST never falls back on the example)."""
    names = input_names()
    given = {k: v for k, v in (query or request.GET).items() if k in names and v != ""}
    data = given or ({} if query is not None else dict(EXAMPLE))
    accelerators = [a for a in (query or request.GET).getlist("accelerator") if a]
    if accelerators:
        data["accelerator"] = accelerators
    return data


def catalog_choices() -> list[dict]:
    """The model picker's entries: each catalog model's name, label (a mixture of experts
    with its total and active parameters) and the fields that enter it by shape (the script
    shows them in the custom fields when a model is picked)."""
    return [
        {"name": model.name, "label": model_label(model), "shape": entered_fields(model)}
        for model in load_catalog().models
    ]


def model_label(model: CatalogModel) -> str:
    """The picker's words: the name, and a mixture's total and active parameters."""
    if not model.is_moe:
        return model.name
    total, active = billions(model.total_params()), billions(model.active_params())
    return f"{model.name} (MoE: {total} total · {active} active)"


def entered_fields(model: CatalogModel) -> dict:
    """The custom fields that enter a catalog model by its shape: a mixture's MoE fields and
    none of the dense ones it would refuse (no kv_heads with latent attention, no dense FFN
    width without dense layers); the MoE fields blank for a dense model."""
    fields: dict = {
        **model.shape(),
        "mlp_kind": model.mlp_kind,
        "tied_embeddings": model.tied_embeddings,
        "attention": "",
    }
    if not model.is_moe:
        return fields
    fields |= model.moe_fields()
    if model.attention == "mla":
        del fields["kv_heads"]
    else:
        fields = {k: v for k, v in fields.items() if k not in LATENT_FIELDS}
    if not model.v_head_dim:
        del fields["v_head_dim"]
    if not model.dense_layers:
        del fields["ffn_hidden_size"], fields["dense_layers"]
    return fields


def billions(params: float) -> str:
    """A parameter count in billions, three significant figures ("235 B", "22.2 B")."""
    return f"{params / 1e9:.3g} B"


def moe_summary(result: dict) -> str | None:
    """A mixture's line: total and active parameters, experts, top-k, shared and dense
    layers, the attention kind; None for a dense model (every parameter active)."""
    moe = result.get("moe")
    if not moe:
        return None
    total, active = billions(result["model_params"]), billions(result["active_params"])
    words = [f"{total} total · {active} active", f"{moe['experts']} experts"]
    words.append(f"top-{moe['experts_per_token']}")
    if moe.get("shared_experts"):
        words.append(f"{moe['shared_experts']} shared")
    if moe.get("dense_layers"):
        words.append(f"{moe['dense_layers']} dense layers")
    if moe.get("attention") == "mla":
        words.append("latent attention (MLA)")
    return ", ".join(words)


def engine_choices() -> list[tuple[str, str]]:
    """The engine picker's entries: (name, label), the default's label saying so."""
    return [
        (name, f"{preset.label} (default)" if name == DEFAULT_ENGINE else preset.label)
        for name, preset in ENGINES.items()
    ]


def picked_model(data: dict) -> str:
    """The catalog's spelling of the picked model ('' for none or an unknown name)."""
    try:
        return find_model(data["model"]).name if data.get("model") else ""
    except EngineInputError:
        return ""


def model_summary(result: dict) -> dict:
    """The model a result served, for the page: its name, where the shape came from and the
    shape's fields (a plan stored before the shape's names changed shows what it holds)."""
    shape = result.get("shape") or {}
    source = result.get("shape_source")
    return {
        "name": result.get("model"),
        "source": SHAPE_SOURCE_WORDS.get(source or "", "as stored"),
        "shape_source": source,
        "provenance": (result.get("provenance") or {}).get("shape", ""),
        "params": result.get("model_params"),
        "active_params": result.get("active_params"),
        "moe": moe_summary(result),
        "moe_fields": [
            (key, MOE_LABELS.get(key, key), value)
            for key, value in (result.get("moe") or {}).items()
            if value or key in ("shared_experts", "dense_layers")  # no unused latent widths
        ],
        "fields": [
            (key, SHAPE_LABELS.get(key, key), shape.get(key))
            for key in (*SHAPE_FIELDS, *(k for k in shape if k not in SHAPE_FIELDS))
            if key in shape
        ],
    }


def estimate(request: HttpRequest) -> tuple[dict | None, dict[str, str]]:
    """The estimate for the query, or the errors naming each field."""
    payload = InferenceEstimateInputSerializer(data=query_input(request))
    if not payload.is_valid():
        return None, {key: " ".join(map(str, msgs)) for key, msgs in payload.errors.items()}
    try:
        return estimate_inference(payload.validated_data), {}
    except EngineInputError as exc:
        return None, dict(exc.errors)


def curve_frame(request: HttpRequest) -> pd.DataFrame:
    result, errors = estimate(request)
    if errors:
        raise BadRequest("; ".join(f"{key}: {msg}" for key, msg in errors.items()))
    return curve_from(result)


def curve_from(result: dict) -> pd.DataFrame:
    options = options_with_steps(pd.DataFrame(result["options"]))
    return latency_throughput_curve(options, int(result["output_tokens"]))


def options_with_steps(options: pd.DataFrame) -> pd.DataFrame:
    needed = {"step_fixed_s", "step_memory_s", "step_compute_s", "prefill_ms", "max_batch"}
    return options if needed <= set(options.columns) else options.iloc[0:0]


def curve_figure(frame: pd.DataFrame) -> go.Figure:
    figure = go.Figure()
    for (name, tp), part in frame.groupby(["accelerator", "tp"], sort=False):
        figure.add_trace(
            go.Scatter(
                x=part["tokens_per_s_per_card"],
                y=part["tpot_ms"],
                mode="lines+markers",
                name=f"{name} (TP{tp})",
                customdata=part[["batch"]],
                hovertemplate="batch %{customdata[0]}: %{x:,.0f} tokens/s per card, "
                "%{y:.1f} ms per token<extra>%{fullData.name}</extra>",
            )
        )
    return charts.styled(
        figure,
        "Latency against throughput per card model (the batch grows along each line)",
        "Output tokens/s per card",
        "Time per output token (ms)",
    )


charts.register(
    CURVE,
    "Latency against throughput per card model",
    curve_frame,
    curve_figure,
    "Each point is one batch size on the card model's best tensor-parallel degree.",
)


def whatif(data: dict, result: dict) -> dict | None:
    """The what-if panel's config: the form's input on the recommended card model, and
    sliders for the traffic (a tenth to ten times) and the context reserved per sequence."""
    if not result["feasible"] or data.get("requests_per_s") is None:
        return None
    rate = float(data["requests_per_s"])
    sequence = int(data["input_tokens"]) + int(data["output_tokens"])
    context = int(data.get("context_tokens") or sequence)
    return {
        "endpoint": reverse("estimate-inference"),
        "base": {**data, "accelerator": [result["accelerator"]]},
        "sliders": [
            _slider("requests_per_s", "Requests/s", rate / 10, rate * 10, rate / 10, rate),
            _slider("context_tokens", "Context per sequence (tokens)", sequence,
                    min(sequence * 32, 10_000_000), sequence, context),
        ],
    }  # fmt: skip


def _slider(name: str, label: str, low: float, high: float, step: float, value: float) -> dict:
    return {"name": name, "label": label, "min": low, "max": high, "step": step, "value": value}


@role_required()
@require_safe
def inference_planner(request: HttpRequest):
    result, errors = estimate(request)
    data = query_input(request)
    context = {
        "data": data,
        "form_fields": [(name, label, data.get(name, "")) for name, label in FORM_FIELDS],
        "shape_fields": [(name, label, data.get(name, "")) for name, label in SHAPE_FORM_FIELDS],
        "moe_fields": [(name, label, data.get(name, "")) for name, label in MOE_FORM_FIELDS],
        "models": catalog_choices(),
        "picked_model": picked_model(data),
        "engines": engine_choices(),
        "picked_engine": data.get("engine") or DEFAULT_ENGINE,
        "true_values": TRUE_VALUES,
        "catalog": AcceleratorModel.objects.order_by("vendor", "name"),
        "errors": errors,
        "result": result,
        "columns": TABLE_COLUMNS,
    }
    if errors:
        return render(request, "frontend/dashboards/planner_inference.html", context, status=400)
    context["assumptions"] = [
        (key, value, result["provenance"].get(key, "")) for key, value in result["settings"].items()
    ]
    context["model"] = model_summary(result)
    context["chart"] = charts.render_chart(CURVE, request, curve_from(result))
    context["whatif"] = whatif(data, result)
    context["save"] = save_form(request, data)
    return render(request, "frontend/dashboards/planner_inference.html", context)


# --- stored inference plans (planner.inference_plans) -----------------------------------------


def save_form(request: HttpRequest, data: dict) -> dict | None:
    """The "save as plan" form for planners: the inputs as hidden fields, and the plan it
    updates when the tab was opened from a plan its user may change."""
    if not has_role(request.user, PLANNER):
        return None
    hidden = [
        (key, item)
        for key, value in data.items()
        for item in (value if isinstance(value, list) else [value])
    ]
    raw = request.GET.get("plan", "")
    plan = InferencePlan.objects.filter(pk=int(raw)).first() if raw.isdecimal() else None
    return {"hidden": hidden, "plan": plan if plan and can_edit(request.user, plan) else None}


def _errors_in_words(errors: dict) -> str:
    return "; ".join(f"{key}: {message}" for key, message in errors.items())


def _editable(request: HttpRequest, pk: int) -> InferencePlan:
    plan = get_object_or_404(InferencePlan, pk=pk)
    if not can_edit(request.user, plan):
        raise PermissionDenied("Only the plan's owner or an administrator may change it.")
    return plan


@role_required()
@require_POST
def inference_plan_save(request: HttpRequest):
    """Save the tab's inputs as a new plan, or as the inputs of the plan it was opened from."""
    data = query_input(request, request.POST)
    name = request.POST.get("name", "").strip()[:200] or "Inference plan"
    raw = request.POST.get("plan", "")
    if problem := name_error(name):
        messages.error(request, f"Not saved: name: {problem}")
        return redirect(reverse("frontend:planner-inference") + "?" + request.POST.urlencode())
    try:
        if raw.isdecimal():
            plan = inference_plans.update_inference_plan(
                _editable(request, int(raw)), name=name, inputs=data
            )
        else:
            plan = inference_plans.create_inference_plan(owner=request.user, name=name, inputs=data)
    except inference_plans.InferencePlanInputError as exc:
        messages.error(request, "Not saved: " + _errors_in_words(exc.errors))
        return redirect(reverse("frontend:planner-inference") + "?" + request.POST.urlencode())
    messages.success(request, f"Inference plan “{plan.name}” saved.")
    return redirect("frontend:inference-plan-detail", plan.pk)


@role_required()
@require_safe
def inference_plan_detail(request: HttpRequest, pk: int):
    plan = get_object_or_404(InferencePlan.objects.select_related("owner"), pk=pk)
    api = reverse("inference-plan-options", args=[plan.pk])
    edit = QueryDict(mutable=True)
    for key, value in inference_plans.query_string_inputs(plan):
        edit.appendlist(key, value)
    edit["plan"] = str(plan.pk)
    context = {
        "plan": plan,
        "result": plan.results,
        "model": model_summary(plan.results),
        "columns": TABLE_COLUMNS,
        "inputs": [
            (key, ", ".join(map(str, value)) if isinstance(value, list) else value)
            for key, value in sorted(plan.inputs.items())
        ],
        "can_edit": can_edit(request.user, plan),
        "catalog_changes": inference_plans.catalog_changes_since(plan),
        "edit_url": reverse("frontend:planner-inference") + "?" + edit.urlencode(),
        "export": {"csv": f"{api}?format=csv", "xlsx": f"{api}?format=xlsx"},
        "chart": charts.render_chart(CURVE, request, curve_from(plan.results)),
    }
    return render(request, "frontend/dashboards/planner_inference_plan.html", context)


@role_required()
@require_POST
def inference_plan_recompute(request: HttpRequest, pk: int):
    plan = _editable(request, pk)
    try:
        inference_plans.recompute_inference_plan(plan)
        messages.success(request, "Recomputed with the current card catalog.")
    except inference_plans.InferencePlanInputError as exc:
        messages.error(request, "Not recomputed: " + _errors_in_words(exc.errors))
    return redirect("frontend:inference-plan-detail", plan.pk)


urlpatterns = [
    path("planner/inference/", inference_planner, name="planner-inference"),
    path("planner/inference/save/", inference_plan_save, name="inference-plan-save"),
    path("planner/inference/plans/<int:pk>/", inference_plan_detail, name="inference-plan-detail"),
    path(
        "planner/inference/plans/<int:pk>/recompute/",
        inference_plan_recompute,
        name="inference-plan-recompute",
    ),
]
