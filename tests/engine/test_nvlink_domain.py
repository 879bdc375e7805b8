"""The card's NVLink domain (issues 27 and 32): tensor and expert parallelism may span the
cards that share NVLink (72 on a GB200/GB300 NVL72 rack), the fabric carries what goes beyond;
an unknown domain leaves today's node-sized answers untouched."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.capacity import TrainingWorkload, plan_capacity
from engine.memory import ModelShape
from engine.moe import MoeShape, total_params
from engine.parallelism import FixedParallelism, no_split_reason, scale_up_cards

# H100 SXM5 as the catalog gives it (NVIDIA H100 datasheet: 989 dense BF16 TFLOPS, 80 GB,
# 3.35 TB/s, 700 W, NVLink 900 GB/s); NDR InfiniBand 400 Gbit/s per card.
H100 = {
    "accelerator": "H100 SXM5 80GB",
    "vendor": "NVIDIA",
    "dense_bf16_tflops": 989,
    "dense_fp8_tflops": 1979,
    "memory_gb": 80,
    "memory_bandwidth_tbs": 3.35,
    "tdp_w": 700,
    "intra_node_interconnect_gbs": 900,
    "inter_node_bandwidth_gbps_per_card": 400,
    "fabric": "infiniband",
    "effective_time": 1.0,
    "utilization": 1.0,
}
# Llama-3-70B's shape (meta-llama/Meta-Llama-3-70B config.json).
LLAMA_70B = ModelShape(80, 8192, 64, kv_heads=8, ffn_hidden=28672, vocab=128256, mlp="gated")
DENSE = TrainingWorkload(
    params=float(LLAMA_70B.params),
    shape=LLAMA_70B,
    tokens=1e12,
    seq_len=8192,
    global_batch_sequences=512,
)
# Jiang et al. 2024, "Mixtral of Experts" (arXiv:2401.04088) Table 1.
MIXTRAL = MoeShape(
    layers=32, hidden_size=4096, attention_heads=32, kv_heads=8, head_dim=128,
    vocab_size=32000, ffn_hidden_size=14336, experts=8, experts_per_token=2,
)  # fmt: skip
MOE = TrainingWorkload(
    params=total_params(MIXTRAL), tokens=1e12, moe=MIXTRAL, seq_len=4096,
    global_batch_sequences=1024,
)  # fmt: skip
COMPARED = ("days", "tp", "pp", "vp", "cp", "dp", "ep", "micro_batch", "scaling", "mfu")


def _plan(workload: TrainingWorkload, cards: int, **option: float) -> pd.Series:
    return plan_capacity(workload, pd.DataFrame([{**H100, "cards": cards, **option}])).iloc[0]


def _same(left: pd.Series, right: pd.Series) -> None:
    for column in COMPARED:
        assert left[column] == right[column], column


def test_the_reach_is_the_domain_where_known_else_the_node():
    reach = scale_up_cards([8, 4, 8, 4], [math.nan, 72, 8, 0])
    # NaN (unknown) and anything below one card fall back to the node.
    assert reach.tolist() == [8, 72, 8, 4]
    assert reach.dtype == np.int64


@pytest.mark.parametrize(("workload", "cards"), [(DENSE, 512), (MOE, 64)])
@pytest.mark.parametrize("per_node", [4, 8])
def test_an_unknown_domain_plans_exactly_as_without_the_column(workload, cards, per_node):
    without = _plan(workload, cards, cards_per_node=per_node)
    unknown = _plan(workload, cards, cards_per_node=per_node, nvlink_domain_cards=math.nan)
    the_node = _plan(workload, cards, cards_per_node=per_node, nvlink_domain_cards=per_node)
    _same(without, unknown)
    _same(without, the_node)


def test_an_nvl72_rack_of_four_card_trays_plans_as_a_node_of_72():
    # GB200 NVL72: 18 trays of 4 GPUs, one NVLink domain; the reach, not the tray, matters.
    trays = _plan(DENSE, 576, cards_per_node=4, nvlink_domain_cards=72)
    one_node = _plan(DENSE, 576, cards_per_node=72)
    _same(trays, one_node)


def test_a_fixed_tp_beyond_the_node_fits_inside_the_domain():
    wide = TrainingWorkload(
        params=DENSE.params, shape=LLAMA_70B, tokens=1e12, seq_len=8192,
        global_batch_sequences=512, parallelism=FixedParallelism(tp=16),
    )  # fmt: skip
    on_hgx = _plan(wide, 512, cards_per_node=8)
    assert not on_hgx["feasible"]
    assert "exceeds 8 cards per node" in on_hgx["reason"]
    # 16 does not divide 72 (an NVL72 rack holds four whole TP-16 groups and 8 idle cards).
    assert "tp_degree" in FixedParallelism(tp=16).split_errors(
        cards=576, cards_per_node=4, nvlink_domain_cards=72
    )
    assert (
        FixedParallelism(tp=36).split_errors(cards=576, cards_per_node=4, nvlink_domain_cards=72)
        == {}
    )
    on_rack = _plan(wide, 512, cards_per_node=4, nvlink_domain_cards=16)
    assert on_rack["feasible"], on_rack["reason"]
    assert on_rack["tp"] == 16


def test_messages_name_the_domain_only_when_it_is_known():
    errors = FixedParallelism(tp=144).split_errors(
        cards=None, cards_per_node=4, nvlink_domain_cards=72
    )
    assert errors["tp_degree"] == (
        "Must divide the 72 cards of one NVLink domain (tensor parallelism stays on NVLink)."
    )
    reason = no_split_reason(
        576, 4, layers=80, heads=64, global_batch=512, micro_batch=1,
        fixed=FixedParallelism(tp=144), nvlink_domain_cards=72,
    )  # fmt: skip
    assert reason == "tp=144 exceeds 72 cards in one NVLink domain"


def test_expert_parallelism_inside_the_domain_leaves_the_fabric():
    fixed = FixedParallelism(tp=4, pp=1, cp=1, vp=1, ep=8)
    workload = TrainingWorkload(
        params=MOE.params, tokens=1e12, moe=MIXTRAL, seq_len=4096,
        global_batch_sequences=1024, parallelism=fixed,
    )  # fmt: skip
    # ep = 8 of tp = 4 ranks is 32 cards: four nodes of 8, one NVL72 domain.
    nodes = _plan(workload, 64, cards_per_node=8)
    rack = _plan(workload, 64, cards_per_node=8, nvlink_domain_cards=72)
    assert nodes["ep_share"] > 0 and nodes["fabric_share"] > 0
    assert rack["ep_share"] < nodes["ep_share"]
    assert rack["fabric_share"] < nodes["fabric_share"]
    assert rack["days"] < nodes["days"]


# Domains and the multiples of them a larger one can be: every TP degree that divides the
# smaller domain divides the larger, so the larger one never loses a split.
DOMAINS = st.sampled_from([1, 2, 4, 8, 9, 18, 36])


@settings(max_examples=12)
@given(
    small=DOMAINS,
    factor=st.sampled_from([1, 2, 4, 8]),
    workload=st.sampled_from([DENSE, MOE]),
    cards=st.sampled_from([64, 144, 512]),
)
def test_a_larger_domain_never_plans_more_days(small, factor, workload, cards):
    larger = small * factor
    small_plan = _plan(workload, cards, cards_per_node=4, nvlink_domain_cards=small)
    large_plan = _plan(workload, cards, cards_per_node=4, nvlink_domain_cards=larger)
    if small_plan["feasible"]:
        assert large_plan["feasible"]
        assert large_plan["days"] <= small_plan["days"] * (1 + 1e-12)
