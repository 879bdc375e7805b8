"""The "new plan" form: a training goal and the options to compare, as plan inputs.

The form checks shapes and ranges, then its workload goes through the API's serializer, so a
plan made here is stored as the API stores it (the catalog model and the mixture-of-experts
fields: frontend.forms_planner_moe); `planner.plans.create_plan` checks the rest against the
inventory and the engine, and its PlanInputError lands next to the field it names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django import forms

from core.bounds import WithinLimit
from core.text import validate_name
from engine.capacity.options import DEFAULT_UTILIZATION
from engine.capacity.workload import spec_is_moe
from engine.defaults import SOFTWARE_STACKS
from engine.limits import limit, range_error
from engine.reliability import PRESET_LABELS, RELIABILITY_PRESETS
from frontend.forms_planner_moe import MOE_FIELDS, MoeModelFields
from inventory.models import AcceleratorModel, Pool, Site
from planner.plans import DEFAULT_HISTORY_DAYS, model_spec_errors

BILLION = 1e9
MILLION = 1e6
MAX_SIZES = 200  # as the API (MAX_LIST_ITEMS)
# The model's shape (optional; its own names as in the API and stored plans' workload).
SHAPE_FIELDS = (
    "layers",
    "hidden_size",
    "ffn_hidden_size",
    "mlp_kind",
    "attention_heads",
    "kv_heads",
    "vocab_size",
    "tied_embeddings",
)
# The training stacks (engine.defaults.SOFTWARE_STACKS) as the form names them.
STACK_CHOICES = [
    ("megatron", "Megatron-LM / Megatron-Core / NeMo (fused kernels)"),
    ("megatron_2024", "Megatron / NeMo of 2024 on Hopper (before FlashAttention-3)"),
    ("plain_pytorch", "Plain PyTorch (eager, bf16 autocast)"),
]
DEGREE_FIELDS = ("tp_degree", "pp_degree", "vp_degree", "cp_degree", "dp_degree", "micro_batch")

# Plan input (section, key) → form field, so a service error shows next to its field.
ERROR_FIELDS = {
    ("workload", "model_params"): "params_billions",
    ("workload", "tokens"): "tokens_billions",
    ("workload", "total_flops"): "tokens_billions",
    ("workload", "flops_per_param_token"): "flops_per_param_token",
    ("workload", "precision"): "precision",
    ("workload", "seq_len"): "seq_len",
    ("workload", "global_batch_sequences"): "global_batch_sequences",
    ("workload", "global_batch_tokens"): "global_batch_million_tokens",
    ("workload", "max_batch_tokens"): "max_batch_million_tokens",
    ("workload", "zero_stage"): "zero_stage",
    ("workload", "software_stack"): "software_stack",
    ("workload", "parallelism"): "parallelism",
    ("workload", "micro_batch"): "micro_batch",
    **{("workload", f"{d}_degree"): f"{d}_degree" for d in ("tp", "pp", "vp", "cp", "dp")},
    **{("workload", name): name for name in SHAPE_FIELDS},
    **{("workload", name): name for name in (*MOE_FIELDS, "model")},
    ("options_spec", "accelerators"): "accelerators",
    ("options_spec", "cards"): "cards",
    ("options_spec", "deadline_days"): "deadline_days",
    ("options_spec", "sites"): "sites",
    ("options_spec", "pools"): "pools",
    ("options_spec", "history_days"): "history_days",
    ("overrides", "utilization"): "utilization_percent",
}


class WithinLimitInBillions:
    """A form validator for a value entered in billions (or millions) of the named limit's
    unit."""

    def __init__(self, name: str, scale: float = BILLION, word: str = "billion") -> None:
        self.name, self.scale, self.word = name, scale, word

    def __call__(self, value: float) -> None:
        if range_error(self.name, value * self.scale):
            bound = limit(self.name)
            raise forms.ValidationError(
                f"Must be a number from {bound.low / self.scale:g} to {bound.high / self.scale:g} "
                f"{self.word} {bound.unit}.",
                code="out_of_range",
            )


def _number_list(text: str, *, whole: bool, field: str, limit_name: str) -> list[float]:
    """ "512, 1024 2048" → [512, 1024, 2048]; raises naming the bad item and the range."""
    items = [item for item in re.split(r"[,;\s]+", text.strip()) if item]
    values: list[float] = []
    for item in items:
        try:
            value = float(item.replace("_", ""))
        except ValueError:
            raise forms.ValidationError(f"“{item}” is not a number.") from None
        if value <= 0 or (whole and value != int(value)):
            kind = "whole numbers ≥ 1" if whole else "positive numbers"
            raise forms.ValidationError(f"Give {kind} for {field}: “{item}” is not.")
        if message := range_error(limit_name, value):
            raise forms.ValidationError(f"“{item}”: {message}")
        values.append(int(value) if whole else value)
    if len(values) > MAX_SIZES:
        raise forms.ValidationError(f"At most {MAX_SIZES} values.")
    return list(dict.fromkeys(values))


class PoolChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, pool: Pool) -> str:
        return f"{pool.name} ({pool.cluster.name}, {pool.cluster.site.name})"


class PlanForm(MoeModelFields, forms.Form):
    name = forms.CharField(max_length=200, initial="New plan", validators=[validate_name])
    # The training goal
    params_billions = forms.FloatField(
        label="Parameters (billions)",
        required=False,
        validators=[WithinLimitInBillions("model_params")],
        help_text="N, e.g. 175 for GPT-3; optional with a catalog model or the model shape "
        "below (a mixture of experts: its total).",
    )
    tokens_billions = forms.FloatField(
        label="Training tokens (billions)",
        validators=[WithinLimitInBillions("tokens")],
        help_text="D, e.g. 300.",
    )
    flops_per_param_token = forms.TypedChoiceField(
        label="FLOPs per parameter and token (k)",
        choices=[(6, "6: forward + backward"), (8, "8: with full activation recomputation")],
        coerce=int,
        initial=6,
    )
    precision = forms.ChoiceField(
        choices=[("bf16", "BF16"), ("fp8", "FP8"), ("fp4", "FP4 (NVFP4 / MXFP4)")], initial="bf16"
    )
    seq_len = forms.IntegerField(
        label="Sequence length (tokens)", validators=[WithinLimit("seq_len")], initial=2048
    )
    global_batch_sequences = forms.IntegerField(
        label="Global batch (sequences)",
        validators=[WithinLimit("global_batch_sequences")],
        initial=1536,
    )
    global_batch_million_tokens = forms.FloatField(
        label="Global batch (million tokens)",
        required=False,
        validators=[WithinLimitInBillions("global_batch_tokens", MILLION, "million")],
        help_text="Optional: the batch in tokens instead of sequences (Llama 3: 16).",
    )
    max_batch_million_tokens = forms.FloatField(
        label="Let the batch grow up to (million tokens)",
        required=False,
        validators=[WithinLimitInBillions("global_batch_tokens", MILLION, "million")],
        help_text="Optional: the batch grows with data parallelism up to this size.",
    )
    zero_stage = forms.TypedChoiceField(
        label="ZeRO stage", choices=[(s, str(s)) for s in range(4)], coerce=int, initial=1
    )
    software_stack = forms.ChoiceField(
        label="Training stack",
        choices=STACK_CHOICES,
        initial=SOFTWARE_STACKS[0],
        required=False,
        help_text="What your teams run: the same cards reach a different MFU under each.",
    )
    # Advanced: the model's shape (else inferred GPT-3-like from the parameters)
    layers = forms.IntegerField(label="Layers", validators=[WithinLimit("layers")], required=False)
    hidden_size = forms.IntegerField(
        label="Hidden size", validators=[WithinLimit("hidden_size")], required=False
    )
    ffn_hidden_size = forms.IntegerField(
        label="MLP width (FFN hidden size)",
        validators=[WithinLimit("ffn_hidden_size")],
        required=False,
        help_text="Default 4 × hidden size; required for a gated MLP (Llama 3.1 70B: 28672).",
    )
    mlp_kind = forms.ChoiceField(
        label="MLP",
        choices=[
            ("", "Default: plain (gated for a mixture of experts)"),
            ("plain", "Plain: two matrices (GPT-3)"),
            ("gated", "Gated: three (SwiGLU)"),
        ],
        required=False,
    )
    attention_heads = forms.IntegerField(
        label="Attention heads", validators=[WithinLimit("attention_heads")], required=False
    )
    kv_heads = forms.IntegerField(
        label="KV heads",
        validators=[WithinLimit("attention_heads")],
        required=False,
        help_text="Grouped-query attention; default: as many as the attention heads.",
    )
    vocab_size = forms.IntegerField(
        label="Vocabulary", validators=[WithinLimit("vocab_size")], required=False
    )
    tied_embeddings = forms.BooleanField(label="Tied input and output embeddings", required=False)
    parallelism = forms.ChoiceField(
        label="TP × PP × DP split",
        choices=[("choose", "Choose for me"), ("fixed", "Fixed degrees")],
        initial="choose",
        widget=forms.RadioSelect,
    )
    tp_degree = forms.IntegerField(
        label="Tensor parallel (TP)", validators=[WithinLimit("tp_degree")], required=False
    )
    pp_degree = forms.IntegerField(
        label="Pipeline parallel (PP)", validators=[WithinLimit("pp_degree")], required=False
    )
    vp_degree = forms.IntegerField(
        label="Virtual stages per pipeline rank (VP)",
        validators=[WithinLimit("vp_degree")],
        required=False,
    )
    cp_degree = forms.IntegerField(
        label="Context parallel (CP)", validators=[WithinLimit("cp_degree")], required=False
    )
    dp_degree = forms.IntegerField(
        label="Data parallel (DP)", validators=[WithinLimit("dp_degree")], required=False
    )
    micro_batch = forms.IntegerField(
        label="Micro-batch (sequences)",
        validators=[WithinLimit("micro_batch")],
        required=False,
        help_text="Default 1.",
    )
    # The options
    accelerators = forms.ModelMultipleChoiceField(
        label="Card models (new cards)",
        queryset=AcceleratorModel.objects.order_by("vendor", "name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    size_mode = forms.ChoiceField(
        label="Size the new cards by",
        choices=[("cards", "Card count"), ("deadline", "Deadline")],
        initial="cards",
        widget=forms.RadioSelect,
    )
    cards = forms.CharField(
        label="Card counts",
        required=False,
        initial="512, 1024, 2048",
        help_text="Separated by commas, e.g. 512, 1024, 2048.",
    )
    deadline_days = forms.CharField(
        label="Deadlines (days)",
        required=False,
        help_text="The fewest cards that finish in time, e.g. 30, 60.",
    )
    utilization_percent = forms.FloatField(
        label="Utilization (% of calendar time)",
        required=False,
        min_value=1,
        max_value=100,
        help_text="The share of calendar time the job runs on its cards: 100 for a dedicated "
        "reservation. Days = running days ÷ utilization. Empty: each pool's measured (else "
        f"planned) utilization, {DEFAULT_UTILIZATION:.0%} for new cards (an industry figure).",
    )
    sites = forms.ModelMultipleChoiceField(
        label="Sites for new cards",
        queryset=Site.objects.order_by("name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Their PUE, tariff and carbon price the energy; none: default PUE, unpriced.",
    )
    pools = PoolChoiceField(
        label="Existing pools",
        queryset=Pool.objects.select_related("cluster__site").order_by("cluster__name", "name"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Evaluated at their own size with measured factors when they have usage history.",
    )
    history_days = forms.IntegerField(
        label="Usage history (days)",
        validators=[WithinLimit("history_days")],
        initial=DEFAULT_HISTORY_DAYS,
        help_text="Existing pools use the utilization, effective time and MFU measured over "
        "this many days; 0: modeled only.",
    )
    site_kind = forms.ChoiceField(
        label="Failures and checkpoints",
        choices=[
            (
                "production",
                f"{PRESET_LABELS['production']}: asynchronous checkpoints, "
                "automated restarts (Llama 3, ByteDance figures)",
            ),
            (
                "research",
                f"{PRESET_LABELS['research']}: Meta's research-cluster failure rate and restarts",
            ),
        ],
        initial=RELIABILITY_PRESETS[0],
        required=False,
        help_text="The effective time (ETTR) of options without measured usage.",
    )
    cost_basis = forms.ChoiceField(
        label="Price new cards by",
        choices=[("rental", "Catalog rental price"), ("purchase", "Catalog list price")],
        initial="rental",
    )
    liquid_cooling_cost = forms.FloatField(
        label="Liquid-cooling retrofit, one-off cost",
        validators=[WithinLimit("money")],
        required=False,
        help_text="Optional: shows its payback per option.",
    )
    colocation_cost = forms.FloatField(
        label="Training/inference co-location, one-off cost",
        validators=[WithinLimit("money")],
        required=False,
        help_text="Optional: utilization to 90 %.",
    )

    WORKLOAD_FIELDS = (
        "params_billions",
        "tokens_billions",
        "flops_per_param_token",
        "precision",
        "seq_len",
        "global_batch_sequences",
        "global_batch_million_tokens",
        "max_batch_million_tokens",
        "zero_stage",
        "software_stack",
    )
    PARALLELISM_FIELDS = ("parallelism", *DEGREE_FIELDS)
    # The error summary's order: the page's (the MoE fields are declared in a base class).
    field_order = ("name", "model", *WORKLOAD_FIELDS, *SHAPE_FIELDS, *MOE_FIELDS)
    LEVER_FIELDS = ("liquid_cooling_cost", "colocation_cost")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.workload: dict[str, Any] = {}  # as the API stores it: set by a clean() that passes
        for name in ("params_billions", "tokens_billions"):
            self.fields[name].widget.attrs.update({"step": "any"})

    def section(self, names: tuple[str, ...]) -> list[forms.BoundField]:
        return [self[name] for name in names]

    def workload_fields(self):
        return self.section(self.WORKLOAD_FIELDS)

    def parallelism_fields(self):
        return self.section(self.PARALLELISM_FIELDS[1:])

    def shape_fields(self):
        return self.section(SHAPE_FIELDS)

    def option_fields(self):
        return self.section(
            ("cards", "deadline_days", "utilization_percent", "history_days", "site_kind")
            + ("cost_basis",)
        )

    def lever_fields(self):
        return self.section(self.LEVER_FIELDS)

    def clean_cards(self) -> list[int]:
        return _number_list(
            self.cleaned_data.get("cards") or "",
            whole=True,
            field="card counts",
            limit_name="cards",
        )

    def clean_deadline_days(self) -> list[float]:
        return _number_list(
            self.cleaned_data.get("deadline_days") or "",
            whole=False,
            field="deadlines",
            limit_name="deadline_days",
        )

    def clean(self):
        data = super().clean()
        degrees = (*DEGREE_FIELDS, "ep_degree")  # EP is fixed in the mixture-of-experts section
        if data.get("parallelism") == "fixed" and not any(data.get(k) for k in degrees):
            self.add_error("tp_degree", "Give at least one degree, or let the planner choose.")
        if all(f in data for f in ("params_billions", "model", *SHAPE_FIELDS, *MOE_FIELDS)):
            for field, message in model_spec_errors(self._model(data)).items():
                if field == "model_params" and data.get("params_billions") is None:
                    message = (
                        "This field is required, unless a catalog model or the model shape "
                        "below is given."
                    )
                self.add_error(ERROR_FIELDS.get(("workload", field)), message)
        batch, cap = data.get("global_batch_million_tokens"), data.get("max_batch_million_tokens")
        if batch and cap and cap < batch:
            self.add_error("max_batch_million_tokens", "Must be at least the global batch.")
        accelerators = data.get("accelerators")
        if accelerators is not None and accelerators.exists():
            wanted = "deadline_days" if data.get("size_mode") == "deadline" else "cards"
            if wanted in data and not data[wanted]:
                self.add_error(wanted, "Give at least one value for the new card models.")
        if (
            "accelerators" in data
            and "pools" in data
            and not data["accelerators"]
            and not data["pools"]
        ):
            self.add_error("accelerators", "Choose card models or existing pools (or both).")
        if not self.errors:  # the rest is sound: the workload as the API would store it
            self.workload, errors = self.api_workload(self._workload(data))
            self.add_service_errors({"workload": errors})
        return data

    @classmethod
    def _model(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        """N (when given), the catalog model and the shape and MoE fields given, as the
        workload names them."""
        model: dict[str, Any] = {}
        if data.get("params_billions") is not None:
            model["model_params"] = data["params_billions"] * BILLION
        moe = cls.moe_spec(data)
        for name in SHAPE_FIELDS:
            value = data.get(name)
            # A mixture's MLP defaults to gated: there "plain" is a choice, not the default.
            plain_default = value == "plain" and not spec_is_moe(moe)
            if value in (None, "", False) or (name == "mlp_kind" and plain_default):
                continue  # not given, or the default
            model[name] = value
        return {**model, **moe}

    def _workload(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The workload the page's fields give (before the API's defaults)."""
        workload: dict[str, Any] = {
            **self._model(data),
            "tokens": data["tokens_billions"] * BILLION,
            "flops_per_param_token": data["flops_per_param_token"],
            "precision": data["precision"],
            "seq_len": data["seq_len"],
            "global_batch_sequences": data["global_batch_sequences"],
            "zero_stage": data["zero_stage"],
            "software_stack": data.get("software_stack") or SOFTWARE_STACKS[0],
        }
        for field, key in (
            ("global_batch_million_tokens", "global_batch_tokens"),
            ("max_batch_million_tokens", "max_batch_tokens"),
        ):
            if data.get(field):
                workload[key] = data[field] * MILLION
        if data["parallelism"] == "fixed":
            for key in DEGREE_FIELDS:
                if data.get(key):
                    workload[key] = data[key]
        return workload

    def plan_inputs(self) -> dict[str, Any]:
        """create_plan keyword arguments: the workload as the API stores it (checked by
        clean), the options, overrides and levers from the cleaned data."""
        data = self.cleaned_data
        spec: dict[str, Any] = {
            "history_days": data["history_days"],
            "cost_basis": data["cost_basis"],
            "site_kind": data.get("site_kind") or RELIABILITY_PRESETS[0],
        }
        accelerators = [a.pk for a in data["accelerators"]]
        if accelerators:
            spec["accelerators"] = accelerators
            if data["size_mode"] == "deadline":
                spec["deadline_days"] = data["deadline_days"]
            else:
                spec["cards"] = data["cards"]
            sites = [s.pk for s in data["sites"]]
            if sites:
                spec["sites"] = sites
        pools = [p.pk for p in data["pools"]]
        if pools:
            spec["pools"] = pools
        levers = []
        if data.get("liquid_cooling_cost") is not None:
            levers.append({"name": "liquid_cooling", "one_off_cost": data["liquid_cooling_cost"]})
        if data.get("colocation_cost") is not None:
            levers.append({"name": "colocation", "one_off_cost": data["colocation_cost"]})
        overrides: dict[str, Any] = {}
        if data.get("utilization_percent") is not None:
            overrides["utilization"] = data["utilization_percent"] / 100  # for every option
        return {
            "name": data["name"],
            "workload": self.workload,
            "options_spec": spec,
            "overrides": overrides,
            "levers": levers,
        }

    def add_service_errors(self, errors: Mapping[str, Any]) -> None:
        """PlanInputError.errors (nested per input section) next to the fields they name."""
        for section, value in errors.items():
            if not isinstance(value, Mapping):
                self.add_error(None, f"{section}: {value}")
                continue
            for key, message in value.items():
                field = ERROR_FIELDS.get((section, key))
                if field is None:
                    self.add_error(None, f"{key}: {message}")
                else:
                    self.add_error(field, str(message))
