"""What to train: the workload, its validation, and the planner's shared constants."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.defaults import SOFTWARE_STACKS, default_value
from engine.limits import (
    SHAPE_LIMITS,
    WORKLOAD_LIMITS,
    EngineInputError,
    range_error,
)
from engine.memory import (
    ACTIVATION_RECOMPUTE_MODES,
    DEFAULT_USABLE_MEMORY_SHARE,
    GRADIENT_BYTES,
    OPTIMIZER_STATE_BYTES,
    ActivationRecompute,
    ModelShape,
    state_bytes_of,
)
from engine.model_catalog import CatalogModel, find_model
from engine.moe import MoeShape, active_params, check_shape, total_params
from engine.moe_training import (
    DEFAULT_A2A_OVERLAP,
    DEFAULT_CAPACITY_FACTOR,
    MoeTraining,
    dense_view,
)
from engine.parallelism import BatchRule, FixedParallelism
from engine.training_precision import PRECISION_ERROR, TRAINING_PRECISIONS

SECONDS_PER_DAY = 86_400.0
DEFAULT_MAX_CARDS = 1_000_000
FACTORS: tuple[str, ...] = ("energy", "mfu", "scaling", "effective_time", "utilization")
Precision = Literal["bf16", "fp8", "fp4"]
K_ERROR = "must be 6, or 8 with full activation recomputation"


class PlannerInputError(EngineInputError):
    """Invalid planner input; `errors` maps each offending field to a message."""


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingWorkload:
    """What to train. Give `tokens` (with k) or `total_flops`."""

    params: float
    tokens: float | None = None
    total_flops: float | None = None
    flops_per_param_token: int = 6  # k: 6, or 8 with full activation recomputation
    precision: Precision = "bf16"
    seq_len: int = 2048
    global_batch_sequences: int = 1536
    # The batch in tokens instead (wins over sequences); max_batch_tokens lets it grow with
    # data parallelism up to that many tokens (large runs do: Llama 3 went 4M → 16M tokens).
    global_batch_tokens: float | None = None
    max_batch_tokens: float | None = None
    micro_batch: int | None = None  # None: the split search picks 1, 2 or 4 sequences
    zero_stage: int = 1
    # None: "full" when k = 8 (that is what k = 8 pays for), else "selective" (Megatron default).
    recompute: ActivationRecompute | None = None
    sequence_parallel: bool = True
    # The training stack's memory-bound traffic (engine.steptime): a fused Megatron-class stack
    # (Megatron-LM/Core, NeMo, Megatron-DeepSpeed) or an eager PyTorch loop under autocast.
    software_stack: str = "megatron"
    shape: ModelShape | None = None
    parallelism: FixedParallelism = field(default_factory=FixedParallelism)
    usable_memory_share: float = DEFAULT_USABLE_MEMORY_SHARE
    # A mixture of experts (engine.moe): `params` is then its total (every expert: memory),
    # the FLOPs count its active parameters, `shape` its dense view (activations).
    moe: MoeShape | None = None
    moe_capacity_factor: float = DEFAULT_CAPACITY_FACTOR
    moe_a2a_overlap: float = DEFAULT_A2A_OVERLAP
    moe_mtp_depth: int = 0  # multi-token prediction modules (DeepSeek-V3: 1)
    # fp4: share of the linear layers kept in bf16; None: the NVFP4 recipe's
    # (engine.training_precision).
    fp4_bf16_layer_share: float | None = None
    # The memory recipe (engine.memory): the gradient buffer's precision (bf16: Megatron-Core's
    # default; fp32) and the Adam state's (fp32 master weights and moments; bf16 moments only).
    gradient_precision: str = "bf16"
    optimizer_state_precision: str = "fp32"

    def __post_init__(self) -> None:
        errors: dict[str, str] = {}
        if not is_positive(self.params):
            errors["params"] = "must be a positive number of parameters"
        if self.total_flops is None and self.tokens is None:
            errors["tokens"] = "give tokens or total_flops"
        if self.tokens is not None and not is_positive(self.tokens):
            errors["tokens"] = "must be positive"
        if self.total_flops is not None and not is_positive(self.total_flops):
            errors["total_flops"] = "must be positive"
        if self.flops_per_param_token not in (6, 8):
            errors["flops_per_param_token"] = K_ERROR
        if self.precision not in TRAINING_PRECISIONS:
            errors["precision"] = PRECISION_ERROR
        if self.fp4_bf16_layer_share is not None and not 0 <= self.fp4_bf16_layer_share <= 1:
            errors["fp4_bf16_layer_share"] = "must be in [0, 1]"
        for name in ("seq_len", "global_batch_sequences", "micro_batch"):
            if getattr(self, name) is not None and int(getattr(self, name)) < 1:
                errors[name] = "must be >= 1"
        if self.micro_batch is not None and self.micro_batch > self.batch_sequences:
            errors["micro_batch"] = "must not exceed the global batch"
        for name in ("global_batch_tokens", "max_batch_tokens"):
            if getattr(self, name) is not None and not is_positive(getattr(self, name)):
                errors[name] = "must be positive"
        if self.zero_stage not in (0, 1, 2, 3):
            errors["zero_stage"] = "must be 0, 1, 2 or 3"
        if self.software_stack not in SOFTWARE_STACKS:
            errors["software_stack"] = f"must be one of {', '.join(SOFTWARE_STACKS)}"
        if self.recompute is not None and self.recompute not in ACTIVATION_RECOMPUTE_MODES:
            errors["recompute"] = f"must be one of {ACTIVATION_RECOMPUTE_MODES}"
        if not 0 < self.usable_memory_share <= 1:
            errors["usable_memory_share"] = "must be in (0, 1]"
        if self.gradient_precision not in GRADIENT_BYTES:
            errors["gradient_precision"] = f"must be one of {', '.join(GRADIENT_BYTES)}"
        if self.optimizer_state_precision not in OPTIMIZER_STATE_BYTES:
            errors["optimizer_state_precision"] = (
                f"must be one of {', '.join(OPTIMIZER_STATE_BYTES)}"
            )
        if not 1 <= self.moe_capacity_factor <= 4:
            errors["moe_capacity_factor"] = "must be in [1, 4]"
        if not 0 <= self.moe_a2a_overlap <= 1:
            errors["moe_a2a_overlap"] = "must be in [0, 1]"
        if self.moe_mtp_depth not in range(0, 5):
            errors["moe_mtp_depth"] = "must be 0 to 4"
        if self.moe is not None:
            errors.update(check_shape(self.moe))
        errors = {**self._range_errors(), **errors}
        if not errors:
            errors = {**self._shape_errors(), **self._parallel_errors()}
        if errors:
            raise PlannerInputError(errors)

    def _range_errors(self) -> dict[str, str]:
        """Sizes outside their documented range (they drive the split grid and the arrays)."""
        errors = {}
        for attribute, name in WORKLOAD_LIMITS.items():
            if message := range_error(name, getattr(self, attribute)):
                errors[attribute] = message
        for attribute, name in SHAPE_LIMITS.items():
            if self.shape and (message := range_error(name, getattr(self.shape, attribute))):
                errors[name] = message
        if self.shape and (message := range_error("attention_heads", self.shape.kv_heads)):
            errors["kv_heads"] = message
        return errors

    def _shape_errors(self) -> dict[str, str]:
        """A given shape that cannot exist (heads not dividing the width, ...). `params` stays
        the model's N even where a partial shape counts fewer (callers of the engine may give
        layers and width only); the API refuses a disagreement (engine.memory.
        shape_params_error)."""
        return {} if self.shape is None else self.shape.errors()

    def _parallel_errors(self) -> dict[str, str]:
        """Fixed degrees the model (its layers and heads) or the batch cannot take, keyed by the
        API's field names; those that depend on an option's cards are its reason instead."""
        fixed, shape = self.parallelism, self.model_shape
        inferred = "" if self.shape else " (inferred from model_params; give the shape to set it)"
        errors: dict[str, str] = {}
        if fixed.tp is not None and shape.heads % fixed.tp:
            errors["tp_degree"] = f"Must divide the {shape.heads} attention heads{inferred}."
        if fixed.pp is not None and fixed.pp > shape.layers:
            errors["pp_degree"] = f"Must be at most the {shape.layers} layers{inferred}."
        elif fixed.pp is not None and self.shape and shape.layers % fixed.pp:
            errors["pp_degree"] = f"Must divide the {shape.layers} layers."
        if fixed.vp is not None and fixed.vp > 1:
            if fixed.pp == 1:
                errors["vp_degree"] = "Virtual stages need pipeline parallelism (pp_degree > 1)."
            elif fixed.pp is not None and fixed.pp * fixed.vp > shape.layers:
                errors["vp_degree"] = (
                    f"pp × vp = {fixed.pp * fixed.vp} must be at most the {shape.layers} "
                    f"layers{inferred}."
                )
            elif fixed.pp is not None and self.shape and shape.layers % (fixed.pp * fixed.vp):
                errors["vp_degree"] = (
                    f"pp × vp = {fixed.pp * fixed.vp} must divide the {shape.layers} layers."
                )
            elif 2 * fixed.vp > shape.layers:
                errors["vp_degree"] = f"2 × vp must be at most the {shape.layers} layers."
        if fixed.ep is not None and fixed.ep > 1 and self.experts == 1:
            errors["ep_degree"] = "Expert parallelism needs a mixture of experts (experts > 1)."
        elif fixed.ep is not None and self.experts % fixed.ep:
            errors["ep_degree"] = f"Must divide the {self.experts} routed experts."
        elif fixed.ep is not None and fixed.dp is not None and fixed.dp % fixed.ep:
            errors["ep_degree"] = f"Must divide dp_degree ({fixed.dp}): experts split inside dp."
        if fixed.cp is not None and int(self.seq_len) % fixed.cp:
            errors["cp_degree"] = f"Must divide seq_len ({int(self.seq_len)})."
        if fixed.dp is not None:
            largest = self.batch_rule.largest
            micro = self.micro_batch or 1
            if fixed.dp * micro > largest:
                errors["dp_degree"] = (
                    f"dp × micro_batch = {fixed.dp * micro} exceeds the global batch of "
                    f"{largest} sequences: every replica needs a micro-batch."
                )
        return errors

    @property
    def flops_params(self) -> float:
        """N of k·N·D: the active parameters of a mixture of experts, else the parameters."""
        return self.params if self.moe is None else active_params(self.moe)

    @property
    def flops(self) -> float:
        """Total training FLOPs: k · N · D unless given (N active for a mixture)."""
        if self.total_flops is not None:
            return float(self.total_flops)
        return float(self.flops_per_param_token * self.flops_params * float(self.tokens or 0.0))

    @property
    def moe_training(self) -> MoeTraining | None:
        """The mixture as the step-time model takes it (None: dense)."""
        if self.moe is None:
            return None
        return MoeTraining(
            self.moe, self.moe_capacity_factor, self.moe_a2a_overlap, self.moe_mtp_depth
        )

    @property
    def experts(self) -> int:
        """Routed experts per MoE layer (1: dense): what expert parallelism may divide."""
        return 1 if self.moe is None or not self.moe.is_moe else int(self.moe.experts)

    @property
    def batch_sequences(self) -> int:
        """Global batch in sequences (from global_batch_tokens when given)."""
        if self.global_batch_tokens is not None and is_positive(self.global_batch_tokens):
            return max(1, round(float(self.global_batch_tokens) / max(int(self.seq_len), 1)))
        return int(self.global_batch_sequences)

    @property
    def batch_rule(self) -> BatchRule:
        """The global batch and how far it may grow with data parallelism."""
        cap = None
        if self.max_batch_tokens is not None and is_positive(self.max_batch_tokens):
            cap = max(1, int(float(self.max_batch_tokens) // max(int(self.seq_len), 1)))
        per_stage = float(default_value("batch_growth_microbatches_per_stage"))
        return BatchRule(self.batch_sequences, cap, per_stage)

    @property
    def model_shape(self) -> ModelShape:
        if self.shape is None and self.moe is not None:
            return dense_view(self.moe)
        return self.shape or ModelShape.infer(self.params)

    @property
    def activation_recompute(self) -> ActivationRecompute:
        if self.recompute is not None:
            return self.recompute
        return "full" if self.flops_per_param_token == 8 else "selective"

    @property
    def state_bytes(self) -> dict[str, float]:
        """Bytes per parameter of the gradients and the Adam state (engine.memory keywords)."""
        return state_bytes_of(self.gradient_precision, self.optimizer_state_precision)


def is_positive(value: Any) -> bool:
    try:
        return math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        return False


# API field → (TrainingWorkload field, conversion): the one reading of a workload payload, for
# the stateless estimate and for stored plans alike. Absent fields keep the dataclass default.
_SPEC_FIELDS: dict[str, tuple[str, Any]] = {
    "model_params": ("params", float),
    "tokens": ("tokens", None),
    "total_flops": ("total_flops", None),
    "flops_per_param_token": ("flops_per_param_token", int),
    "precision": ("precision", None),
    "fp4_bf16_layer_share": ("fp4_bf16_layer_share", float),
    "gradient_precision": ("gradient_precision", str),
    "optimizer_state_precision": ("optimizer_state_precision", str),
    "seq_len": ("seq_len", int),
    "global_batch_sequences": ("global_batch_sequences", int),
    "global_batch_tokens": ("global_batch_tokens", None),
    "max_batch_tokens": ("max_batch_tokens", None),
    "micro_batch": ("micro_batch", int),
    "zero_stage": ("zero_stage", int),
    "recompute": ("recompute", None),
    "sequence_parallel": ("sequence_parallel", bool),
    "software_stack": ("software_stack", str),
    "usable_memory_share": ("usable_memory_share", float),
}


# The model's shape in a payload: layers, hidden_size and attention_heads together, the rest
# optional (API field → ModelShape field).
SHAPE_SPEC_FIELDS: dict[str, str] = {
    "layers": "layers",
    "hidden_size": "hidden",
    "attention_heads": "heads",
    "kv_heads": "kv_heads",
    "ffn_hidden_size": "ffn_hidden",
    "vocab_size": "vocab",
    "tied_embeddings": "tied_embeddings",
    "mlp_kind": "mlp",
}
SHAPE_REQUIRED_FIELDS: tuple[str, ...] = ("layers", "hidden_size", "attention_heads")
# Degrees a payload may fix (API field `<name>_degree` → FixedParallelism field).
DEGREE_FIELDS: tuple[str, ...] = ("tp", "pp", "cp", "vp", "dp", "ep")


# A mixture of experts in a payload (API field names; engine.moe.MoeShape's), besides the
# shape's: given with layers, hidden_size, attention_heads and vocab_size.
MOE_SHAPE_FIELDS: tuple[str, ...] = (
    "experts",
    "experts_per_token",
    "shared_experts",
    "expert_ffn_hidden_size",
    "dense_layers",
    "attention",
    "head_dim",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "v_head_dim",
)
# How the mixture trains (TrainingWorkload fields of the same names).
MOE_TRAINING_FIELDS: tuple[str, ...] = ("moe_capacity_factor", "moe_a2a_overlap", "moe_mtp_depth")
MOE_REQUIRED_FIELDS: tuple[str, ...] = (
    "layers",
    "hidden_size",
    "attention_heads",
    "vocab_size",
    "experts",
    "experts_per_token",
    "expert_ffn_hidden_size",
)


def spec_is_moe(spec: Mapping[str, Any]) -> bool:
    """Whether a payload enters a mixture of experts by its shape (more than one expert)."""
    return int(spec.get("experts") or 1) > 1 or int(spec.get("shared_experts") or 0) > 0


def moe_shape_from_spec(spec: Mapping[str, Any]) -> MoeShape:
    """The mixture a payload enters (every MOE_REQUIRED_FIELDS given): kv_heads default the
    heads, head_dim hidden ÷ heads, ffn_hidden_size (the dense layers') the expert width."""
    heads = int(spec["attention_heads"])
    hidden = int(spec["hidden_size"])
    expert = int(spec["expert_ffn_hidden_size"])
    optional = {
        key: int(spec[key])
        for key in (
            "shared_experts",
            "q_lora_rank",
            "kv_lora_rank",
            "qk_rope_head_dim",
            "v_head_dim",
        )
        if spec.get(key) is not None
    }
    return MoeShape(
        layers=int(spec["layers"]),
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=int(spec.get("kv_heads") or heads),
        head_dim=int(spec.get("head_dim") or hidden // max(heads, 1)),
        vocab_size=int(spec["vocab_size"]),
        ffn_hidden_size=int(spec.get("ffn_hidden_size") or expert),
        experts=int(spec["experts"]),
        experts_per_token=int(spec["experts_per_token"]),
        expert_ffn_hidden_size=expert,
        dense_layers=int(spec.get("dense_layers") or 0),
        attention=spec.get("attention") or "gqa",
        gated_mlp=(spec.get("mlp_kind") or "gated") == "gated",
        tied_embeddings=bool(spec.get("tied_embeddings") or False),
        **optional,
    )


DENSE_FFN_MISUSED = (
    "A mixture of experts' expert width is expert_ffn_hidden_size; ffn_hidden_size is only the "
    "width of its leading dense layers (dense_layers), and it has none."
)
MOE_FIELD_ALONE = "Give it with experts > 1 (a mixture of experts), or leave it out."
MOE_NEEDS = (
    "A mixture of experts needs layers, hidden_size, attention_heads, vocab_size, experts, "
    "experts_per_token and expert_ffn_hidden_size."
)


def moe_spec_errors(spec: Mapping[str, Any]) -> dict[str, str] | None:
    """What is wrong with a payload's catalog `model` or mixture of experts, by field; None when
    it names neither (the dense checks apply), empty when it is fine."""
    moe_given = [key for key in (*MOE_SHAPE_FIELDS, *MOE_TRAINING_FIELDS) if spec.get(key)]
    if spec.get("model"):
        clash = [
            key
            for key in (*SHAPE_SPEC_FIELDS, *MOE_SHAPE_FIELDS, "model_params")
            if spec.get(key) is not None and spec.get(key) is not False
        ]
        if clash:
            message = "The catalog model sets the shape and the parameters: give model or these."
            return dict.fromkeys(clash, message)
        try:
            catalog_model_of(spec)
        except EngineInputError as exc:
            return dict(exc.errors)
        return {}
    if not spec_is_moe(spec):
        if moe_given:
            return dict.fromkeys(moe_given, MOE_FIELD_ALONE)
        return None
    if missing := [key for key in MOE_REQUIRED_FIELDS if spec.get(key) is None]:
        misused = spec.get("ffn_hidden_size") and not spec.get("dense_layers")
        if "expert_ffn_hidden_size" in missing and misused:
            return {"ffn_hidden_size": DENSE_FFN_MISUSED}
        return dict.fromkeys(missing, MOE_NEEDS)
    shape = moe_shape_from_spec(spec)
    if errors := check_shape(shape):
        return errors
    if spec.get("ffn_hidden_size") and not shape.dense_layer_count:
        return {"ffn_hidden_size": DENSE_FFN_MISUSED}
    params = spec.get("model_params")
    total = total_params(shape)
    if params is not None and abs(float(params) - total) > 0.10 * total:
        return {
            "model_params": f"{float(params):.4g} parameters given, but the mixture's shape has "
            f"{total:.4g} in all ({active_params(shape):.4g} active per token); give its total "
            "or leave model_params out."
        }
    return {}


def catalog_model_of(spec: Mapping[str, Any]) -> CatalogModel | None:
    """The catalog model a payload names (`model`), dense or a mixture; None when none."""
    name = spec.get("model")
    return find_model(str(name), allow_moe=True) if name else None


def shape_from_spec(spec: Mapping[str, Any]) -> ModelShape | None:
    """The shape a payload gives (None: inferred from model_params, or a mixture of experts:
    its dense view comes from TrainingWorkload.moe)."""
    model = catalog_model_of(spec)
    if model is not None:
        return None if model.is_moe else model.model_shape()
    if spec_is_moe(spec) or not all(spec.get(key) for key in SHAPE_REQUIRED_FIELDS):
        return None
    values: dict[str, Any] = {}
    for key, name in SHAPE_SPEC_FIELDS.items():
        value = spec.get(key)
        if value is None:
            continue
        values[name] = value if name in ("tied_embeddings", "mlp") else int(value)
    return ModelShape(**values)


def workload_from_spec(spec: Mapping[str, Any], **overrides: Any) -> TrainingWorkload:
    """The workload of a validated payload (API field names); ``overrides`` win. Without
    model_params, N is the given shape's own count (ModelShape.params)."""
    values = {
        name: (convert(spec[key]) if convert else spec[key])
        for key, (name, convert) in _SPEC_FIELDS.items()
        if spec.get(key) is not None
    }
    for key in MOE_TRAINING_FIELDS:
        if spec.get(key) is not None:
            values[key] = int(spec[key]) if key == "moe_mtp_depth" else float(spec[key])
    model = catalog_model_of(spec)
    shape = shape_from_spec(spec)
    if model is not None and not model.is_moe:
        values["params"] = float(model.params)  # the published count, as the inference side
    if model is not None and model.is_moe:
        values["moe"] = model.moe_shape()
    elif spec_is_moe(spec):
        values["moe"] = moe_shape_from_spec(spec)
    if "moe" in values:
        values["params"] = total_params(values["moe"])  # every expert: what memory holds
    if shape is not None:
        values["shape"] = shape
        values.setdefault("params", float(shape.params))
    degrees = {d: spec.get(f"{d}_degree") for d in DEGREE_FIELDS}
    values["parallelism"] = FixedParallelism(
        **{d: (int(v) if v else None) for d, v in degrees.items()}
    )
    return TrainingWorkload(**{**values, **overrides})
