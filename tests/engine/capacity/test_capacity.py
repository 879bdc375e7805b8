"""Capacity planning: time mode, memory wall, splits, factors, outcomes, ranking, Pareto."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.capacity import (
    PlannerInputError,
    TrainingWorkload,
    cross_options,
    pareto_front,
    plan_capacity,
)
from engine.capacity.workload import workload_from_spec
from engine.memory import ModelShape
from engine.parallelism import FixedParallelism, enumerate_splits
from tests.support.capacity_inputs import A100_40GB, A100_80GB, H100_SXM, options

GPT3 = TrainingWorkload(params=175e9, tokens=300e9, flops_per_param_token=8)
FIXED_FACTORS = {"scaling": 1.0, "effective_time": 1.0, "utilization": 1.0}


def test_seed_002_megatron_gpt3_175b_on_1024_a100_takes_about_34_days():
    plan = plan_capacity(
        GPT3,
        options({**A100_80GB, "cards": 1024, "achieved_tflops_per_card": 140.0, **FIXED_FACTORS}),
    )
    row = plan.iloc[0]
    assert row["feasible"], row["reason"]
    assert GPT3.flops == pytest.approx(8 * 175e9 * 300e9)
    assert row["days"] == pytest.approx(34, rel=0.05)
    assert row["mfu"] == pytest.approx(140 / 312)
    assert row["mfu_provenance"] == "entered"  # typed by the user, not measured
    assert row["card_hours"] == pytest.approx(1024 * row["days"] * 24)


def test_utilization_stretches_calendar_time_not_running_time():
    base = {**A100_80GB, "cards": 1024, "mfu": 0.45, "scaling": 0.9, "effective_time": 0.95}
    plan = plan_capacity(GPT3, options({**base, "utilization": 1.0}, {**base, "utilization": 0.5}))
    full, half = plan.iloc[0], plan.iloc[1]
    assert half["running_days"] == pytest.approx(full["running_days"])
    assert half["days"] == pytest.approx(2 * full["days"])
    assert half["allocated_card_hours"] == pytest.approx(full["allocated_card_hours"])
    assert half["card_hours"] == pytest.approx(2 * full["card_hours"])


def test_wall_time_formula():
    plan = plan_capacity(
        GPT3,
        options(
            {
                **A100_80GB,
                "cards": 512,
                "mfu": 0.5,
                "scaling": 0.8,
                "effective_time": 0.9,
                "utilization": 0.7,
            }
        ),
    )
    row = plan.iloc[0]
    seconds = GPT3.flops / (512 * 312e12 * 0.5 * 0.8 * 0.9)
    assert row["days"] == pytest.approx(seconds / 0.7 / 86400)
    assert row["effective_utilization"] == pytest.approx(row["energy"] * 0.5 * 0.8 * 0.9 * 0.7)


def test_option_that_does_not_fit_says_why():
    plan = plan_capacity(GPT3, options({**A100_40GB, "cards": 16}))
    row = plan.iloc[0]
    assert not row["feasible"]
    assert "does not fit in memory" in row["reason"]
    assert "78 cards" in row["reason"]  # 2,800 GB / (40 GB x 0.9 usable)
    assert np.isnan(row["rank_by_cost"])
    assert not row["on_pareto_front"]


def test_fp8_without_catalog_peak_is_infeasible_with_reason():
    fp8 = TrainingWorkload(params=7e9, tokens=1e12, precision="fp8")
    plan = plan_capacity(fp8, options({**A100_80GB, "cards": 64}, {**H100_SXM, "cards": 64}))
    a100, h100 = plan.iloc[0], plan.iloc[1]
    assert not a100["feasible"]
    assert "no fp8 peak" in a100["reason"]
    assert h100["feasible"]
    assert h100["peak_tflops"] == 1979.0


def test_fixed_parallelism_is_respected():
    workload = TrainingWorkload(
        params=175e9,
        tokens=300e9,
        flops_per_param_token=8,
        parallelism=FixedParallelism(tp=8, pp=16, dp=8),
    )
    row = plan_capacity(workload, options({**A100_80GB, "cards": 1024})).iloc[0]
    assert (row["tp"], row["pp"], row["dp"]) == (8, 16, 8)
    assert row["feasible"]


def test_fixed_split_that_does_not_match_cards_says_why():
    workload = TrainingWorkload(params=175e9, tokens=300e9, parallelism=FixedParallelism(tp=16))
    row = plan_capacity(workload, options({**A100_80GB, "cards": 1024})).iloc[0]
    assert not row["feasible"]
    assert "exceeds 8 cards per node" in row["reason"]


def test_choose_for_me_keeps_tp_within_node_and_fastest_split():
    row = plan_capacity(GPT3, options({**A100_80GB, "cards": 1024})).iloc[0]
    assert row["feasible"]
    assert row["tp"] <= 8
    assert row["tp"] * row["pp"] * row["dp"] == 1024
    assert row["scaling_provenance"] == "modeled"
    assert row["effective_time_provenance"] == "modeled"


def test_enumerate_splits_covers_all_divisor_triples():
    splits = enumerate_splits([64], [8], layers=32, heads=32, global_batch=1024)
    triples = {(int(r.tp), int(r.pp), int(r.dp)) for r in splits.itertuples()}
    expected = {
        (t, p, 64 // (t * p)) for t in (1, 2, 4, 8) for p in range(1, 33) if 64 % (t * p) == 0
    }
    assert triples == expected


@settings(max_examples=25, deadline=None)
@given(nodes=st.integers(1, 400), extra_nodes=st.integers(1, 400))
def test_more_cards_never_increase_days_for_a_fixed_plan(nodes: int, extra_nodes: int):
    workload = TrainingWorkload(params=7e9, tokens=1e12, shape=ModelShape(32, 4096, 32))
    fixed = {**A100_80GB, "mfu": 0.5, **FIXED_FACTORS}
    n1, n2 = 8 * nodes, 8 * (nodes + extra_nodes)
    plan = plan_capacity(workload, options({**fixed, "cards": n1}, {**fixed, "cards": n2}))
    assert plan["feasible"].all()
    assert plan.iloc[1]["days"] < plan.iloc[0]["days"]


def test_card_count_without_any_valid_split_is_infeasible():
    workload = TrainingWorkload(params=7e9, tokens=1e12, shape=ModelShape(32, 4096, 32))
    row = plan_capacity(workload, options({**A100_80GB, "cards": 1667})).iloc[0]  # a prime
    assert not row["feasible"]
    assert "no TP×PP×DP split of 1667 cards" in row["reason"]


@settings(max_examples=25, deadline=None)
@given(nodes1=st.integers(1, 400), nodes2=st.integers(1, 400))
def test_days_change_with_cards_only_through_mfu_scaling_and_effective_time(
    nodes1: int, nodes2: int
):
    # The per-card MFU follows the chosen split (its micro-batch, its shard of each matmul).
    workload = TrainingWorkload(params=7e9, tokens=1e12, shape=ModelShape(32, 4096, 32))
    plan = plan_capacity(
        workload, options({**A100_80GB, "cards": 8 * nodes1}, {**A100_80GB, "cards": 8 * nodes2})
    )
    card_days = (
        plan["days"] * plan["cards"] * plan["mfu"] * plan["scaling"] * plan["effective_time"]
    )
    assert card_days.iloc[0] == pytest.approx(card_days.iloc[1])


def test_energy_and_carbon_follow_pue_and_grid():
    plan = plan_capacity(
        GPT3,
        options(
            {
                **A100_80GB,
                "cards": 1024,
                "pue": 1.3,
                "grid_carbon_g_per_kwh": 500.0,
                "tariff_per_kwh": 0.1,
                **FIXED_FACTORS,
                "mfu": 0.45,
            }
        ),
    ).iloc[0]
    assert plan["facility_energy_mwh"] == pytest.approx(1.3 * plan["it_energy_mwh"])
    assert plan["co2_tonnes"] == pytest.approx(plan["facility_energy_mwh"] * 1000 * 0.5 / 1000)
    assert plan["energy_cost"] == pytest.approx(plan["facility_energy_mwh"] * 1000 * 0.1)
    assert plan["energy_provenance"] == "entered"


def test_rental_cost_and_cost_per_effective_pflop_day():
    row = plan_capacity(
        GPT3,
        options(
            {
                **A100_80GB,
                "cards": 1024,
                "rental_price_per_card_hour": 2.0,
                "mfu": 0.45,
                **FIXED_FACTORS,
            }
        ),
    ).iloc[0]
    assert row["compute_cost"] == pytest.approx(2.0 * row["card_hours"])
    assert row["total_cost"] == pytest.approx(row["compute_cost"] + row["energy_cost"])
    # Effective PFLOP-days = peak x time x effective utilization (energy factor included):
    # the model FLOPs delivered, discounted by 1 / PUE.
    pflop_days = GPT3.flops / 1e15 / 86400 * row["energy"]
    assert row["effective_pflop_days"] == pytest.approx(pflop_days)
    assert row["cost_per_effective_pflop_day"] == pytest.approx(row["total_cost"] / pflop_days)
    assert row["cost_basis"] == "rental"


def test_ranking_and_pareto_over_options():
    rows = [
        {**A100_80GB, "cards": n, "rental_price_per_card_hour": price, "mfu": 0.45, **FIXED_FACTORS}
        for n, price in [(512, 1.0), (1024, 1.0), (1024, 3.0), (2048, 1.5)]
    ]
    plan = plan_capacity(GPT3, options(*rows))
    assert plan.loc[plan["total_cost"].idxmin(), "rank_by_cost"] == 1
    assert plan.loc[plan["days"].idxmin(), "rank_by_days"] == 1
    # (1024, 3.0) costs more than (1024, 1.0) for the same days: dominated.
    assert not plan.iloc[2]["on_pareto_front"]
    assert plan.iloc[3]["on_pareto_front"]  # fastest


@given(st.lists(st.tuples(st.floats(1, 100), st.floats(1, 100)), min_size=1, max_size=40))
def test_pareto_front_members_are_not_dominated(points: list[tuple[float, float]]):
    days = np.array([p[0] for p in points])
    cost = np.array([p[1] for p in points])
    front = pareto_front(days, cost)
    assert front.any()
    for i in np.flatnonzero(front):
        dominated = (days <= days[i]) & (cost <= cost[i]) & ((days < days[i]) | (cost < cost[i]))
        assert not dominated.any()
    for i in np.flatnonzero(~front):
        dominators = (days <= days[i]) & (cost <= cost[i]) & ((days < days[i]) | (cost < cost[i]))
        assert (dominators & front).any()


def test_invalid_option_values_name_the_field():
    with pytest.raises(PlannerInputError) as excinfo:
        plan_capacity(GPT3, options({**A100_80GB, "cards": 64, "mfu": 1.5, "pue": 0.9}))
    assert set(excinfo.value.errors) == {"mfu", "pue"}
    with pytest.raises(PlannerInputError) as excinfo:
        plan_capacity(GPT3, options({**A100_80GB, "cards": 64, "deadline_days": 10}))
    assert "cards" in excinfo.value.errors
    with pytest.raises(PlannerInputError) as excinfo:
        plan_capacity(GPT3, pd.DataFrame([{"cards": 8}]))
    assert "memory_gb" in excinfo.value.errors


def test_workload_validation_names_the_field():
    with pytest.raises(PlannerInputError) as excinfo:
        TrainingWorkload(params=-1, tokens=None, flops_per_param_token=7)
    assert {"params", "tokens", "flops_per_param_token"} <= set(excinfo.value.errors)
    assert isinstance(excinfo.value, ValueError)


def test_job_that_cannot_progress_for_failures_is_infeasible():
    row = plan_capacity(
        GPT3, options({**A100_80GB, "cards": 65536, "mtbf_card_hours": 5000.0})
    ).iloc[0]
    assert not row["feasible"]
    assert "no productive time" in row["reason"]


def test_cross_options_builds_card_model_count_site_grid():
    sites = pd.DataFrame([{"site": "north", "pue": 1.1}, {"site": "south", "pue": 1.5}])
    unpriced = plan_capacity(
        GPT3, cross_options(pd.DataFrame([A100_80GB, H100_SXM]), sites, cards=[512])
    )
    # No rental or capital price: the money is unknown, so nothing is ranked on cost.
    assert unpriced["total_cost"].isna().all() and not unpriced["on_pareto_front"].any()
    priced = [{**card, "rental_price_per_card_hour": 2.0} for card in (A100_80GB, H100_SXM)]
    grid = cross_options(pd.DataFrame(priced), sites, cards=[512, 1024, 2048])
    assert len(grid) == 2 * 3 * 2
    plan = plan_capacity(GPT3, grid)
    assert plan["feasible"].all()
    assert plan["on_pareto_front"].any()
    with pytest.raises(PlannerInputError):
        cross_options(pd.DataFrame([A100_80GB]), cards=[8], deadline_days=[10.0])


def test_the_software_stack_is_one_the_model_knows():
    with pytest.raises(PlannerInputError) as excinfo:
        TrainingWorkload(params=7e9, tokens=1e12, software_stack="jax")
    assert "software_stack" in excinfo.value.errors
    spec = {"model_params": 7e9, "tokens": 1e12, "software_stack": "plain_pytorch"}
    assert workload_from_spec(spec).software_stack == "plain_pytorch"


def test_an_eager_pytorch_loop_models_slower_than_a_fused_stack_on_the_same_card():
    # Same matmuls; the eager loop moves more bytes per activation and casts the weights of
    # every micro-batch (docs/capacity-planning.md §4, "The software stack").
    shape = ModelShape(16, 2048, 32, kv_heads=8, ffn_hidden=8192, vocab=128256, mlp="gated")
    plans = [
        plan_capacity(
            TrainingWorkload(
                params=1.24e9,
                tokens=1e12,
                global_batch_sequences=8,
                micro_batch=1,
                shape=shape,
                software_stack=stack,
            ),
            options({**H100_SXM, "cards": 1}),
        ).iloc[0]
        for stack in ("megatron", "plain_pytorch")
    ]
    assert plans[1]["days"] > 1.2 * plans[0]["days"]
    assert plans[0]["scaling"] == plans[1]["scaling"] == 1.0  # one card: all of it per card
