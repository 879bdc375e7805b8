"""The new-plan form's model by catalog name and its mixture-of-experts section.

The fields carry the API's names, ranges and help (planner.api.shape_serializers, read from
the serializer itself, so the page cannot drift from it), and the form's workload goes through
the API's WorkloadSerializer: a plan made here is stored as the API stores it, and the page
refuses what the API refuses, in the same words (docs/capacity-planning.md, "Mixture of
experts").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from rest_framework import serializers

from core.bounds import WithinLimit
from engine.capacity.workload import MOE_SHAPE_FIELDS, MOE_TRAINING_FIELDS
from engine.model_catalog import CatalogModel, load_catalog
from planner.api.plan_serializers import WorkloadSerializer
from planner.api.shape_serializers import TrainingModelSerializer

BILLION = 1e9
API_FIELDS = TrainingModelSerializer().fields  # the API's model fields: types, ranges, help
# The mixture's shape, how it trains and its fixed expert parallelism (the API's names).
MOE_FIELDS: tuple[str, ...] = (*MOE_SHAPE_FIELDS, *MOE_TRAINING_FIELDS, "ep_degree")
ATTENTION_CHOICES = [
    ("", "Default: multi-head or grouped-query"),
    ("gqa", "Multi-head or grouped-query (GQA)"),
    ("mla", "Multi-head latent attention (MLA, DeepSeek)"),
]
NO_CATALOG_MODEL = "Not from the catalog: enter the size or the shape by hand"
CATALOG_HELP = (
    "A published model's shape and parameters (dense, or a mixture of experts with its total "
    "and active parameters); leave the parameters and the shape below empty with it."
)


def _billions(count: float) -> str:
    return f"{count / BILLION:,.4g} B"


def catalog_label(model: CatalogModel) -> str:
    """ "DeepSeek-V3 (671 B total · 37 B active)" or "Llama-3-70B (70.55 B)": published."""
    if model.published_active_params is None:
        return f"{model.name} ({_billions(model.params)})"
    active = _billions(model.published_active_params)
    return f"{model.name} ({_billions(model.params)} total · {active} active)"


def catalog_choices() -> list[tuple[str, Any]]:
    """Blank (enter by hand), then the catalog's dense models and its mixtures of experts."""
    models = load_catalog().models
    dense = [(m.name, catalog_label(m)) for m in models if not m.is_moe]
    moe = [(m.name, catalog_label(m)) for m in models if m.is_moe]
    return [("", NO_CATALOG_MODEL), ("Dense", dense), ("Mixture of experts", moe)]


def api_field(name: str, label: str) -> forms.Field:
    """The form twin of the API serializer's field: its number type, range and help."""
    api = API_FIELDS[name]
    bounds = [v for v in api.validators if isinstance(v, WithinLimit)]
    kind = forms.FloatField if isinstance(api, serializers.FloatField) else forms.IntegerField
    return kind(label=label, required=False, validators=bounds, help_text=api.help_text)


def api_errors(errors: Mapping[str, Any]) -> dict[str, str]:
    """A DRF serializer's errors as one message per field (its messages joined)."""
    joined: dict[str, str] = {}
    for field, messages in errors.items():
        if isinstance(messages, Mapping):
            joined.update(api_errors(messages))
            continue
        items = messages if isinstance(messages, list) else [messages]
        joined[field] = " ".join(str(message) for message in items)
    return joined


class MoeModelFields(forms.Form):
    """The catalog model and the mixture-of-experts fields, mixed into the PlanForm."""

    model = forms.ChoiceField(
        label="Model from the catalog", choices=(), required=False, help_text=CATALOG_HELP
    )
    attention = forms.ChoiceField(
        label="Attention",
        choices=ATTENTION_CHOICES,
        required=False,
        help_text=API_FIELDS["attention"].help_text,
    )
    experts = api_field("experts", "Routed experts")
    experts_per_token = api_field("experts_per_token", "Experts per token (top-k)")
    shared_experts = api_field("shared_experts", "Shared experts")
    expert_ffn_hidden_size = api_field("expert_ffn_hidden_size", "Expert FFN width")
    dense_layers = api_field("dense_layers", "Leading dense layers")
    head_dim = api_field("head_dim", "Head width")
    q_lora_rank = api_field("q_lora_rank", "MLA query rank")
    kv_lora_rank = api_field("kv_lora_rank", "MLA KV latent rank")
    qk_rope_head_dim = api_field("qk_rope_head_dim", "MLA RoPE key width")
    v_head_dim = api_field("v_head_dim", "MLA value head width")
    moe_capacity_factor = api_field("moe_capacity_factor", "Capacity factor")
    moe_a2a_overlap = api_field("moe_a2a_overlap", "All-to-all overlap (share)")
    moe_mtp_depth = api_field("moe_mtp_depth", "Multi-token prediction modules")
    ep_degree = api_field("ep_degree", "Expert parallel (EP)")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = catalog_choices()  # read when the form is built
        for name in ("moe_capacity_factor", "moe_a2a_overlap"):
            self.fields[name].widget.attrs.update({"step": "any"})

    def moe_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in MOE_FIELDS]

    @staticmethod
    def moe_spec(data: Mapping[str, Any]) -> dict[str, Any]:
        """The catalog model and the MoE fields given, as the workload names them (0 is a
        value: an all-to-all overlap of 0 is not the default)."""
        spec: dict[str, Any] = {}
        if data.get("model"):
            spec["model"] = data["model"]
        for name in MOE_FIELDS:
            if data.get(name) not in (None, ""):
                spec[name] = data[name]
        return spec

    @staticmethod
    def api_workload(workload: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """The workload as the API stores it (its defaults filled in), or the API's errors by
        field: the page and POST /api/v1/plans/ store and refuse alike."""
        serializer = WorkloadSerializer(data=dict(workload))
        if serializer.is_valid():
            return dict(serializer.validated_data), {}
        return {}, api_errors(serializer.errors)
