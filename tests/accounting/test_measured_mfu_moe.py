"""Measured MFU in a pool that names a mixture of experts (issue #32): a job's throughput MFU
is scored on the model's active parameters, as the modeled MFU is; a dense-named pool and a job
that trains another model are scored on their own `model_params` as before."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from accounting.selectors.measured import with_active_params
from inventory.models import Cluster
from inventory.pool_models import PoolModelCounts, model_counts
from planner import analysis as engine_bridge
from planner.models import Analysis
from tests.support.alpha_usage import DAY_END, DAY_START
from tests.support.builders import add_h100_pool

pytestmark = pytest.mark.django_db

PEAK_FLOPS = 8 * 989e12  # one job on 8 H100 SXM5 (989 dense BF16 TFLOP/s, the card catalog)
TOKENS_PER_S = 20_000.0
HEADER = "cluster,job_id,cards,start,end,state,accelerator_model,model_params,tokens_per_s\n"


def one_job(model_params: float) -> str:
    return (
        f"{HEADER}alpha,t-1,8,2024-03-01T00:00:00Z,2024-03-02T00:00:00Z,completed,h100,"
        f"{model_params:g},{TOKENS_PER_S:g}\n"
    )


def throughput_mfu(params: float) -> float:
    return 6 * params * TOKENS_PER_S / PEAK_FLOPS


def analyse(cluster: Cluster) -> dict[str, Any]:
    """The cluster's analysis over alpha's day (as tests/accounting/test_analysis.py runs it)."""
    analysis = Analysis.objects.create(
        scope="cluster", object_id=cluster.pk, period_start=DAY_START, period_end=DAY_END
    )
    rows, inputs = engine_bridge.evaluate_cluster(analysis, cluster.pk)
    part = SimpleNamespace(cluster_id=cluster.pk, pool_rows=rows, inputs=inputs)
    results, _ = engine_bridge.summarise(analysis, [part])
    return results


def counts_of(name: str) -> PoolModelCounts:
    counts = model_counts(name)
    assert counts is not None
    return counts


def name_model(cluster: Cluster, model_name: str) -> None:
    pool = cluster.pools.get()
    pool.model_name = model_name
    pool.save()


def test_a_deepseek_v3_pool_scores_its_jobs_on_the_active_parameters(
    alpha: Cluster, import_text: Callable[..., Any]
) -> None:
    name_model(alpha, "DeepSeek-V3")
    import_text(alpha, one_job(671e9), kind="csv")
    active = counts_of("DeepSeek-V3").active  # 37.6 B of 671 B, counted from the shape
    assert 37e9 < active < 38e9
    pool = analyse(alpha)["pools"][0]
    # On the 671 B total it would be 10.2, dropped as > 1 and left to the modeled default.
    assert pool["mfu"] == pytest.approx(throughput_mfu(active))
    assert pool["mfu_provenance"] == "measured"


@pytest.mark.parametrize(
    "model_name",
    [
        "Llama-3-8B",  # a dense-named pool: model_params as before
        "DeepSeek-V3",  # another model (a 7 B fine-tune) on an MoE pool keeps its own count
    ],
)
def test_a_job_is_scored_on_its_own_count_unless_its_pool_names_an_moe_it_trains(
    alpha: Cluster, import_text: Callable[..., Any], model_name: str
) -> None:
    name_model(alpha, model_name)
    import_text(alpha, one_job(7e9), kind="csv")
    pool = analyse(alpha)["pools"][0]
    assert pool["mfu"] == pytest.approx(throughput_mfu(7e9))
    assert pool["mfu_provenance"] == "measured"


def test_the_pools_models_are_read_in_one_query(
    alpha: Cluster, django_assert_num_queries: Any
) -> None:
    name_model(alpha, "Mixtral-8x7B")
    dense = add_h100_pool(alpha, "dense", model_name="Llama-3-8B")
    unnamed = add_h100_pool(alpha, "unnamed")
    moe = alpha.pools.get(name="h100").pk
    jobs = pd.DataFrame(
        {
            "pool": [moe, moe, moe, dense.pk, unnamed.pk],
            # Mixtral's total as published (46.7 B), its active count (12.9 B), another model.
            "model_params": [46.7e9, 12.9e9, 7e9, 8e9, 46.7e9],
        }
    )
    with django_assert_num_queries(1):
        out = with_active_params(jobs)["model_active_params"]
    active = counts_of("Mixtral-8x7B").active
    assert out.iloc[:2].tolist() == pytest.approx([active, active])
    assert np.isnan(out.iloc[2:]).all()


def job_without_model_size() -> str:
    """A job that reports its throughput but not its model's size (model_params left blank)."""
    return (
        f"{HEADER}alpha,t-1,8,2024-03-01T00:00:00Z,2024-03-02T00:00:00Z,completed,h100,,"
        f"{TOKENS_PER_S:g}\n"
    )


@pytest.mark.parametrize("model_name", ["DeepSeek-V3", "Llama-3-8B"])
def test_a_job_with_no_model_size_trains_the_model_its_pool_names(
    alpha: Cluster, import_text: Callable[..., Any], model_name: str
) -> None:
    name_model(alpha, model_name)
    import_text(alpha, job_without_model_size(), kind="csv")
    pool = analyse(alpha)["pools"][0]
    # The active count of the mixture, the total of the dense model.
    assert pool["mfu"] == pytest.approx(throughput_mfu(counts_of(model_name).active))
    assert pool["mfu_provenance"] == "measured"


def test_a_job_with_no_model_size_on_an_unnamed_pool_measures_no_mfu(
    alpha: Cluster, import_text: Callable[..., Any]
) -> None:
    import_text(alpha, job_without_model_size(), kind="csv")
    pool = analyse(alpha)["pools"][0]
    assert pool["mfu_provenance"] != "measured"  # no size, no model: nothing to score it on


def test_a_missing_model_size_is_filled_from_the_pools_model_only(alpha: Cluster) -> None:
    name_model(alpha, "Mixtral-8x7B")
    unnamed = add_h100_pool(alpha, "unnamed")
    moe = alpha.pools.get(name="h100").pk
    jobs = pd.DataFrame({"pool": [moe, unnamed.pk], "model_params": [np.nan, np.nan]})
    out = with_active_params(jobs)
    counts = counts_of("Mixtral-8x7B")
    assert out["model_params"].iloc[0] == pytest.approx(counts.total)
    assert out["model_active_params"].iloc[0] == pytest.approx(counts.active)
    assert np.isnan(out["model_params"].iloc[1]) and np.isnan(out["model_active_params"].iloc[1])
