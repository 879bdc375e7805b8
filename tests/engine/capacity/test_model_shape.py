"""The full model shape in the engine (GQA, the MLP's width and kind, vocabulary, tied
embeddings) and the fixed degrees the workload refuses: the GPT-3-like default is unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from engine.capacity import PlannerInputError, TrainingWorkload, plan_capacity
from engine.capacity.workload import workload_from_spec
from engine.memory import (
    ModelShape,
    activation_bytes_per_card,
    activation_bytes_per_layer,
    shape_params_error,
)
from engine.parallelism import FixedParallelism
from tests.support.capacity_inputs import H100_SXM, options

LLAMA_31_70B = ModelShape(
    layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128_256, mlp="gated"
)


def test_the_llama_31_70b_shape_counts_its_published_70_6_billion():
    assert LLAMA_31_70B.layer_params == 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672
    assert LLAMA_31_70B.embedding_params == 2 * 128_256 * 8192
    assert LLAMA_31_70B.params == 70_552_387_584
    tied = ModelShape(80, 8192, 64, 8, 28672, 128_256, tied_embeddings=True, mlp="gated")
    assert LLAMA_31_70B.params - tied.params == 128_256 * 8192


def test_the_inferred_shape_counts_12_l_h_squared():
    shape = ModelShape.infer(175e9)
    assert shape.params == 12 * 96 * 12288**2
    assert shape.ffn == 4 * 12288 and shape.kv_hidden == 12288
    assert not shape.refines_activations and shape.activation_terms() == {}


@pytest.mark.parametrize("sequence_parallel", [True, False])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_a_gpt_like_shape_given_in_full_keeps_the_published_activations(
    sequence_parallel, recompute
):
    """kv = h, ffn = 4h, plain: the refined formula gives Korthikanti's 34 / 10 + 24/t."""
    tp = np.array([1.0, 2.0, 4.0, 8.0])
    args = (2048, 1, 12288, 96, tp)
    plain = activation_bytes_per_layer(
        *args, sequence_parallel=sequence_parallel, recompute=recompute
    )
    spelled_out = activation_bytes_per_layer(
        *args,
        sequence_parallel=sequence_parallel,
        recompute=recompute,
        kv_hidden=12288,
        ffn_hidden=4 * 12288,
        gated_mlp=False,
    )
    np.testing.assert_array_equal(plain, spelled_out)


def test_gqa_and_a_gated_mlp_change_the_split_activations():
    s, b, h, t = 8192, 1, 8192, 8
    per_layer = activation_bytes_per_layer(
        s,
        b,
        h,
        64,
        t,
        recompute="selective",
        **{"kv_hidden": 1024, "ffn_hidden": 28672, "gated_mlp": True},
    )
    # 10 kept whole + 2 (Q) + 4·1024/8192 (K, V) + 2 (output projection) + 6·28672/8192 (MLP)
    assert float(per_layer) == pytest.approx(s * b * h * (10 + 2 + 0.5 + 2 + 21) / t)
    card = activation_bytes_per_card(
        s, b, 80, h, 64, t, 4, 16, recompute="selective", **LLAMA_31_70B.activation_terms()
    )
    assert float(card) == pytest.approx(float(per_layer) * 20 * 4)


def test_results_are_identical_when_the_refinements_are_their_defaults():
    bare = TrainingWorkload(params=7e9, tokens=1e12, shape=ModelShape(32, 4096, 32))
    spelled = TrainingWorkload(
        params=7e9,
        tokens=1e12,
        shape=ModelShape(32, 4096, 32, kv_heads=32, ffn_hidden=16384, mlp="plain"),
    )
    rows = options({**H100_SXM, "cards": 64}, {**H100_SXM, "cards": 256})
    first, second = plan_capacity(bare, rows), plan_capacity(spelled, rows)
    for column in ("tp", "pp", "dp", "memory_per_card_bytes", "days", "total_cost"):
        np.testing.assert_array_equal(first[column].to_numpy(), second[column].to_numpy())


