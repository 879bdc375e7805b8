"""What the training estimate and stored plans share: the model (its parameter count and,
optionally, its shape) and the parallel degrees a caller may fix.

The shape is `layers`, `hidden_size` and `attention_heads` together, refined by
`ffn_hidden_size`, `mlp_kind`, `kv_heads`, `vocab_size` and `tied_embeddings`
(docs/capacity-planning.md §1). Without it the planner infers a GPT-3-like shape from
`model_params`; with it `model_params` may be left out (the shape's own count is used) and,
when given, must agree with the shape's count within 10 %. Every degree may be fixed; those
the model or the batch cannot take are a 400 naming the field (engine.capacity.workload).

`model` names a catalog model instead (engine.model_catalog; dense or a mixture of experts),
and `experts` > 1 with `experts_per_token`, `expert_ffn_hidden_size` (and optionally
`shared_experts`, `dense_layers`, `attention` "mla" with its ranks) enters a mixture of experts
by its shape: N is then its total, the FLOPs count its active parameters
(docs/capacity-planning.md, "Mixture of experts"). `ffn_hidden_size` given for a mixture with
no dense layers is a 400 saying expert_ffn_hidden_size is meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from core.bounds import bounded_float, bounded_int
from core.strict import StrictFieldsMixin
from engine.memory import MLP_KINDS, STATE_PRECISIONS
from engine.moe import ATTENTION_KINDS
from planner.plans import workload_errors


def _optional_int(name: str, help_text: str) -> serializers.IntegerField:
    return bounded_int(name, required=False, allow_null=True, help_text=help_text)


class TrainingModelSerializer(StrictFieldsMixin, serializers.Serializer):
    """N, the model's shape and the fixed parallel degrees (None: chosen by the planner)."""

    model_params = bounded_float(
        "model_params",
        required=False,
        allow_null=True,
        help_text="Parameters N. Optional with the shape: then the shape's own count.",
    )
    layers = _optional_int("layers", "Transformer layers (with hidden_size, attention_heads).")
    hidden_size = _optional_int("hidden_size", "Model width d_model.")
    ffn_hidden_size = _optional_int(
        "ffn_hidden_size", "The MLP's width; default 4 × hidden_size (required when gated)."
    )
    mlp_kind = serializers.ChoiceField(
        choices=list(MLP_KINDS),
        required=False,
        help_text='"plain" (two matrices, GPT-3; default) or "gated" (three, SwiGLU as Llama).',
    )
    attention_heads = _optional_int("attention_heads", "Query heads; must divide hidden_size.")
    kv_heads = _optional_int(
        "attention_heads", "Key/value heads (grouped-query attention); default attention_heads."
    )
    vocab_size = _optional_int(
        "vocab_size", "Vocabulary; counts the embedding parameters (default: not counted)."
    )
    tied_embeddings = serializers.BooleanField(
        required=False,
        allow_null=True,
        help_text="The output projection shares the input embedding (needs vocab_size).",
    )
    model = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="A model catalog name (dense or a mixture of experts): its published shape.",
    )
    experts = _optional_int("experts", "Routed experts per MoE layer (> 1: a mixture).")
    experts_per_token = _optional_int("experts", "Routed experts each token goes to (top-k).")
    shared_experts = _optional_int("shared_experts", "Experts every token goes to (default 0).")
    expert_ffn_hidden_size = _optional_int("ffn_hidden_size", "One expert's FFN width.")
    dense_layers = _optional_int(
        "dense_layers", "Leading layers with a dense FFN of ffn_hidden_size (default 0)."
    )
    attention = serializers.ChoiceField(
        choices=list(ATTENTION_KINDS),
        required=False,
        help_text='"gqa" (multi-head or grouped-query; default) or "mla" (latent attention).',
    )
    head_dim = _optional_int("head_dim", "Width of a head (default hidden_size ÷ heads).")
    q_lora_rank = _optional_int("latent_rank", "MLA: the query's low-rank width (0: none).")
    kv_lora_rank = _optional_int("latent_rank", "MLA: the compressed KV latent's width.")
    qk_rope_head_dim = _optional_int("latent_rank", "MLA: the decoupled RoPE key per head.")
    v_head_dim = _optional_int("latent_rank", "MLA: a value head's width (0: head_dim).")
    moe_capacity_factor = bounded_float(
        "capacity_factor",
        required=False,
        allow_null=True,
        help_text="The busiest expert's load over the mean (default 1.25, Switch Transformer).",
    )
    moe_a2a_overlap = bounded_float(
        "share_or_zero",
        required=False,
        allow_null=True,
        help_text="Share of compute the experts' all-to-all hides behind (default 0.5).",
    )
    moe_mtp_depth = _optional_int(
        "mtp_depth", "Multi-token prediction modules trained along (DeepSeek-V3: 1)."
    )
    ep_degree = _optional_int(
        "ep_degree", "Fix expert parallelism (inside dp); must divide the experts."
    )
    tp_degree = _optional_int("tp_degree", "Fix tensor parallelism; must divide the heads.")
    pp_degree = _optional_int("pp_degree", "Fix pipeline parallelism; must divide the layers.")
    vp_degree = _optional_int(
        "vp_degree", "Fix the virtual stages per pipeline rank (interleaved 1F1B; needs pp > 1)."
    )
    cp_degree = _optional_int("cp_degree", "Fix context parallelism; must divide seq_len.")
    dp_degree = _optional_int("dp_degree", "Fix data parallelism.")

    def check_model(self, attrs: Mapping[str, Any], **overrides: Any) -> None:
        """The shape complete and possible, N agreeing with it, the fixed degrees possible for
        this model and batch (planner.plans.workload_errors); a 400 naming the field."""
        if errors := workload_errors(attrs, **overrides):
            raise serializers.ValidationError(errors)


def fp4_bf16_layer_share_field() -> serializers.FloatField:
    """The training APIs' share of linear layers an fp4 run keeps in bf16."""
    return bounded_float(
        "share_or_zero",
        required=False,
        allow_null=True,
        help_text="fp4 only: share of the linear layers kept in bf16; default: the NVFP4 "
        "recipe's 0.16 (arXiv 2509.25149).",
    )


def gradient_precision_field() -> serializers.ChoiceField:
    """The precision gradients are kept and reduced in (the training APIs)."""
    return serializers.ChoiceField(
        choices=list(STATE_PRECISIONS),
        default="bf16",
        help_text="bf16 (Megatron-Core's default, 2 bytes a parameter) or fp32 (4 bytes: "
        "grad_reduce_in_fp32).",
    )


def optimizer_state_precision_field() -> serializers.ChoiceField:
    """The precision of the optimizer's master weights and moments (the training APIs)."""
    return serializers.ChoiceField(
        choices=list(STATE_PRECISIONS),
        default="fp32",
        help_text="fp32 (master weights and Adam moments, 12 bytes a parameter, sharded by the "
        "distributed optimizer) or bf16 (4 bytes; NeMo recipes with optim.dtype bf16).",
    )
