"""engine/moe.py: total and active parameters of published mixture-of-experts shapes, counted
by hand, and the properties a dense model, top-k and the decode batch must keep."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.memory import ModelShape
from engine.moe import (
    MoeShape,
    active_params,
    check_shape,
    decode_params_read,
    expected_experts_read,
    kv_values_per_token,
    matmul_params_per_token,
    total_params,
)

# DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv:2412.19437) §4.2 and its config.json:
# 61 layers, hidden 7168, 128 heads of 128 (+64 RoPE), MLA q_lora 1536 / kv_lora 512, the first
# 3 layers dense (FFN 18432), then 256 routed experts (top-8) + 1 shared, expert FFN 2048,
# vocabulary 129280. Published: 671B total, 37B activated per token.
DEEPSEEK_V3 = MoeShape(
    layers=61, hidden_size=7168, attention_heads=128, kv_heads=128, head_dim=128,
    vocab_size=129280, ffn_hidden_size=18432, experts=256, experts_per_token=8,
    shared_experts=1, expert_ffn_hidden_size=2048, dense_layers=3, attention="mla",
    q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, v_head_dim=128,
)  # fmt: skip
# Jiang et al. 2024, "Mixtral of Experts" (arXiv:2401.04088) Table 1: dim 4096, 32 layers,
# 32 heads, 8 KV heads, head 128, hidden 14336, vocab 32000, 8 experts, top-2;
# published 46.7B total ("47B"), 12.9B active ("13B").
MIXTRAL_8X7B = MoeShape(
    layers=32, hidden_size=4096, attention_heads=32, kv_heads=8, head_dim=128,
    vocab_size=32000, ffn_hidden_size=14336, experts=8, experts_per_token=2,
)  # fmt: skip
# Qwen/Qwen3-235B-A22B config.json: 94 layers, hidden 4096, 64 heads, 4 KV heads, head 128,
# moe_intermediate_size 1536, 128 experts, 8 per token, vocab 151936, every layer sparse.
QWEN3_235B = MoeShape(
    layers=94, hidden_size=4096, attention_heads=64, kv_heads=4, head_dim=128,
    vocab_size=151936, ffn_hidden_size=12288, experts=128, experts_per_token=8,
    expert_ffn_hidden_size=1536,
)  # fmt: skip
# openai/gpt-oss-120b config.json: 36 layers, hidden 2880, 64 heads of 64, 8 KV heads,
# intermediate 2880, 128 local experts, 4 per token, vocab 201088. OpenAI's model card
# (2025): 116.83B total, 5.13B active (its "active" leaves out the input embedding lookup).
GPT_OSS_120B = MoeShape(
    layers=36, hidden_size=2880, attention_heads=64, kv_heads=8, head_dim=64,
    vocab_size=201088, ffn_hidden_size=2880, experts=128, experts_per_token=4,
)  # fmt: skip


def test_deepseek_v3_by_hand():
    h = 7168
    q = h * 1536 + 1536 * 128 * (128 + 64)  # query down and up (nope + rope per head)
    kv = h * (512 + 64) + 512 * 128 * (128 + 128)  # latent + rope key, then K and V up
    attention = q + kv + 128 * 128 * h  # + output
    expert = 3 * h * 2048
    common = 61 * attention + 3 * 3 * h * 18432 + 58 * h * 256 + 2 * 129280 * h
    assert total_params(DEEPSEEK_V3) == common + 58 * 257 * expert
    assert active_params(DEEPSEEK_V3) == common + 58 * 9 * expert
    # Published: 671B total, 37B activated (the report rounds; MTP module not counted).
    assert total_params(DEEPSEEK_V3) / 1e9 == pytest.approx(671.0, abs=0.5)
    assert active_params(DEEPSEEK_V3) / 1e9 == pytest.approx(37.0, abs=1.0)


def test_mixtral_8x7b_by_hand():
    h = 4096
    attention = 2 * h * h + 2 * h * 1024  # Q, O; K, V of 8 heads of 128
    expert = 3 * h * 14336
    common = 32 * (attention + 8 * h) + 2 * 32000 * h
    assert total_params(MIXTRAL_8X7B) == common + 32 * 8 * expert
    assert active_params(MIXTRAL_8X7B) == common + 32 * 2 * expert
    assert total_params(MIXTRAL_8X7B) / 1e9 == pytest.approx(46.7, abs=0.05)
    assert active_params(MIXTRAL_8X7B) / 1e9 == pytest.approx(12.9, abs=0.05)


def test_qwen3_235b_a22b_counts_235b_and_22b():
    assert total_params(QWEN3_235B) / 1e9 == pytest.approx(235.1, abs=0.1)
    assert active_params(QWEN3_235B) / 1e9 == pytest.approx(22.2, abs=0.1)


def test_gpt_oss_120b_counts_its_model_card():
    assert total_params(GPT_OSS_120B) / 1e9 == pytest.approx(116.83, rel=0.001)
    assert matmul_params_per_token(GPT_OSS_120B) / 1e9 == pytest.approx(5.13, rel=0.002)


def test_mla_caches_the_latent_and_the_rope_key():
    # DeepSeek-V2/V3: (kv_lora_rank + rope) = 576 values per token and layer.
    assert kv_values_per_token(DEEPSEEK_V3) == 61 * 576
    assert kv_values_per_token(MIXTRAL_8X7B) == 32 * 2 * 8 * 128


def test_impossible_shapes_are_named():
    assert "experts_per_token" in check_shape(MoeShape(2, 64, 4, 4, 16, 100, 128, 4, 8))
    assert "kv_lora_rank" in check_shape(MoeShape(2, 64, 4, 4, 16, 100, 128, attention="mla"))
    assert check_shape(DEEPSEEK_V3) == {}


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

dense_shapes = st.builds(
    lambda layers, heads, groups, head_dim, ffn, vocab, gated, tied: (
        layers, heads * groups, heads, head_dim, ffn, vocab, gated, tied
    ),
    st.integers(1, 96), st.integers(1, 16), st.integers(1, 8), st.sampled_from([32, 64, 128]),
    st.integers(1, 50_000), st.integers(1, 260_000), st.booleans(), st.booleans(),
)  # fmt: skip


@given(dense_shapes)
@settings(max_examples=200, deadline=None)
def test_a_dense_model_as_a_one_expert_moe_gives_the_dense_counts(values):
    layers, heads, kv_heads, head_dim, ffn, vocab, gated, tied = values
    hidden = heads * head_dim
    dense = ModelShape(
        layers, hidden, heads, kv_heads=kv_heads, ffn_hidden=ffn, vocab=vocab,
        tied_embeddings=tied, mlp="gated" if gated else "plain",
    )  # fmt: skip
    moe = MoeShape(
        layers, hidden, heads, kv_heads, head_dim, vocab, ffn, gated_mlp=gated,
        tied_embeddings=tied,
    )  # fmt: skip
    assert total_params(moe) == dense.params
    assert active_params(moe) == dense.params
    lookup = 0 if tied else vocab * hidden
    assert matmul_params_per_token(moe) == dense.params - lookup
    assert decode_params_read(moe, [1, 64, 4096]).tolist() == [dense.params - lookup] * 3


moe_shapes = st.builds(
    lambda experts, k, shared, dense, width: MoeShape(
        layers=8, hidden_size=512, attention_heads=8, kv_heads=2, head_dim=64,
        vocab_size=32000, ffn_hidden_size=2048, experts=experts,
        experts_per_token=min(k, experts), shared_experts=shared,
        expert_ffn_hidden_size=width, dense_layers=dense,
    ),
    st.integers(2, 256), st.integers(1, 16), st.integers(0, 2), st.integers(0, 8),
    st.integers(64, 4096),
)  # fmt: skip


@given(moe_shapes, st.integers(1, 15))
@settings(max_examples=200, deadline=None)
def test_more_experts_per_token_never_lowers_active_params_or_flops(shape, extra):
    more = MoeShape(
        **{
            **shape.__dict__,
            "experts_per_token": min(shape.experts_per_token + extra, shape.experts),
        }
    )
    assert active_params(more) >= active_params(shape)
    assert matmul_params_per_token(more) >= matmul_params_per_token(shape)
    assert active_params(more) <= total_params(more)


@given(moe_shapes, st.lists(st.integers(1, 1_000_000), min_size=2, max_size=8))
@settings(max_examples=200, deadline=None)
def test_a_larger_batch_never_reads_fewer_expert_bytes_and_at_most_all(shape, batches):
    tokens = np.sort(np.asarray(batches))
    read = decode_params_read(shape, tokens)
    assert np.all(np.diff(read) >= -1e-6 * read[:-1])
    assert np.all(read <= total_params(shape) + 1e-6 * total_params(shape))
    # One token reads what it multiplies through: the active weights but the lookup.
    one = decode_params_read(shape, 1)
    assert float(one) == pytest.approx(matmul_params_per_token(shape), rel=1e-12)


def test_expected_experts_read_runs_from_k_to_all():
    assert expected_experts_read(256, 8, 1) == pytest.approx(8.0)
    # Two tokens: 256·(1 − (248/256)²) = 15.75 distinct experts on average.
    assert expected_experts_read(256, 8, 2) == pytest.approx(256 * (1 - (248 / 256) ** 2))
    assert expected_experts_read(256, 8, 100_000) == pytest.approx(256.0)
