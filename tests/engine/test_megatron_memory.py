"""The memory wall against what Megatron-Core and NeMo keep: the distributed optimizer's bytes
per parameter, the recipe's gradient and optimizer-state precisions, and the published
Nemotron-4 340B split that fits on 128 H100 (engine/memory.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.capacity.workload import PlannerInputError, TrainingWorkload
from engine.memory import (
    activation_bytes_per_card,
    in_flight_micro_batches,
    min_cards_for_state,
    model_state_bytes_per_card,
    state_bytes_of,
    training_state_bytes,
    usable_card_bytes,
)
from engine.track_record import load_runs, shape_of, workload_of

DP_DEGREES = (1, 2, 8, 64, 1024)


@pytest.mark.parametrize("d", DP_DEGREES)
def test_megatron_distributed_optimizer_bf16_params_fp32_grads(d: int):
    # Megatron Core developer guide, "Distributed Optimizer": bf16 parameters with fp32
    # gradients keep 6 + 12/d bytes per parameter (18 without the distributed optimizer).
    per_param = training_state_bytes(1.0, 1, d, **state_bytes_of("fp32", "fp32"))
    assert per_param == pytest.approx(6 + 12 / d)
    assert training_state_bytes(1.0, 0, d, **state_bytes_of("fp32", "fp32")) == pytest.approx(18)


@pytest.mark.parametrize("d", DP_DEGREES)
def test_default_recipe_is_megatron_cores_bf16_gradient_buffer(d: int):
    # DistributedDataParallelConfig.grad_reduce_in_fp32 defaults to False in Megatron-Core
    # (megatron/core/distributed/distributed_data_parallel_config.py): the gradient buffer is
    # in the parameters' bf16, 2 bytes, so the distributed optimizer keeps 4 + 12/d.
    assert training_state_bytes(1.0, 1, d) == pytest.approx(4 + 12 / d)
    assert training_state_bytes(1.0, 1, d, **state_bytes_of()) == pytest.approx(4 + 12 / d)


@pytest.mark.parametrize("d", DP_DEGREES)
def test_nemo_bf16_optimizer_state_keeps_no_master_copy(d: int):
    # NeMo's distributed Adam with optim.dtype bf16 (megatron_base_model.setup_optimization:
    # store_params is off when the optimizer's dtype is the model's): bf16 moments (2 + 2)
    # sharded over d, the bf16 weights and the bf16 gradient buffer whole.
    per_param = training_state_bytes(1.0, 1, d, **state_bytes_of("bf16", "bf16"))
    assert per_param == pytest.approx(4 + 4 / d)


def test_unknown_precisions_are_refused():
    with pytest.raises(ValueError, match="gradients"):
        state_bytes_of("fp16")
    with pytest.raises(ValueError, match="optimizer_state"):
        state_bytes_of("bf16", "fp8")
    with pytest.raises(PlannerInputError) as caught:
        TrainingWorkload(params=1e9, tokens=1e9, optimizer_state_precision="int8")
    assert "optimizer_state_precision" in caught.value.errors


def _nemotron_run() -> dict:
    (run,) = (run for run in load_runs() if run["id"] == "nemo2407-nemotron4-340b-128")
    return run


def _published_split_bytes(state_bytes: dict[str, float]) -> float:
    """Per-card bytes of NVIDIA's published split: TP 8 × PP 8 × VP 12, DP 2, micro-batch 1,
    global batch 32 (16 micro-batches per replica), sequence parallel, selective recompute."""
    run = _nemotron_run()
    shape = shape_of(run["model"])
    tp, pp, vp, dp, micro_batches = 8, 8, 12, 2, 16
    state = model_state_bytes_per_card(run["model"]["params"], tp, pp, dp, 1, **state_bytes)
    activations = activation_bytes_per_card(
        run["model"]["seq_len"],
        1,
        shape.layers,
        shape.hidden,
        shape.heads,
        tp,
        pp,
        micro_batches,
        recompute="selective",
        virtual_stages=vp,
        **shape.activation_terms(),
    )
    return float(state + activations)


def test_nemotron4_340b_published_split_fits_with_the_nemo_recipe():
    # NVIDIA NeMo 24.07 performance summary: Nemotron-4 340B trained on 128 H100 80GB with
    # TP 8, PP 8, VP 12 (DP 2), GBS 32, MBS 1; its recipe keeps bf16 Adam state (run data).
    recipe = workload_of(_nemotron_run())
    assert recipe.optimizer_state_precision == "bf16"
    assert recipe.gradient_precision == "bf16"
    needed = _published_split_bytes(recipe.state_bytes)
    assert needed <= float(usable_card_bytes(80))
    # The recipe is what makes room: fp32 master weights and moments need more per card.
    assert _published_split_bytes(state_bytes_of()) > needed


def test_interleaving_holds_more_micro_batches_in_flight():
    # Megatron-Core's interleaved 1F1B (megatron/core/pipeline_parallel/schedules.py): the
    # first stage runs (p − 1)·2 + (v − 1)·p warm-up chunk-passes before its first backward,
    # plus the one in flight; at p = 8, v = 12 each chunk is one layer: 103 layers' worth.
    layers_per_stage = 96 // 8
    in_flight = float(in_flight_micro_batches(8, 16, 12)) * layers_per_stage
    assert in_flight == pytest.approx((8 - 1) * 2 + (12 - 1) * 8 + 1, abs=0.5)


# --------------------------------------------------------------------------------------------
# Properties: more work never needs less memory; a leaner recipe never needs more
# --------------------------------------------------------------------------------------------

SHAPES = st.sampled_from([(32, 4096, 32), (80, 8192, 64), (96, 18432, 96)])


@given(
    shape=SHAPES,
    seq_len=st.integers(128, 65536),
    micro_batch=st.integers(1, 16),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4, 8, 16]),
    micro_batches=st.integers(1, 64),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_activations_grow_with_micro_batch_and_sequence(
    shape: tuple[int, int, int],
    seq_len: int,
    micro_batch: int,
    tp: int,
    pp: int,
    micro_batches: int,
    recompute: str,
):
    layers, hidden, heads = shape

    def per_card(s: int, b: int) -> float:
        return float(
            activation_bytes_per_card(
                s, b, layers, hidden, heads, tp, pp, micro_batches, recompute=recompute
            )
        )

    base = per_card(seq_len, micro_batch)
    assert per_card(seq_len, micro_batch + 1) > base
    assert per_card(2 * seq_len, micro_batch) > base


@given(
    params=st.floats(1e8, 2e12),
    zero_stage=st.integers(0, 3),
    dp=st.integers(1, 2048),
)
def test_state_never_grows_with_dp_and_leaner_precisions_never_need_more(
    params: float, zero_stage: int, dp: int
):
    default = training_state_bytes(params, zero_stage, dp, **state_bytes_of())
    assert training_state_bytes(params, zero_stage, dp + 1) <= default * (1 + 1e-12)
    assert training_state_bytes(params, zero_stage, dp, **state_bytes_of("fp32")) >= default
    lean = training_state_bytes(params, zero_stage, dp, **state_bytes_of("bf16", "bf16"))
    assert lean <= default
    # The deadline search's memory floor follows the recipe and stays a floor.
    assert min_cards_for_state(params, 80, **state_bytes_of("bf16", "bf16")) <= min_cards_for_state(
        params, 80
    )
