"""Parallel scaling: speed-up tables and the communication/bubble model (docs: Scaling)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.scaling import (
    estimate_hidden_size,
    modeled_scaling,
    modeled_scaling_arrays,
    pipeline_bubble_fraction,
    ring_allreduce_s,
    scaling_from_speedup,
    speedup_efficiency,
)

H100 = {"peak_tflops": 989.0, "mfu": 0.5, "nvlink_bidir_gbs": 900.0}


@pytest.mark.parametrize(("p", "m"), [(1, 8), (4, 32), (8, 8), (16, 64)])
def test_1f1b_bubble_fraction(p, m):
    assert float(pipeline_bubble_fraction(p, m)) == pytest.approx((p - 1) / (m + p - 1))


def test_pipeline_only_job_loses_exactly_the_bubble():
    # One card per stage, no tensor or data parallel: only the bubble remains.
    result = modeled_scaling(
        4,
        **H100,
        cards_per_node=8,
        tensor_parallel=1,
        pipeline_parallel=4,
        microbatches_per_replica=12,
    )
    assert result.data_parallel == 1
    assert result.tp_comm_s == 0 and result.dp_comm_s == 0
    assert result.scaling == pytest.approx(1 - (4 - 1) / (12 + 4 - 1))


def test_single_card_scales_perfectly():
    assert modeled_scaling(1, **H100).scaling == 1.0


def test_ring_allreduce_time():
    assert float(ring_allreduce_s(1e9, 4, 1e9)) == pytest.approx(2 * 3 / 4)
    assert float(ring_allreduce_s(1e9, 1, 1e9)) == 0


def test_data_parallel_time_is_the_ring_formula_over_the_card_nic():
    result = modeled_scaling(
        1024,
        **H100,
        tensor_parallel=8,
        pipeline_parallel=4,
        model_params=70e9,
        inter_node_gbit_s_per_card=400,
        fabric="infiniband",
        gradient_bytes_per_param=2,
    )
    d = 1024 / 32
    bytes_per_card = 70e9 * 2 / 32
    expected = 2 * (d - 1) / d * bytes_per_card / (400e9 / 8 * 0.9)
    assert result.dp_comm_s == pytest.approx(expected)


def test_overlap_share_hides_data_parallel_traffic():
    hidden = modeled_scaling(2048, **H100, dp_overlap_share=1.0)
    exposed = modeled_scaling(2048, **H100, dp_overlap_share=0.0)
    assert hidden.dp_exposed_s == 0
    assert exposed.dp_exposed_s == pytest.approx(exposed.dp_comm_s)
    assert hidden.scaling > exposed.scaling


def test_tensor_parallel_across_nodes_uses_the_fabric_and_costs_more():
    inside = modeled_scaling(1024, **H100, cards_per_node=8, tensor_parallel=8)
    across = modeled_scaling(1024, **H100, cards_per_node=8, tensor_parallel=16)
    assert not inside.tp_crosses_nodes and across.tp_crosses_nodes
    assert across.tp_comm_s > inside.tp_comm_s
    assert across.scaling < inside.scaling


def test_default_tensor_parallel_is_capped_at_the_node():
    assert modeled_scaling(64, **H100, cards_per_node=4).tensor_parallel == 4
    assert modeled_scaling(2, **H100, cards_per_node=8).tensor_parallel == 2


def test_faster_fabric_scales_better():
    slow = modeled_scaling(4096, **H100, fabric="ethernet", inter_node_gbit_s_per_card=100)
    fast = modeled_scaling(4096, **H100, fabric="infiniband", inter_node_gbit_s_per_card=400)
    assert fast.scaling > slow.scaling


def test_hidden_size_estimate_matches_gpt3():
    assert float(estimate_hidden_size(175e9)) == pytest.approx(12_288, rel=0.01)


def test_global_batch_sets_the_micro_batches():
    result = modeled_scaling(
        256,
        **H100,
        tensor_parallel=8,
        pipeline_parallel=4,
        global_batch_tokens=4096 * 64,
        micro_batch_tokens=4096,
    )
    assert result.data_parallel == 8
    assert result.microbatches_per_replica == 8


@given(
    cards=st.lists(st.integers(1, 100_000), min_size=1, max_size=20),
    tflops=st.floats(10, 5000),
    node=st.sampled_from([1, 2, 4, 8, 16]),
    params=st.floats(1e8, 2e12),
    overlap=st.floats(0, 1),
)
def test_modeled_scaling_is_a_factor_and_falls_with_job_size(cards, tflops, node, params, overlap):
    ordered = np.sort(np.asarray(cards, dtype=float))
    result = modeled_scaling_arrays(
        ordered, tflops, node, model_params=params, dp_overlap_share=overlap
    )
    assert ((result.scaling > 0) & (result.scaling <= 1)).all()
    # Beyond one node the job shape is fixed, so more replicas only add all-reduce time.
    beyond = ordered >= node * 4
    assert (np.diff(result.scaling[beyond]) <= 1e-12).all()


def test_seed_004_speedup_of_90_percent_at_1000_cards():
    # Throughput 900x the per-card rate at 1,000 cards (per-card rate measured on 8 cards).
    table = {8: 8.0, 1000: 900.0}
    assert scaling_from_speedup(table, 1000) == pytest.approx(0.90)


def test_speedup_table_interpolates_and_holds_the_ends():
    table = {8: 80.0, 64: 600.0, 512: 4096.0}  # efficiencies 1.0, 0.9375, 0.8
    assert scaling_from_speedup(table, 64) == pytest.approx(0.9375)
    midway = 0.9375 + (0.8 - 0.9375) * (288 - 64) / (512 - 64)
    assert scaling_from_speedup(table, 288) == pytest.approx(midway)
    assert scaling_from_speedup(table, 4096) == pytest.approx(0.8)
    assert scaling_from_speedup(table, 2) == pytest.approx(1.0)


def test_superlinear_measurements_are_capped_at_one():
    assert scaling_from_speedup({8: 8.0, 16: 17.0}, 16) == 1.0


def test_vectorised_tables_keep_pools_apart():
    pools = np.array([0, 0, 2, 2, 2])
    cards = np.array([8, 80, 16, 32, 64])
    throughput = np.array([8.0, 40.0, 16.0, 24.0, 32.0])
    efficiency, has_table = speedup_efficiency(
        pools, cards, throughput, [0, 1, 2, 2], [80, 80, 32, 48]
    )
    assert has_table.tolist() == [True, False, True, True]
    assert efficiency[0] == pytest.approx(0.5)
    assert np.isnan(efficiency[1])
    assert efficiency[2] == pytest.approx(0.75)
    assert efficiency[3] == pytest.approx((0.75 + 0.5) / 2)


def test_speedup_table_rejects_repeated_sizes():
    with pytest.raises(ValueError, match="repeats"):
        speedup_efficiency([0, 0], [8, 8], [1.0, 2.0], [0], [8])
