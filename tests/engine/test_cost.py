"""Cost model and chargeback (engine.cost), checked by hand and by property."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cost import (
    DEFAULT_POWER,
    UNALLOCATED_IDLE_TEAM,
    CostInputError,
    chargeback,
    energy_and_cost,
    waste_by_factor,
)

# The same 16-card H100 cluster as test_usage: 48 h in service = 768 card-hours, of which
# 216 allocated (J1 96 + J2 24 node_fail + J3 96) and 552 idle.
POOL = pd.DataFrame(
    {
        "pool": ["alpha-h100"],
        "card_hours": [768.0],
        "allocated_card_hours": [216.0],
        "tdp_w": [700.0],
        "pue": [1.25],
        "tariff_per_kwh": [0.20],
        "grid_carbon_g_per_kwh": [400.0],
        # 35,040 / (4 years x 8,760 h) = 1.00 per card-hour; 876 / 8,760 = 0.10 per card-hour
        "capital_cost_per_card": [35_040.0],
        "amortization_years": [4.0],
        "yearly_opex_per_card": [876.0],
        "peak_tflops": [989.0],
        # energy 1/1.25 = 0.8 x mfu 0.4 x scaling 0.9 x (effective_time x utilization from
        # test_usage = 192/720) = 0.288 x 0.26667 = 0.0768
        "effective_utilization": [0.8 * 0.4 * 0.9 * 192 / 720],
    }
)
TEAMS = pd.DataFrame(
    {"pool": ["alpha-h100"] * 2, "account": ["team-a", "team-b"], "used_card_hours": [96.0, 120.0]}
)


def test_hand_example_energy_and_money():
    row = energy_and_cost(POOL).iloc[0]
    # Ownership: 1.00 + 0.10 = 1.10 per card-hour x 768 = 844.80
    assert row["ownership_cost_per_card_hour"] == pytest.approx(1.10)
    assert row["compute_cost"] == pytest.approx(844.80)
    # Busy card: 0.7 kW x 0.75 + 2.0 kW / 8 cards = 0.525 + 0.25 = 0.775 kW
    # Idle card: 0.7 kW x 0.15 + 0.25 = 0.105 + 0.25 = 0.355 kW
    # IT energy = 0.775 x 216 + 0.355 x 552 = 167.40 + 195.96 = 363.36 kWh
    assert row["it_energy_mwh"] == pytest.approx(0.36336)
    # Facility = 363.36 x 1.25 = 454.20 kWh; cost = 454.20 x 0.20 = 90.84
    assert row["facility_energy_mwh"] == pytest.approx(0.4542)
    assert row["energy_cost"] == pytest.approx(90.84)
    # PUE share of the energy bill: 90.84 x 0.25 / 1.25 = 18.168
    assert row["energy_overhead_cost"] == pytest.approx(18.168)
    # CO2 = 454.20 kWh x 400 g = 181.68 kg
    assert row["co2_tonnes"] == pytest.approx(0.18168)
    # Total 844.80 + 90.84 = 935.64; per allocated card-hour 935.64 / 216 = 4.3317
    assert row["total_cost"] == pytest.approx(935.64)
    assert row["cost_per_allocated_card_hour"] == pytest.approx(935.64 / 216)
    # Peak PFLOP-days = 768 / 24 days x 0.989 PFLOPS = 31.648; effective = x 0.0768 = 2.43057
    assert row["peak_pflop_days"] == pytest.approx(31.648)
    assert row["effective_pflop_days"] == pytest.approx(31.648 * 0.0768)
    assert row["cost_per_effective_pflop_day"] == pytest.approx(935.64 / (31.648 * 0.0768))
    # Used rate = 1.10 + 0.775 x 1.25 x 0.20 = 1.29375; idle = (1.10 + 0.08875) x 552 = 656.19
    assert row["used_cost_per_card_hour"] == pytest.approx(1.29375)
    assert row["idle_cost"] == pytest.approx(656.19)
    assert row["used_cost_per_card_hour"] * 216 + row["idle_cost"] == pytest.approx(935.64)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # used: team-a 96 x 1.29375 = 124.20, team-b 120 x 1.29375 = 155.25; idle 656.19
        # proportional: 656.19 x 96/216 = 291.64 and x 120/216 = 364.55
        ("proportional", {"team-a": 415.84, "team-b": 519.80}),
        # even: 656.19 / 2 = 328.095 each
        ("even", {"team-a": 452.295, "team-b": 483.345}),
        # none: idle stays on its own line
        ("none", {"team-a": 124.20, "team-b": 155.25, UNALLOCATED_IDLE_TEAM: 656.19}),
    ],
)
def test_hand_example_chargeback(rule, expected):
    costs = pd.concat([POOL, energy_and_cost(POOL)], axis=1)
    bill = chargeback(TEAMS, costs, idle_rule=rule).set_index("account")["chargeback_cost"]
    assert bill.to_dict() == pytest.approx(expected)
    assert bill.sum() == pytest.approx(935.64)


def test_rental_price_and_energy_included_in_it():
    rented = POOL.assign(rental_price_per_card_hour=2.5, rental_includes_energy=True)
    row = energy_and_cost(rented).iloc[0]
    # 2.5 x 768 = 1,920; the cloud price includes power: energy cost 0, but kWh and CO2 stay
    assert (row["cost_basis"], row["compute_cost"], row["energy_cost"]) == ("rental", 1920.0, 0.0)
    assert row["facility_energy_mwh"] == pytest.approx(0.4542)
    assert row["total_cost"] == pytest.approx(1920.0)
    plain = energy_and_cost(POOL.assign(rental_price_per_card_hour=2.5)).iloc[0]
    assert plain["total_cost"] == pytest.approx(1920.0 + 90.84)


def test_defaults_are_documented_values_and_columns_override_them():
    assert (DEFAULT_POWER.busy_load_share, DEFAULT_POWER.idle_power_share) == (0.75, 0.15)
    assert DEFAULT_POWER.node_overhead_w == 2000.0
    no_overhead = energy_and_cost(POOL.assign(node_overhead_w=0.0, busy_load_share=1.0)).iloc[0]
    # 0.7 x 216 + 0.105 x 552 = 151.2 + 57.96 = 209.16 kWh
    assert no_overhead["it_energy_mwh"] == pytest.approx(0.20916)


def test_impossible_inputs_name_the_column():
    with pytest.raises(CostInputError, match="pue must be >= 1"):
        energy_and_cost(POOL.assign(pue=0.9))
    with pytest.raises(CostInputError, match="allocated exceeds card_hours"):
        energy_and_cost(POOL.assign(allocated_card_hours=800.0))
    with pytest.raises(CostInputError, match="amortization_years"):
        energy_and_cost(POOL.assign(amortization_years=np.nan))


def test_waste_by_factor_splits_the_lost_share():
    factors = {
        "energy": 0.8,
        "mfu": 0.4,
        "scaling": 0.9,
        "effective_time": 192 / 228,
        "utilization": 228 / 720,
    }
    # The engine's attribution: share_f = ln(f) / ln(product), order-independent.
    product = math.prod(factors.values())
    shares = {name: math.log(value) / math.log(product) for name, value in factors.items()}
    costs = pd.concat([POOL, energy_and_cost(POOL)], axis=1)
    waste = waste_by_factor(costs, shares).iloc[0]
    # lost share = 1 - 0.0768 = 0.9232 of 935.64 = 863.78
    assert waste["lost_cost"] == pytest.approx(935.64 * (1 - 0.0768))
    parts = sum(waste[f"lost_cost_{name}"] for name in factors)
    assert parts == pytest.approx(waste["lost_cost"])
    assert waste["lost_cost_mfu"] == pytest.approx(
        935.64 * 0.9232 * math.log(0.4) / math.log(0.0768)
    )
    assert waste["lost_pflop_days_utilization"] == pytest.approx(
        31.648 * 0.9232 * shares["utilization"]
    )
    with pytest.raises(CostInputError, match="sum to 1"):
        waste_by_factor(costs, {"mfu": 0.5})


pools_strategy = st.lists(
    st.tuples(
        st.floats(min_value=1, max_value=1e5),  # card_hours
        st.floats(min_value=0, max_value=1),  # allocated share
        st.sampled_from([400.0, 700.0, 1000.0]),  # tdp
        st.floats(min_value=1.0, max_value=2.0),  # pue
        st.floats(min_value=0, max_value=0.5),  # tariff
        st.one_of(st.none(), st.floats(min_value=0.1, max_value=10)),  # rental price
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(
    pools=pools_strategy,
    team_splits=st.lists(
        st.lists(st.floats(min_value=0, max_value=1), min_size=0, max_size=4),
        min_size=4,
        max_size=4,
    ),
    rule=st.sampled_from(["none", "proportional", "even"]),
)
def test_chargeback_always_sums_to_total_cost(pools, team_splits, rule):
    frame = pd.DataFrame(
        {
            "pool": [f"p{i}" for i in range(len(pools))],
            "card_hours": [p[0] for p in pools],
            "allocated_card_hours": [p[0] * p[1] for p in pools],
            "tdp_w": [p[2] for p in pools],
            "pue": [p[3] for p in pools],
            "tariff_per_kwh": [p[4] for p in pools],
            "rental_price_per_card_hour": [np.nan if p[5] is None else p[5] for p in pools],
            "capital_cost_per_card": 30_000.0,
            "amortization_years": 5.0,
        }
    )
    costs = pd.concat([frame, energy_and_cost(frame)], axis=1)
    rows = []
    for index, (pool, split) in enumerate(zip(frame["pool"], team_splits, strict=False)):
        total = sum(split)
        for team, part in enumerate(split):
            # Teams use at most what the pool allocated (some of it may go unclaimed).
            used = frame.loc[index, "allocated_card_hours"] * (part / total if total else 0) * 0.999
            rows.append({"pool": pool, "account": f"t{team}", "used_card_hours": used})
    usage = pd.DataFrame(rows, columns=["pool", "account", "used_card_hours"])
    bill = chargeback(usage, costs, idle_rule=rule)
    assert bill["chargeback_cost"].sum() == pytest.approx(costs["total_cost"].sum(), rel=1e-9)
    assert (bill["chargeback_cost"] >= -1e-6).all()
    if rule == "none":
        not_charged = bill.loc[bill["account"] == UNALLOCATED_IDLE_TEAM, "chargeback_cost"].sum()
        assert not_charged == pytest.approx(
            costs["total_cost"].sum() - bill["used_cost"].sum(), rel=1e-9, abs=1e-9
        )


@settings(max_examples=60, deadline=None)
@given(
    pools=pools_strategy,
    bills=st.lists(st.sampled_from(["2024-01", "2024-02", "2024-03"]), min_size=4, max_size=4),
    team_splits=st.lists(
        st.lists(st.floats(min_value=0, max_value=1), min_size=0, max_size=3),
        min_size=4,
        max_size=4,
    ),
    rule=st.sampled_from(["none", "proportional", "even"]),
)
def test_chargeback_of_several_bills_in_one_pass_equals_one_bill_at_a_time(
    pools, bills, team_splits, rule
):
    frame = pd.DataFrame(
        {
            "pool": [f"p{i}" for i in range(len(pools))],
            "month": bills[: len(pools)],
            "currency": ["EUR" if i == 3 else "USD" for i in range(len(pools))],
            "card_hours": [p[0] for p in pools],
            "allocated_card_hours": [p[0] * p[1] for p in pools],
            "tdp_w": [p[2] for p in pools],
            "pue": [p[3] for p in pools],
            "tariff_per_kwh": [p[4] for p in pools],
            "capital_cost_per_card": 30_000.0,
            "amortization_years": 5.0,
        }
    )
    costs = pd.concat([frame, energy_and_cost(frame)], axis=1)
    rows = [
        {
            "pool": pool,
            # A team without an account (NaN) is a team too.
            "account": np.nan if team == 2 else f"t{team}",
            "used_card_hours": costs.loc[index, "allocated_card_hours"] * part / 3,
        }
        for index, (pool, split) in enumerate(zip(frame["pool"], team_splits, strict=False))
        for team, part in enumerate(split)
    ]
    usage = pd.DataFrame(rows, columns=["pool", "account", "used_card_hours"])
    together = chargeback(usage, costs, idle_rule=rule, scope_keys=("currency", "month"))

    expected = []
    for (currency, month), pools_in in costs.groupby(["currency", "month"], sort=False):
        alone = chargeback(usage[usage["pool"].isin(pools_in["pool"])], pools_in, idle_rule=rule)
        expected.append(alone.assign(currency=currency, month=month))
    expected = pd.concat(expected, ignore_index=True)[list(together.columns)]
    assert list(together.columns[:3]) == ["currency", "month", "account"]
    key = ["currency", "month", "account"]
    pd.testing.assert_frame_equal(
        together.sort_values(key, ignore_index=True, na_position="first"),
        expected.sort_values(key, ignore_index=True, na_position="first"),
        check_exact=False,
        rtol=1e-9,
        atol=1e-9,
    )
    per_bill = together.groupby(["currency", "month"])["chargeback_cost"].sum()
    totals = costs.groupby(["currency", "month"])["total_cost"].sum()
    pd.testing.assert_series_equal(per_bill, totals, check_names=False, rtol=1e-9)