def test_a_gated_llama_holds_less_kv_than_the_same_shape_without_gqa():
    split = FixedParallelism(tp=8, pp=4, cp=1, vp=1)
    rows = options({**H100_SXM, "cards": 512})
    kwargs = {"tokens": 15e12, "seq_len": 8192, "micro_batch": 1, "parallelism": split}
    gqa = plan_capacity(
        TrainingWorkload(params=LLAMA_31_70B.params, shape=LLAMA_31_70B, **kwargs), rows
    ).iloc[0]
    mha_shape = ModelShape(80, 8192, 64, 64, 28672, 128_256, mlp="gated")
    mha = plan_capacity(
        TrainingWorkload(params=mha_shape.params, shape=mha_shape, **kwargs), rows
    ).iloc[0]
    assert gqa["activation_bytes_per_card"] < mha["activation_bytes_per_card"]
    assert gqa["activation_bytes_per_card"] / mha["activation_bytes_per_card"] == pytest.approx(
        35.5 / 39
    )


def test_params_from_the_shape_and_the_ten_percent_rule():
    workload = workload_from_spec(
        {
            "tokens": 1e12,
            "layers": 80,
            "hidden_size": 8192,
            "attention_heads": 64,
            "kv_heads": 8,
            "ffn_hidden_size": 28672,
            "mlp_kind": "gated",
            "vocab_size": 128_256,
        }
    )
    assert workload.params == LLAMA_31_70B.params and workload.shape == LLAMA_31_70B
    assert shape_params_error(70e9, LLAMA_31_70B) is None
    message = shape_params_error(175e9, LLAMA_31_70B)
    assert message and "1.75e+11" in message and "7.055e+10" in message


@pytest.mark.parametrize(
    ("shape", "field"),
    [
        (ModelShape(80, 8192, 60), "attention_heads"),
        (ModelShape(80, 8192, 64, kv_heads=6), "kv_heads"),
        (ModelShape(80, 8192, 64, mlp="gated"), "ffn_hidden_size"),
        (ModelShape(80, 8192, 64, tied_embeddings=True), "tied_embeddings"),
    ],
)
def test_an_impossible_shape_is_refused_by_the_workload(shape, field):
    with pytest.raises(PlannerInputError) as refused:
        TrainingWorkload(params=shape.params or 1e9, tokens=1e12, shape=shape)
    assert field in refused.value.errors


@pytest.mark.parametrize(
    ("fixed", "field"),
    [
        (FixedParallelism(tp=3), "tp_degree"),
        (FixedParallelism(pp=3), "pp_degree"),
        (FixedParallelism(pp=200), "pp_degree"),
        (FixedParallelism(pp=1, vp=2), "vp_degree"),
        (FixedParallelism(pp=4, vp=3), "vp_degree"),
        (FixedParallelism(cp=3), "cp_degree"),
        (FixedParallelism(dp=4096), "dp_degree"),
    ],
)
def test_fixed_degrees_the_model_or_batch_cannot_take_name_their_field(fixed, field):
    with pytest.raises(PlannerInputError) as refused:
        TrainingWorkload(
            params=LLAMA_31_70B.params,
            tokens=1e12,
            seq_len=8192,
            global_batch_sequences=2048,
            shape=LLAMA_31_70B,
            parallelism=fixed,
        )
    assert field in refused.value.errors


def test_split_errors_check_the_node_and_the_card_count():
    assert FixedParallelism(tp=16).split_errors(cards=512, cards_per_node=8) == {
        "tp_degree": "Must divide the 8 cards per node (tensor parallelism stays inside a node)."
    }
    assert "pp_degree" in FixedParallelism(tp=8, pp=3).split_errors(cards=64, cards_per_node=8)
    all_four = FixedParallelism(tp=8, pp=4, cp=2, dp=2)
    assert "must equal" in all_four.split_errors(cards=256, cards_per_node=8)["dp_degree"]
    assert all_four.split_errors(cards=128, cards_per_node=8) == {}
    assert FixedParallelism().split_errors(cards=7, cards_per_node=8) == {}
