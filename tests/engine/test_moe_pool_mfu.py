"""A pool training a mixture of experts (issue #32): the throughput MFU counts the ACTIVE
parameters (k · N_active · tokens/s), the scaling model's compute and tensor-parallel traffic
the active ones too, and its data-parallel all-reduce the weights replicated over data
parallelism. A dense pool (no active/replicated columns, or NaN in them) is answered exactly
as before. And the fleet analysis's tensor-parallel cap is the card's NVLink domain when known.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from engine.evaluate import evaluate_pools
from engine.factors import EngineInputError
from engine.scaling import modeled_scaling_arrays, ring_allreduce_s
from tests.support.engine_rows import H100, group

# DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv:2412.19437): 671 B parameters in
# all, 37 B activated per token (§1, §4.2); pre-training took 2,664 K H800 GPU-hours for
# 14.8 T tokens (Table 1). The H800's dense BF16 peak is the H100 SXM's, 989 TFLOP/s.
V3_TOTAL = 671e9
V3_ACTIVE = 37e9
V3_TOKENS_PER_S_PER_CARD = 14.8e12 / (2_664e3 * 3600.0)  # ≈ 1,543
K = 6.0  # forward + backward, the table default flops_per_param_token
CARDS = 2048  # the run's H800 count (§3.1)


def _pools(**extra: object) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "pool_id": "v3",
                "model_params": V3_TOTAL,
                "job_tokens_per_s": V3_TOKENS_PER_S_PER_CARD * CARDS,
                **extra,
            }
        ]
    )


def _groups() -> pd.DataFrame:
    return pd.DataFrame([group("v3", H100, CARDS)])


def test_the_throughput_mfu_of_a_mixture_counts_its_active_parameters():
    result = evaluate_pools(_groups(), _pools(model_active_params=V3_ACTIVE)).loc["v3"]
    # 6 × 37e9 × 1,543.2 tokens/s per card ÷ 989e12 FLOP/s = 0.3464
    expected = K * V3_ACTIVE * V3_TOKENS_PER_S_PER_CARD / 989e12
    assert result["mfu"] == pytest.approx(expected, rel=1e-12)
    assert result["mfu"] == pytest.approx(0.3464, abs=1e-4)
    assert result["mfu_basis"] == "job_throughput"


def test_the_same_throughput_on_the_total_is_an_impossible_mfu():
    # 6 × 671e9 × 1,543.2 ÷ 989e12 = 6.28 > 1: why the count must be the active one.
    with pytest.raises(EngineInputError, match="MFU must be in"):
        evaluate_pools(_groups(), _pools())


def test_a_dense_pool_is_answered_exactly_as_before():
    groups = pd.DataFrame([group("a", H100, 64), group("b", H100, 512)])
    pools = pd.DataFrame(
        [
            {"pool_id": "a", "model_params": 70e9, "job_tokens_per_s": 60_000.0},
            {"pool_id": "b", "model_params": 175e9, "fabric": "infiniband"},
        ]
    )
    before = evaluate_pools(groups, pools)
    nan_columns = pools.assign(model_active_params=np.nan, model_replicated_params=np.nan)
    assert_frame_equal(evaluate_pools(groups, nan_columns), before, check_exact=True)
    as_dense = pools.assign(
        model_active_params=pools["model_params"], model_replicated_params=pools["model_params"]
    )
    assert_frame_equal(evaluate_pools(groups, as_dense), before, check_exact=True)


def _job(**counts: float):
    """A 1,024-card job of 128 nodes, 400 Gbit/s per card, at 400 TFLOP/s per card."""
    return modeled_scaling_arrays(
        1024,
        400.0,
        8,
        nvlink_bidir_gbs=900.0,
        inter_node_gbit_s_per_card=400.0,
        fabric_efficiency=1.0,
        tensor_parallel=8,
        pipeline_parallel=4,
        model_hidden_size=7168,
        gradient_bytes_per_param=2.0,
        **counts,
    )


def test_the_gradient_all_reduce_carries_the_replicated_weights():
    replicated = 17.1e9  # DeepSeek-V3 less its routed experts, counted from its shape
    moe = _job(model_params=V3_TOTAL, model_active_params=V3_ACTIVE,
               model_replicated_params=replicated)  # fmt: skip
    # t = 8, p = 4, d = 1,024 / 32 = 32: each card reduces 17.1e9 × 2 B / 32 = 1.069 GB over
    # a ring of 32 at 400 Gbit/s = 50 GB/s: 2 × 31/32 × 1.069e9 / 50e9 = 41.4 ms.
    expected = 2.0 * 31.0 / 32.0 * (replicated * 2.0 / 32.0) / 50e9
    assert moe.dp_comm_s == pytest.approx(expected, rel=1e-12)
    assert ring_allreduce_s(replicated * 2.0 / 32.0, 32, 50e9) == pytest.approx(moe.dp_comm_s)


def test_compute_and_tensor_traffic_follow_the_active_parameters():
    moe = _job(model_params=V3_TOTAL, model_active_params=V3_ACTIVE)
    dense_total = _job(model_params=V3_TOTAL)
    dense_active = _job(model_params=V3_ACTIVE)
    assert moe.compute_s == pytest.approx(dense_total.compute_s * V3_ACTIVE / V3_TOTAL)
    assert moe.compute_s == pytest.approx(dense_active.compute_s, rel=1e-12)
    assert moe.tp_comm_s == pytest.approx(dense_active.tp_comm_s, rel=1e-12)
    # No replicated count given: the gradient is the total's, as for a dense model.
    assert moe.dp_comm_s == pytest.approx(dense_total.dp_comm_s, rel=1e-12)


def test_a_pool_without_the_replicated_count_reduces_every_weight():
    groups = pd.DataFrame([group("p", H100, 1024)])
    base = {"pool_id": "p", "model_params": V3_TOTAL, "model_active_params": V3_ACTIVE}
    pools = pd.DataFrame([base, {**base, "pool_id": "q", "model_replicated_params": 17.1e9}])
    groups = pd.concat([groups, pd.DataFrame([group("q", H100, 1024)])], ignore_index=True)
    result = evaluate_pools(groups, pools)
    # Less gradient traffic exposes less communication: q scales better than p.
    assert result.loc["q", "dp_exposed_share"] < result.loc["p", "dp_exposed_share"]
    assert result.loc["q", "scaling_model"] > result.loc["p", "scaling_model"]


# --- the tensor-parallel cap: the card's NVLink domain ---------------------------------------


def test_an_unknown_domain_leaves_the_node_as_the_cap():
    groups = pd.DataFrame([group("n", H100, 256, cards_per_node=4)])
    pools = pd.DataFrame([{"pool_id": "n"}])
    before = evaluate_pools(groups, pools)
    with_nan = evaluate_pools(groups.assign(nvlink_domain_cards=np.nan), pools)
    assert_frame_equal(with_nan, before, check_exact=True)
    assert before.loc["n", "tensor_parallel"] == 4  # min(8, the 4-card node)


def test_a_known_domain_lets_tensor_parallelism_span_it_on_nvlink():
    # GB200 NVL72: trays of 4 GPUs, 72 in one NVLink domain (nvidia.com/en-us/data-center/
    # gb200-nvl72/): the default t = 8 no longer stops at the tray, and stays on NVLink.
    groups = pd.DataFrame([group("r", H100, 288, cards_per_node=4, nvlink_domain_cards=72.0)])
    row = evaluate_pools(groups, pd.DataFrame([{"pool_id": "r"}])).loc["r"]
    assert row["tensor_parallel"] == 8 and not row["tp_crosses_nodes"]
    entered = evaluate_pools(groups, pd.DataFrame([{"pool_id": "r", "tensor_parallel": 16}]))
    assert not entered.loc["r", "tp_crosses_nodes"]  # 16 ≤ 72: NVLink still
    node_only = evaluate_pools(
        groups.drop(columns="nvlink_domain_cards"),
        pd.DataFrame([{"pool_id": "r", "tensor_parallel": 16}]),
    )
    assert node_only.loc["r", "tp_crosses_nodes"]  # 16 > 4 without the domain: the fabric
    assert entered.loc["r", "tp_comm_share"] < node_only.loc["r", "tp_comm_share"]


def test_the_split_strategy_caps_each_card_model_at_its_own_domain():
    groups = pd.DataFrame(
        [
            group("m", H100, 64, cards_per_node=4, nvlink_domain_cards=72.0),
            group("m", {**H100, "accelerator": "other"}, 64, cards_per_node=4),
        ]
    )
    pools = pd.DataFrame([{"pool_id": "m", "strategy": "split_homogeneous"}])
    domain = evaluate_pools(groups, pools).loc["m"]
    node_only = evaluate_pools(groups.drop(columns="nvlink_domain_cards"), pools).loc["m"]
    # The NVL72 half runs t = 8 on NVLink instead of t = 4 (its job's shape changes, so what
    # the split delivers does); with every domain unknown both halves stop at the node.
    column = "delivered_pflops_split_homogeneous"
    assert domain[column] != pytest.approx(node_only[column], rel=1e-9)
    same = groups.assign(nvlink_domain_cards=4.0)  # a domain of the node: as node-only
    assert evaluate_pools(same, pools).loc["m", column] == node_only[column]
