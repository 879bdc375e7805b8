"""Utilization, cost and chargeback of the 16-card "alpha" cluster, computed by hand
(tests/support/alpha_usage.py).

Inventory: 16 H100 cards (700 W TDP) in service all day 2024-03-01: 16 × 24 = 384 card-h.
Jobs: A = 48 + 48 + 16 = 112 allocated card-h; the node_fail job's 16 card-h are lost (L).
The export is taken at midnight (its as-of time ends the day), so the whole day is covered.
"""

from __future__ import annotations

import datetime as dt
import math

import pytest

from accounting import selectors
from accounting.selectors.uncovered import UNCOVERED_TEAM
from engine.cost import UNALLOCATED_IDLE_TEAM
from tests.support.alpha_usage import DAY_END, DAY_START, SACCT_LINES, SREPORT_TEXT, sacct_text

pytestmark = pytest.mark.django_db

# A job submitted at midnight makes the export's as-of time 03-02 00:00: the day is covered to
# its end (the fixture's own latest time, 21:00, would cover 21 h: tests/accounting/
# test_running_jobs.py).
DAY_EXPORT = sacct_text(
    [
        *SACCT_LINES,
        "1006|1006|alpha|h100|team-a|ann|2024-03-02T00:00:00|Unknown|Unknown|00:00:00|PENDING|1||"
        "None assigned|",
    ]
)
AVAILABLE = 16 * 24  # 384 card-h
ALLOCATED = 48 + 48 + 16  # 112 card-h
LOST = 16  # the node_fail job

# Cost of the day, by hand (docs/efficiency-model.md; engine.cost defaults: busy
# load 75 % of TDP, idle 15 %, 2,000 W per 8-card node of overhead = 250 W per card):
OWNERSHIP_PER_CARD_HOURS = 30_000 / (5 * 8_760)  # 0.684931... USD per card-hour
COMPUTE_COST = OWNERSHIP_PER_CARD_HOURS * AVAILABLE  # 263.0137 USD: idle cards cost too
BUSY_KW = 0.700 * 0.75 + 0.250  # 0.775 kW per busy card
IDLE_KW = 0.700 * 0.15 + 0.250  # 0.355 kW per idle card
IT_KWH = BUSY_KW * ALLOCATED + IDLE_KW * (AVAILABLE - ALLOCATED)  # 86.8 + 96.56 = 183.36 kWh
FACILITY_KWH = IT_KWH * 1.25  # PUE 1.25 → 229.2 kWh
ENERGY_COST = FACILITY_KWH * 0.20  # 45.84 USD
TOTAL_COST = COMPUTE_COST + ENERGY_COST  # 308.8537 USD
ENERGY_OVERHEAD_COST = ENERGY_COST * 0.25 / 1.25  # the PUE share: 9.168 USD
CO2_TONNES = FACILITY_KWH * 400 / 1e6  # 0.09168 t
# Chargeback: a used card-hour costs ownership + busy energy = 0.684931 + 0.775 × 1.25 × 0.20.
USED_RATE = OWNERSHIP_PER_CARD_HOURS + BUSY_KW * 1.25 * 0.20  # 0.878682 USD
IDLE_COST = TOTAL_COST - USED_RATE * ALLOCATED  # 308.8537 − 98.4123 = 210.4414 USD


def scope(**options) -> selectors.AccountingScope:
    options.setdefault("granularity", "day")
    return selectors.AccountingScope(DAY_START, DAY_END, **options)


def only_row(report: dict) -> dict:
    assert len(report["rows"]) == 1, report["rows"]
    return report["rows"][0]


def test_measured_utilization_and_effective_time_by_hand(alpha, import_text):
    import_text(alpha, DAY_EXPORT)
    row = only_row(selectors.utilization_report(scope()))
    assert row["cluster"] == "alpha" and row["provenance"] == "measured"
    assert row["available_card_hours"] == AVAILABLE
    assert row["allocated_card_hours"] == ALLOCATED
    assert row["lost_card_hours"] == LOST
    # Without sreport data there is no Down time: utilization = A / C = 112 / 384.
    assert row["utilization"] == pytest.approx(112 / 384)
    # effective_time = (A − L) / A = 96 / 112.
    assert row["effective_time"] == pytest.approx(96 / 112)


