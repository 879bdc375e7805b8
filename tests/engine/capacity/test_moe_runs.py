"""Mixture-of-experts training through the planner: DeepSeek-V3's published run, a dense model
as a one-expert mixture, and what expert parallelism shards and sends."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from engine.capacity import TrainingWorkload, plan_capacity
from engine.memory import ModelShape
from engine.moe import MoeShape, active_params, total_params
from engine.moe_runs import load_moe_runs, model_moe_run
from engine.moe_training import MoeTraining, all_to_all_s, remote_nodes_per_token

RUNS = {run["id"]: run for run in load_moe_runs()}
RUNNING = {"effective_time": 1.0, "utilization": 1.0}
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
    **RUNNING,
}
# Jiang et al. 2024, "Mixtral of Experts" (arXiv:2401.04088) Table 1.
MIXTRAL = MoeShape(
    layers=32, hidden_size=4096, attention_heads=32, kv_heads=8, head_dim=128,
    vocab_size=32000, ffn_hidden_size=14336, experts=8, experts_per_token=2,
)  # fmt: skip


def _plan(workload: TrainingWorkload, cards: int) -> pd.Series:
    return plan_capacity(workload, pd.DataFrame([{**H100, "cards": cards}])).iloc[0]


def test_deepseek_v3_gpu_hours_per_trillion_tokens_within_15_percent():
    # DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv:2412.19437) §1, Table 1: 180K
    # H800 GPU-hours per trillion tokens (3.7 days on 2,048 H800), FP8, DualPipe, MTP depth 1.
    row = model_moe_run(RUNS["deepseek-v3-pretraining-2048-h800"])
    assert row["published"] == 180_000
    assert row["modeled"] == pytest.approx(154_600, rel=0.01)  # today's model: −14.1 %
    assert abs(row["error_percent"]) <= 15.0
    # 2,048 cards × 24 h × days = GPU-hours: 180K is 3.66 days; the model runs 3.1.
    assert row["modeled"] / (2048 * 24) == pytest.approx(3.15, abs=0.05)
    # Expert parallelism is the search's own choice, beyond one node of 8 cards.
    assert row["split"]["ep"] > 8 and row["split"]["dp"] % row["split"]["ep"] == 0
    assert row["total_params"] == pytest.approx(671e9, rel=0.001)
    assert row["active_params"] == pytest.approx(37.55e9, rel=0.001)


@pytest.mark.xfail(
    strict=True,
    reason="held back: DeepSeek-V2 (arXiv:2405.04434, 172.8K H800 GPU-hours per trillion "
    "tokens, BF16) models ~30 % faster than it ran; the per-card MoE compute is optimistic "
    "(fine-grained experts' GEMMs, routing kernels) and its card count is not published",
)
def test_held_back_deepseek_v2_within_15_percent():
    row = model_moe_run(RUNS["deepseek-v2-pretraining-h800"])
    assert abs(row["error_percent"]) <= 15.0, row


def test_every_moe_run_has_a_role_a_source_and_its_figure():
    assert {run["role"] for run in RUNS.values()} == {"check", "held_back"}
    for run in RUNS.values():
        assert run["source"]["citation"].strip()
        assert run["published"]["kind"] == "gpu_hours_per_trillion_tokens"


def _dense(shape: MoeShape) -> ModelShape:
    return ModelShape(
        shape.layers, shape.hidden_size, shape.attention_heads, kv_heads=shape.kv_heads,
        ffn_hidden=shape.ffn_hidden_size, vocab=shape.vocab_size, mlp="gated",
    )  # fmt: skip


def test_a_dense_model_as_a_one_expert_mixture_plans_the_same_days():
    # Llama-3-8B's shape (meta-llama/Meta-Llama-3-8B config.json) as MoeShape(experts=1).
    llama = MoeShape(32, 4096, 32, 8, 128, 128256, 14336)
    dense = _dense(llama)
    common = {"tokens": 1e12, "seq_len": 4096, "global_batch_sequences": 1024}
    as_dense = _plan(TrainingWorkload(params=float(dense.params), shape=dense, **common), 64)
    as_moe = _plan(TrainingWorkload(params=total_params(llama), moe=llama, **common), 64)
    assert total_params(llama) == dense.params
    assert as_moe["days"] == pytest.approx(as_dense["days"], rel=1e-9)
    assert as_moe["memory_per_card_bytes"] == pytest.approx(as_dense["memory_per_card_bytes"])
    assert as_moe["ep"] == 1


def test_mixtral_counts_active_flops_and_holds_every_expert():
    workload = TrainingWorkload(
        params=total_params(MIXTRAL), tokens=1e12, moe=MIXTRAL, seq_len=4096,
        global_batch_sequences=1024,
    )  # fmt: skip
    # k·N·D with N the 12.9B active parameters, not the 46.7B total.
    assert workload.flops == pytest.approx(6 * active_params(MIXTRAL) * 1e12)
    row = _plan(workload, 64)
    assert row["feasible"]
    # Model state: 16 bytes per parameter of all 46.7B, sharded, never below the total ÷ cards.
    assert row["state_bytes"] == pytest.approx(16 * total_params(MIXTRAL), rel=1e-6)


def test_more_experts_per_token_never_plans_fewer_days():
    days = []
    for k in (1, 2, 4, 8):
        shape = dataclasses.replace(MIXTRAL, experts_per_token=k)
        workload = TrainingWorkload(
            params=total_params(shape), tokens=1e12, moe=shape, seq_len=4096,
            global_batch_sequences=1024,
        )  # fmt: skip
        days.append(float(_plan(workload, 64)["days"]))
    assert days == sorted(days) and days[-1] > days[0]


def test_all_to_all_by_hand_inside_a_node_and_across_nodes():
    moe = MoeTraining(MIXTRAL)
    links = (100e9, 10e9, 0.0, 8.0)  # NVLink, fabric bytes/s, latency, cards per node
    # ep = 8 on one node, tp = 1: each all-to-all sends 7/8 of tokens × k × h values; forward
    # BF16 dispatch + combine, backward both again: 4 × 2 bytes per value.
    one_node = all_to_all_s(moe, 1000, 8, 1, links, passes=3, fp8=False)
    by_hand = 1000 * 2 * 4096 * 7 / 8 * (4 * 2) / 100e9 * 32
    assert float(one_node) == pytest.approx(by_hand)
    # ep = 8 over 4 nodes of tp = 4: a token goes once to each remote node its experts sit on,
    # 3 · (1 − (3/4)²) = 1.3125 nodes on average, over the fabric.
    assert float(remote_nodes_per_token(4, 2)) == pytest.approx(1.3125)
    across = all_to_all_s(moe, 1000, 8, 4, links, passes=3, fp8=False)
    assert float(across) == pytest.approx(1000 * 4096 * 1.3125 * 8 / 10e9 * 32)
    # FP8 dispatch halves the forward dispatch bytes: 1 + 2 + 2 + 2 instead of 8 per value.
    fp8 = all_to_all_s(moe, 1000, 8, 1, links, passes=3, fp8=True)
    assert float(fp8) == pytest.approx(by_hand * 7 / 8)
    assert float(all_to_all_s(moe, 1000, 1, 1, links, passes=3, fp8=False)) == 0.0


def test_the_split_grid_tries_each_expert_parallel_degree_inside_dp():
    from engine.parallelism import enumerate_splits

    splits = enumerate_splits(64, 8, layers=32, heads=32, global_batch=1024, experts=8)
    assert set(splits["ep"]) == {1, 2, 4, 8}
    assert (splits["dp"] % splits["ep"] == 0).all()
    dense = enumerate_splits(64, 8, layers=32, heads=32, global_batch=1024)
    assert set(dense["ep"]) == {1}
    assert len(splits[splits["ep"] == 1]) == len(dense)


def test_expert_parallelism_shards_the_experts_state_by_hand():
    from engine.capacity.options import prepare_options
    from engine.capacity.splits import evaluate_splits
    from engine.parallelism import FixedParallelism

    def state(ep: int) -> float:
        workload = TrainingWorkload(
            params=total_params(MIXTRAL), tokens=1e12, moe=MIXTRAL, seq_len=4096,
            global_batch_sequences=1024, zero_stage=0,
            parallelism=FixedParallelism(tp=1, pp=1, cp=1, vp=1, ep=ep),
        )  # fmt: skip
        frame = prepare_options(pd.DataFrame([{**H100, "cards": 64}]), workload)
        splits = evaluate_splits(workload, frame, [64])
        return float(splits[splits["micro_batch"] == 1]["state_bytes_per_card"].iloc[0])

    moe = MoeTraining(MIXTRAL)
    # ZeRO 0: 16 bytes per parameter of the replicated weights and 1/ep of the experts.
    assert state(1) == pytest.approx(16 * total_params(MIXTRAL))
    assert state(8) == pytest.approx(16 * (moe.replicated_params + moe.routed_params / 8))
    assert moe.routed_params == 32 * 8 * 3 * 4096 * 14336
