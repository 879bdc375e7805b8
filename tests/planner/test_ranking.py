"""Plan options are ranked and Pareto-marked within their currency, never across (issue 14)."""

from __future__ import annotations

import pandas as pd

from planner.ranking import first_by, rank_options, ranked


def _plan() -> pd.DataFrame:
    # 900 EUR and 1,000 USD are not comparable: each currency has its own cheapest option.
    return pd.DataFrame(
        {
            "currency": ["EUR", "EUR", "USD", "USD", "EUR"],
            "total_cost": [900.0, 2_000.0, 1_000.0, 5_000.0, 3_000.0],
            "days": [40.0, 20.0, 30.0, 35.0, 50.0],
            "feasible": [True, True, True, True, True],
        }
    )


def test_ranks_and_front_are_per_currency():
    plan = rank_options(_plan())
    assert plan["rank_by_cost"].tolist() == [1, 2, 1, 2, 3]
    assert plan["rank_by_days"].tolist() == [2, 1, 1, 2, 3]
    # EUR: 900/40 and 2,000/20 are on the front, 3,000/50 is dominated; USD: 1,000/30 only.
    assert plan["on_pareto_front"].tolist() == [True, True, True, False, False]
    assert ranked(plan, "rank_by_cost") == [0, 1, 4, 2, 3]


def test_no_single_cheapest_across_currencies():
    plan = rank_options(_plan())
    assert first_by(plan, "rank_by_cost") is None
    one = rank_options(_plan()[lambda f: f["currency"] == "EUR"].reset_index(drop=True))
    assert first_by(one, "rank_by_cost") == 0
