"""The inference estimate's inputs, checked: one serializer for the API
(POST /api/v1/estimates/inference/), the inference page and stored inference plans.

Every number is bounded by the one limits table (engine.limits); an out-of-range or
missing value is a 400 naming the field, and so is a field the estimate does not know. The
model is a catalog name or a shape, dense or a mixture of experts (planner.inference_model,
planner.inference_moe_shape); money is in `currency`.
docs/inference.md describes each field.
"""

from __future__ import annotations

from rest_framework import serializers

from core.bounds import bounded_float, bounded_int
from core.strict import UNKNOWN_FIELD, StrictFieldsMixin
from engine.inference.engines import DEFAULT_ENGINE, ENGINES
from engine.inference.memory import KV_PRECISIONS, SERVING_WEIGHT_PRECISIONS
from engine.limits import EngineInputError
from engine.memory import MLP_KINDS
from engine.model_catalog import find_model
from engine.moe import ATTENTION_KINDS
from inventory.api.serializers import AcceleratorField
from inventory.currency import validate_currency as iso_4217_code
from inventory.models import AcceleratorModel
from planner.inference_model import model_input_errors

MAX_ACCELERATORS = 50  # card models compared in one estimate
MAX_MODEL_NAME = 100  # longer than any catalog name or alias
RENAMED_FIELDS = {"hidden": "hidden_size"}  # old name -> the name the estimate takes now
ENGINE_CHOICES = ", ".join(ENGINES)
TARGET_FIELDS = ("requests_per_s", "tokens_per_s", "cards")
SETTING_FIELDS = (
    "bandwidth_efficiency",
    "compute_efficiency",
    "usable_memory_share",
    "power_share_of_tdp",
    "pue",
    "amortization_years",
)


class AcceleratorsField(serializers.ListField):
    """One card model (name or id) or a list of them to compare; absent: the whole catalog."""

    def __init__(self, **kwargs):
        child = AcceleratorField(queryset=AcceleratorModel.objects.all())
        super().__init__(child=child, max_length=MAX_ACCELERATORS, min_length=1, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, (str, int)):
            data = [data]
        return super().to_internal_value(data)


def _float(name: str, **kwargs) -> serializers.FloatField:
    return bounded_float(name, required=False, allow_null=True, **kwargs)


def _int(name: str, **kwargs) -> serializers.IntegerField:
    return bounded_int(name, required=False, allow_null=True, **kwargs)