def test_sreport_downtime_enters_available_hours_and_effective_time(alpha, import_text):
    import_text(alpha, DAY_EXPORT)
    import_text(alpha, SREPORT_TEXT, kind="sreport")  # Down 24, PLND Down 48 card-h
    row = only_row(selectors.utilization_report(scope()))
    # Available C = 384 − 48 planned down = 336; D = 24 unplanned Down.
    assert row["available_card_hours"] == 336 and row["down_card_hours"] == 24
    # utilization = (A + D) / C = 136 / 336; effective_time = (A − L) / (A + D) = 96 / 136.
    assert row["utilization"] == pytest.approx(136 / 336)
    assert row["effective_time"] == pytest.approx(96 / 136)
    assert row["productive_share"] == pytest.approx(96 / 336)


def test_utilization_by_team_pool_and_accelerator_and_per_day(alpha, import_text):
    import_text(alpha, DAY_EXPORT)
    by_team = selectors.utilization_report(scope(group_by=("team",)))["rows"]
    shares = {row["team"]: row["utilization"] for row in by_team}
    # Each team's allocated card-hours over the cluster's 384 available.
    assert shares == pytest.approx({"team-a": 48 / 384, "team-b": 48 / 384, "team-c": 16 / 384})
    assert sum(shares.values()) == pytest.approx(112 / 384)
    team_c = next(row for row in by_team if row["team"] == "team-c")
    assert team_c["effective_time"] == 0.0  # all of team-c's work was lost

    by_pool = only_row(selectors.utilization_report(scope(group_by=("pool", "accelerator"))))
    assert (by_pool["pool"], by_pool["accelerator"]) == ("h100", "H100 SXM5 80GB")
    assert by_pool["utilization"] == pytest.approx(112 / 384)

    by_site = only_row(selectors.utilization_report(scope(group_by=("site",))))
    assert (by_site["site"], by_site["utilization"]) == ("Test DC", pytest.approx(112 / 384))

    two_days = selectors.AccountingScope(DAY_START, DAY_END + dt.timedelta(days=1), "day")
    days = selectors.utilization_report(two_days)["rows"]
    # The second day is after the last record: no data (no row), never 0 % utilization.
    assert [row["allocated_card_hours"] for row in days] == [112]
    assert selectors.utilization_report(two_days)["coverage_notes"] == [
        "Cluster alpha: usage covers 1 of 2 days; its utilization, idle cost and losses are "
        "over the covered days only; the cost of the other days is not charged to teams."
    ]

    one_team = selectors.utilization_report(scope(team="team-b"))["rows"]
    assert [(row["team"], row["allocated_card_hours"]) for row in one_team] == [("team-b", 48)]


def test_cost_of_the_day_by_hand(alpha, import_text):
    import_text(alpha, DAY_EXPORT)
    report = selectors.cost_report(scope())
    row = only_row(report)
    assert row["currency"] == "USD"
    assert row["card_hours"] == AVAILABLE and row["allocated_card_hours"] == ALLOCATED
    assert row["compute_cost"] == pytest.approx(COMPUTE_COST)
    assert row["it_energy_mwh"] == pytest.approx(IT_KWH / 1000)
    assert row["facility_energy_mwh"] == pytest.approx(FACILITY_KWH / 1000)
    assert row["energy_cost"] == pytest.approx(ENERGY_COST)
    assert row["energy_overhead_cost"] == pytest.approx(ENERGY_OVERHEAD_COST)
    assert row["total_cost"] == pytest.approx(TOTAL_COST)
    assert row["co2_tonnes"] == pytest.approx(CO2_TONNES)
    assert row["idle_cost"] == pytest.approx(IDLE_COST)
    # 308.8537 / 112 = 2.7576 USD per allocated card-hour.
    assert row["cost_per_allocated_card_hour"] == pytest.approx(TOTAL_COST / ALLOCATED)
    # Peak: 16 cards × 989 TFLOPS × 1 day = 15.824 PFLOP-days, times the five-factor product.
    assert row["peak_pflop_days"] == pytest.approx(16 * 989 / 1000)
    factors = row["factors"]
    assert factors["energy"] == pytest.approx(1 / 1.25)  # the entered PUE
    assert factors["utilization"] == pytest.approx(112 / 384)
    assert factors["effective_time"] == pytest.approx(96 / 112)
    assert row["factor_provenance"]["energy"] == "entered"
    for name in ("utilization", "effective_time"):
        assert row["factor_provenance"][name] == "measured"
    product = 1.0
    for value in factors.values():
        product *= value
    assert row["effective_utilization"] == pytest.approx(product)
    assert row["effective_pflop_days"] == pytest.approx(16 * 989 / 1000 * product)
    assert row["cost_per_effective_pflop_day"] == pytest.approx(
        TOTAL_COST / (16 * 989 / 1000 * product)
    )
    # Money lost: (1 − product) of the total, split over the factors by −ln(factor).
    assert row["lost_cost"] == pytest.approx(TOTAL_COST * (1 - product))
    assert sum(row["lost_cost_by_factor"].values()) == pytest.approx(row["lost_cost"])
    logs = {name: -math.log(value) for name, value in factors.items()}
    assert row["lost_cost_by_factor"]["utilization"] == pytest.approx(
        row["lost_cost"] * logs["utilization"] / sum(logs.values())
    )
    assert report["totals"][0]["total_cost"] == pytest.approx(TOTAL_COST)


