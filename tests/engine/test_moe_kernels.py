"""The mixture of experts' own kernels (engine/moe_kernels.py): the grouped GEMMs by their
shape against the card's ridge point, and the routing kernels' bytes, by hand and as
properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import moe_kernels
from engine.moe_kernels import (
    arithmetic_intensity,
    expert_gemm_shapes,
    gemm_bytes,
    grouped_gemm_efficiency,
    routing_bytes_per_token,
)

# An H100 SXM in BF16 as the step-time model sees it: 0.695 × 989 TFLOP/s large-GEMM rate,
# 0.89 × 3.35 TB/s (engine/defaults.py gemm_efficiency_nvidia, hbm_efficiency).
H100_RATES = (0.695 * 989e12, 0.89 * 3.35e12)
tokens = st.floats(min_value=1.0, max_value=1e6)
widths = st.integers(min_value=64, max_value=32768)


def test_arithmetic_intensity_by_hand():
    # 2·m·N·K FLOPs over 2·(m·K + K·N + m·N) BF16 bytes: 2/(1/N + 1/m + 1/K) per byte / 2.
    m, n, k = 2048.0, 1536.0, 2048.0
    by_hand = 2 * m * n * k / (2 * (m * k + k * n + m * n))
    assert float(arithmetic_intensity(m, n, k)) == pytest.approx(by_hand)
    # The weight gradient accumulates into FP32 main gradients: read 4 and write 4 per weight.
    assert float(gemm_bytes(m, n, k, "wgrad", 2.0)) == pytest.approx(2 * m * (k + n) + 8 * k * n)


def test_an_experts_gemms_forward_and_backward():
    # SwiGLU: gate and up fused (N = 2·f), down (K = f); dgrad swaps N and K.
    shapes = expert_gemm_shapes(2048, 768)
    assert shapes == (
        (1536, 2048), (2048, 1536), (1536, 2048),
        (2048, 768), (768, 2048), (2048, 768),
    )  # fmt: skip


def test_a_memory_bound_expert_by_hand():
    # One token per expert: every GEMM reads its weights for 2 FLOPs per weight, far below the
    # ridge; the time is bytes ÷ bandwidth plus the fixed cost, and the share is tiny.
    flops_s, bytes_s = H100_RATES
    h, f = 4096.0, 1024.0
    compute = sum(2 * n * k / flops_s for n, k in expert_gemm_shapes(h, f))
    taken = 0.0
    for index, (n, k) in enumerate(expert_gemm_shapes(h, f)):
        kind = moe_kernels.GEMM_KINDS[index % 3]
        taken += max(2 * n * k / flops_s, float(gemm_bytes(1, n, k, kind, 2.0)) / bytes_s)
    taken += 6 * 5e-6
    share = float(grouped_gemm_efficiency(1, h, f, H100_RATES, overhead_us=5.0))
    assert share == pytest.approx(compute / taken)
    assert share < 0.01


def test_a_large_expert_reaches_the_large_gemm_rate():
    # Mixtral-sized experts with 65,536 tokens each: compute-bound, the fixed cost negligible.
    share = float(grouped_gemm_efficiency(65536, 4096, 14336, H100_RATES, overhead_us=2.75))
    assert 0.99 < share <= 1.0


@settings(max_examples=60, deadline=None)
@given(m=tokens, hidden=widths, ffn=widths, narrower=st.floats(min_value=0.05, max_value=1.0))
def test_a_narrower_expert_never_raises_the_efficiency(m, hidden, ffn, narrower):
    wide = grouped_gemm_efficiency(m, hidden, ffn, H100_RATES)
    thin = grouped_gemm_efficiency(m, hidden, max(1.0, ffn * narrower), H100_RATES)
    slim = grouped_gemm_efficiency(m, max(1.0, hidden * narrower), ffn, H100_RATES)
    assert float(thin) <= float(wide) * (1 + 1e-12)
    assert float(slim) <= float(wide) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(m=tokens, more=st.floats(min_value=1.0, max_value=100.0), hidden=widths, ffn=widths)
def test_more_tokens_per_expert_never_lower_the_efficiency(m, more, hidden, ffn):
    for in_bytes in (1.0, 2.0):
        few = grouped_gemm_efficiency(m, hidden, ffn, H100_RATES, in_bytes=in_bytes)
        many = grouped_gemm_efficiency(m * more, hidden, ffn, H100_RATES, in_bytes=in_bytes)
        assert float(few) <= float(many) * (1 + 1e-12)
        assert 0.0 < float(few) <= 1.0


def test_the_fixed_cost_is_the_module_constant_unless_given():
    at_default = grouped_gemm_efficiency(4096, 2048, 768, H100_RATES)
    given_same = grouped_gemm_efficiency(
        4096, 2048, 768, H100_RATES, overhead_us=moe_kernels.MOE_EXPERT_GEMM_OVERHEAD_US
    )
    assert float(at_default) == float(given_same)
    no_cost = grouped_gemm_efficiency(4096, 2048, 768, H100_RATES, overhead_us=0.0)
    assert float(no_cost) > float(at_default)


def test_routing_bytes_by_hand():
    # DeepSeek-V3's MoE layer (h 7,168, top-8 of 256): per token, forward permute (8 copies
    # read and written) and combine (8 read, one written) in BF16 with the 8 FP32
    # probabilities; backward gather (8 + 8), the outputs again (8), scatter (8 read, one
    # written); the router's FP32 logits written, read and scored, and its top-k, both ways.
    h, k, e = 7168, 8, 256
    forward = 2 * (3 * k + 1) * h + 4 * k
    backward = 2 * (4 * k + 1) * h + 4 * k
    router = 2 * (3 * 4 * e + 12 * k)
    assert routing_bytes_per_token(h, k, e, 3) == pytest.approx(forward + backward + router)
    # Full recomputation runs the forward kernels once more.
    assert routing_bytes_per_token(h, k, e, 4) == pytest.approx(2 * forward + backward + router)