class InferenceEstimateInputSerializer(StrictFieldsMixin, serializers.Serializer):
    model = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=MAX_MODEL_NAME,
        help_text="A name from the model catalog (e.g. Llama-3-70B): its published shape.",
    )
    model_params = _float("model_params", help_text="Parameters N (alone: shape inferred).")
    layers = _int("layers")
    hidden_size = _int("hidden_size", help_text="Model width (d_model).")
    attention_heads = _int("attention_heads", help_text="Query heads.")
    kv_heads = _int("attention_heads", help_text="KV heads (GQA); must divide the heads.")
    head_dim = _int("head_dim")
    ffn_hidden_size = _int("ffn_hidden_size", help_text="The MLP's width (counts N).")
    vocab_size = _int("vocab_size", help_text="Vocabulary (counts N).")
    mlp_kind = serializers.ChoiceField(
        choices=list(MLP_KINDS),
        required=False,
        allow_null=True,
        help_text='With a shape and no model_params: "gated" (SwiGLU; default) or "plain".',
    )
    tied_embeddings = serializers.BooleanField(
        required=False, allow_null=True, help_text="With a shape: output shares the embedding."
    )
    # A mixture of experts by its shape: the training API's fields (planner.inference_moe_shape).
    experts = _int("experts", help_text="Routed experts per MoE layer (> 1: a mixture).")
    experts_per_token = _int("experts", help_text="Routed experts each token goes to (top-k).")
    shared_experts = _int("shared_experts", help_text="Experts every token goes to (default 0).")
    expert_ffn_hidden_size = _int("ffn_hidden_size", help_text="One expert's FFN width.")
    dense_layers = _int(
        "dense_layers", help_text="Leading layers with a dense FFN of ffn_hidden_size (default 0)."
    )
    attention = serializers.ChoiceField(
        choices=list(ATTENTION_KINDS),
        required=False,
        allow_null=True,
        help_text='A mixture\'s attention: "gqa" (multi-head or grouped-query; default) or "mla" '
        "(latent attention: no kv_heads, the cache holds kv_lora_rank).",
    )
    q_lora_rank = _int("latent_rank", help_text="MLA: the query's low-rank width (0: none).")
    kv_lora_rank = _int("latent_rank", help_text="MLA: the compressed KV latent's width.")
    qk_rope_head_dim = _int("latent_rank", help_text="MLA: the decoupled RoPE key per head.")
    v_head_dim = _int("latent_rank", help_text="MLA: a value head's width (0: head_dim).")
    currency = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=3,
        validators=[iso_4217_code],
        help_text="ISO 4217 code of price_per_card_hour and tariff_per_kwh.",
    )
    weight_precision = serializers.ChoiceField(
        choices=list(SERVING_WEIGHT_PRECISIONS),
        default="bf16",
        help_text="nvfp4 and mxfp4 need FP4 tensor cores (the card's dense_fp4_tflops).",
    )
    kv_precision = serializers.ChoiceField(choices=list(KV_PRECISIONS), default="bf16")
    engine = serializers.ChoiceField(
        choices=list(ENGINES),
        required=False,
        allow_null=True,
        allow_blank=True,
        error_messages={
            "invalid_choice": f'"{{input}}" is not a serving engine: one of {ENGINE_CHOICES}.'
        },
        help_text=f"The serving engine whose efficiencies the estimate uses: one of "
        f"{ENGINE_CHOICES}; none: {DEFAULT_ENGINE} (docs/inference.md).",
    )
    accelerator = AcceleratorsField(required=False)
    input_tokens = bounded_int("seq_len", help_text="Prompt tokens per request.")
    output_tokens = bounded_int("seq_len", help_text="Generated tokens per request.")
    context_tokens = _int("seq_len", help_text="KV reserved per sequence.")
    requests_per_s = _float("requests_per_s")
    tokens_per_s = _float("serving_tokens_per_s", help_text="Output tokens/s.")
    cards = _int("cards", help_text="Instead of a target: cards to fill.")
    tp = _int("tp_degree", help_text="Fix the tensor-parallel degree.")
    batch = _int("micro_batch", help_text="Cap concurrent sequences/replica.")
    ttft_ms = _float("latency_ms", help_text="Bound on time to first token.")
    tpot_ms = _float("latency_ms", help_text="Bound on time per output token.")
    ttft_p95_ms = _float("latency_ms", help_text="Bound on the 95th-percentile TTFT.")
    tpot_p95_ms = _float("latency_ms", help_text="Bound on the 95th-percentile TPOT.")
    tariff_per_kwh = _float("tariff_per_kwh")
    price_per_card_hour = _float("price_per_card_hour")
    bandwidth_efficiency = _float("share")
    compute_efficiency = _float("share")
    usable_memory_share = _float("share")
    power_share_of_tdp = _float("share")
    pue = _float("pue")
    amortization_years = _float("amortization_years")

    def refused_fields(self, data):
        """As every strict body, and a field under its old name names the new one."""
        refused = super().refused_fields(data)
        for old, new in RENAMED_FIELDS.items():
            if old in refused:
                refused[old] = [f"{UNKNOWN_FIELD} Did you mean {new}? (renamed)"]
        return refused

    def validate_model(self, value: str | None) -> str | None:
        """The catalog's own spelling of the name (stored plans keep it); blank is none."""
        if not value:
            return None
        try:
            return find_model(value).name
        except EngineInputError as exc:
            raise serializers.ValidationError(exc.errors["model"]) from exc

    def validate_engine(self, value: str | None) -> str | None:
        """Blank is none (the default engine), as the page sends an unpicked choice."""
        return value or None

    def validate_currency(self, value: str | None) -> str | None:
        return value.upper() if value else None

    def validate(self, attrs):
        if errors := model_input_errors(attrs):
            raise serializers.ValidationError(errors)
        given = [key for key in TARGET_FIELDS if attrs.get(key) is not None]
        if len(given) != 1:
            raise serializers.ValidationError(
                {"requests_per_s": "Give exactly one of requests_per_s, tokens_per_s or cards."}
            )
        return attrs