@pytest.mark.parametrize("idle_rule", ["none", "proportional", "even"])
def test_chargeback_sums_to_the_total_under_every_idle_rule(alpha, import_text, idle_rule):
    import_text(alpha, DAY_EXPORT)
    report = selectors.chargeback_report(scope(idle_rule=idle_rule))
    charges = {row["team"]: row for row in report["rows"]}
    assert sum(row["chargeback_cost"] for row in charges.values()) == pytest.approx(TOTAL_COST)
    assert report["totals"][0]["total_cost"] == pytest.approx(TOTAL_COST)
    # Used cost: 48 × 0.878682 = 42.1767 for team-a and team-b, 16 × 0.878682 for team-c.
    assert charges["team-a"]["used_cost"] == pytest.approx(48 * USED_RATE)
    assert charges["team-c"]["used_cost"] == pytest.approx(16 * USED_RATE)
    idle = {team: row["idle_cost_share"] for team, row in charges.items()}
    if idle_rule == "proportional":  # 48:48:16 of the idle cost
        assert idle["team-a"] == pytest.approx(IDLE_COST * 48 / 112)
        assert idle["team-c"] == pytest.approx(IDLE_COST * 16 / 112)
    elif idle_rule == "even":
        assert idle["team-a"] == pytest.approx(IDLE_COST / 3)
        assert idle["team-c"] == pytest.approx(IDLE_COST / 3)
    else:
        assert idle[UNALLOCATED_IDLE_TEAM] == pytest.approx(IDLE_COST)
        assert idle["team-a"] == 0


def test_chargeback_per_day_reconciles_each_bucket(alpha, import_text):
    import_text(alpha, DAY_EXPORT)
    two_days = selectors.AccountingScope(
        DAY_START, DAY_END + dt.timedelta(days=1), "day", idle_rule="even"
    )
    report = selectors.chargeback_report(two_days)
    # The second day is after the last record: its cards still cost money, but without
    # usage data none of it is charged to a team (one "no usage records" row), never 0.
    assert len(report["totals"]) == 2
    assert report["warnings"][0].startswith("Cluster alpha: usage covers 1 of 2 days")
    second = [r for r in report["rows"] if r["bucket_start"] == report["totals"][1]["bucket_start"]]
    assert [row["team"] for row in second] == [UNCOVERED_TEAM]
    assert second[0]["chargeback_cost"] == pytest.approx(report["totals"][1]["total_cost"])
    assert report["totals"][0]["total_cost"] == pytest.approx(TOTAL_COST)
    for total in report["totals"]:
        charged = sum(
            row["chargeback_cost"]
            for row in report["rows"]
            if row["bucket_start"] == total["bucket_start"]
        )
        assert charged == pytest.approx(total["total_cost"])
        assert total["charged_cost"] == pytest.approx(total["total_cost"])


def test_team_filter_lists_one_team_but_totals_cover_all(alpha, import_text):
    import_text(alpha, DAY_EXPORT)
    report = selectors.chargeback_report(scope(team="team-b"))
    assert [row["team"] for row in report["rows"]] == ["team-b"]
    assert report["totals"][0]["total_cost"] == pytest.approx(TOTAL_COST)
    assert report["totals"][0]["charged_cost"] == pytest.approx(
        48 * USED_RATE + IDLE_COST * 48 / 112
    )
