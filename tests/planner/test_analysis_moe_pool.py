"""Analyses of pools that name their catalog model (issue #32): a mixture of experts is scaled
on its active parameters (compute, tensor-parallel traffic) and on the weights replicated over
data parallelism (the gradient all-reduce), and its row says which counts it used. A dense
named pool is analysed as if its count were entered; unnamed pools as before."""

from __future__ import annotations

import math

import pytest
from pandas.testing import assert_frame_equal

from engine.evaluate import evaluate_pools
from engine.model_catalog import find_model
from engine.moe_training import MoeTraining
from inventory.frames import node_group_frame, pool_frame
from inventory.models import Cluster
from tests.support.builders import add_h100_pool, alpha_cluster
from tests.support.inline import finished_analysis

pytestmark = pytest.mark.django_db

# Scoring the same job two ways changes these, and nothing else of the row's numbers would.
SCALING_COLUMNS = ("scaling", "scaling_model", "tp_comm_share", "dp_exposed_share")


def _pool_rows(analysis) -> dict[str, dict]:
    return {row["pool"]: row for row in analysis.results["pools"]}


def test_a_named_mixture_is_scaled_on_its_active_and_replicated_counts():
    cluster = alpha_cluster()
    v3 = find_model("DeepSeek-V3")
    total, active = v3.total_params(), v3.active_params()
    replicated = MoeTraining(v3.moe_shape()).replicated_params
    # 64 H100s: t = 8 (the node), p = 4, d = 2: the same job shape for both pools.
    add_h100_pool(cluster, "v3", nodes=8, model_name="DeepSeek-V3")
    add_h100_pool(cluster, "as-dense", nodes=8, assumptions={"model_params": total})
    rows = _pool_rows(finished_analysis("cluster", cluster.pk))
    moe, dense = rows["v3"], rows["as-dense"]
    assert (moe["tensor_parallel"], moe["pipeline_parallel"], moe["data_parallel"]) == (8, 4, 2)
    assert (dense["tensor_parallel"], dense["data_parallel"]) == (8, 2)
    # Exposed all-reduce ÷ compute: the all-reduce carries the replicated weights, compute is
    # the active ones' (the dense reading: the total both times), so the share is
    # × (replicated / total) ÷ (active / total) = × replicated / active (≈ 17.1 / 37.6).
    ratio = moe["dp_exposed_share"] / dense["dp_exposed_share"]
    assert ratio == pytest.approx(replicated / active, rel=1e-9)
    # Tensor-parallel bytes per step ∝ N / hidden and compute ∝ N, hidden estimated from N
    # (∛(128 N / 12)): the share goes as ∛(total / active).
    tp_ratio = moe["tp_comm_share"] / dense["tp_comm_share"]
    assert tp_ratio == pytest.approx(math.cbrt(total / active), rel=1e-9)
    assert "model_params" not in moe["scaling_defaults"]
    assert moe["training_params"] == (
        f"active {active / 1e9:.3g} B of {total / 1e9:.3g} B, catalog DeepSeek-V3; "
        f"gradients of {replicated / 1e9:.3g} B replicated over data parallelism"
    )
    assert moe["training_params"].startswith("active 37.6 B of 671 B, catalog DeepSeek-V3")
    assert dense["training_params"] is None


def test_a_named_dense_model_is_analysed_as_its_entered_count():
    cluster = alpha_cluster()
    llama = find_model("Llama-3.1-70B")
    add_h100_pool(cluster, "named", nodes=8, model_name="Llama-3.1-70B")
    add_h100_pool(cluster, "entered", nodes=8, assumptions={"model_params": llama.params})
    rows = _pool_rows(finished_analysis("cluster", cluster.pk))
    named, entered = rows["named"], rows["entered"]
    assert (
        named["training_params"] == f"all {llama.params / 1e9:.3g} B active, catalog Llama-3.1-70B"
    )
    differs = {"pool_id", "pool", "training_params"}
    keys = set(named) - differs
    assert keys == set(entered) - differs
    assert {key: named[key] for key in keys} == {key: entered[key] for key in keys}


def test_unnamed_pools_of_the_demo_fleet_are_answered_as_before(demo_fleet):
    """Before: the frames as they were (no NVLink domain column, no model counts); after:
    today's frames. The demo's cards have 8-card domains on 8-card nodes, or none."""
    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        pools = pool_frame(cluster_id, None, 720.0)
        groups = node_group_frame(pools["pool_id"].tolist())
        assert not {"model_name", "model_active_params", "model_replicated_params"} & set(pools)
        before = evaluate_pools(groups.drop(columns="nvlink_domain_cards"), pools)
        assert_frame_equal(evaluate_pools(groups, pools), before, check_exact=True)
    analysis = finished_analysis("fleet")
    assert all("training_params" not in row for row in analysis.results["pools"])


def test_naming_a_mixture_changes_only_its_own_pools_row(demo_fleet):
    before = _pool_rows(finished_analysis("fleet"))
    cluster = Cluster.objects.get(name="train-hetero")
    add_h100_pool(cluster, "v3-pool", nodes=8, model_name="DeepSeek-V3")
    after = _pool_rows(finished_analysis("fleet"))
    assert set(after) - set(before) == {"v3-pool"}
    for name, row in before.items():  # the demo's pools, one of them beside the new one
        unchanged = {key: value for key, value in after[name].items() if key != "training_params"}
        same_money = {"total_cost", "idle_cost", "compute_cost", "energy_cost"}
        if after[name]["cluster"] == "train-hetero":  # its opex is now spread over more cards
            unchanged = {k: v for k, v in unchanged.items() if not _money(k, same_money)}
            row = {k: v for k, v in row.items() if not _money(k, same_money)}
        assert unchanged == row, name
        assert after[name].get("training_params") is None
    assert after["v3-pool"]["training_params"].startswith("active 37.6 B of 671 B")
    for column in SCALING_COLUMNS:
        assert after["v3-pool"][column] is not None


def _money(key: str, money: set[str]) -> bool:
    return key in money or "cost" in key or "money" in key
