"""A plan at a EUR site is priced out of the box with the shipped ECB reference rate, states
the rate's day and source, and goes stale, with the reason, when a rate is entered.

The seed case (docs/sources.md, Baidu 2023): GPT-3 175B on 300B tokens, 8 FLOP per parameter
and token, 140 TFLOP/s per A100 on dedicated cards. By hand: 8 × 175e9 × 300e9 FLOP ÷
(140e12 FLOP/s × 3,600 s/h) = 833,333.3 card-hours; the catalog's A100 rents at 1.50 USD per
card-hour, 1,250,000 USD; at Frankfurt (EUR) that is 1,250,000 ÷ 1.0495 (the ECB's USD per
euro of 2024-11-25) = 1,191,043.35 EUR.
"""

import datetime as dt

import pytest
from django.utils import timezone

from inventory.currency import ExchangeRate
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

SEED = {
    "workload": {"model_params": 175e9, "tokens": 300e9, "flops_per_param_token": 8},
    "overrides": {
        "achieved_tflops_per_card": 140,
        "scaling": 1,
        "effective_time": 1,
        "utilization": 1,
    },
}
CARD_HOURS = 8 * 175e9 * 300e9 / (140e12 * 3600)
A100_USD_PER_CARD_HOUR = 1.50  # inventory/fixtures/accelerators.csv
ECB_USD_PER_EUR = 1.0495  # inventory/data/ecb_euro_reference_rates.json, 2024-11-25
SHIPPED_LABEL = "USD→EUR 0.952835 of 2024-11-25 (ECB euro reference rate, shipped with Fleetwise)"


def _plan_at(site_names, owner, capture):
    from inventory.models import Site
    from planner import plans

    sites = list(Site.objects.filter(name__in=site_names).values_list("pk", flat=True))
    with capture(execute=False):
        plan = plans.create_plan(
            owner=owner,
            name="seed",
            options_spec={"accelerators": ["A100 SXM4 80GB"], "cards": [1024], "sites": sites},
            **SEED,
        )
    run_plan_inline(plan.pk)
    plan.refresh_from_db()
    return plan


def _enter_rate(capture, rate: float, valid_on: dt.date, pair=("USD", "EUR")) -> ExchangeRate:
    with capture(execute=True):  # the stale marking runs after the commit
        return ExchangeRate.objects.create(
            from_currency=pair[0], to_currency=pair[1], rate=rate, valid_on=valid_on
        )


def test_a_plan_at_a_eur_site_is_priced_with_the_shipped_rate_and_says_so(
    demo_fleet, planner, django_capture_on_commit_callbacks
):
    plan = _plan_at(["Frankfurt DC1 (air)"], planner, django_capture_on_commit_callbacks)
    (row,) = plan.results["options"]
    assert row["feasible"] and row["currency"] == "EUR" and not row["reason"]
    assert row["card_hours"] == pytest.approx(CARD_HOURS, rel=1e-9)
    expected_eur = CARD_HOURS * A100_USD_PER_CARD_HOUR / ECB_USD_PER_EUR
    assert expected_eur == pytest.approx(1_191_043.35, abs=0.01)
    assert row["compute_cost"] == pytest.approx(expected_eur, rel=1e-9)
    assert plan.summary["feasible"] == 1
    assert plan.summary["by_currency"][0]["cheapest"]["option_id"] == row["option_id"]
    (used,) = plan.results["exchange_rates"]
    assert (used["from_currency"], used["to_currency"], used["valid_on"]) == (
        "USD",
        "EUR",
        "2024-11-25",
    )
    assert used["provenance"] == "reference" and used["label"] == SHIPPED_LABEL
    assert any(SHIPPED_LABEL.split(" (")[0] in w and "ECB" in w for w in plan.results["warnings"])
    assert not plan.stale


def test_entering_a_rate_marks_the_plan_stale_with_the_reason_then_recompute_uses_it(
    demo_fleet, planner, client_for, django_capture_on_commit_callbacks
):
    from planner import plans

    capture = django_capture_on_commit_callbacks
    eur = _plan_at(["Frankfurt DC1 (air)"], planner, capture)
    usd = _plan_at(["Ulanqab DC2 (liquid)"], planner, capture)  # no conversion at all
    assert usd.results["exchange_rates"] == []

    _enter_rate(capture, 1.2, dt.date(2024, 1, 1), pair=("GBP", "EUR"))  # another pair
    _enter_rate(capture, 0.5, timezone.now().date() + dt.timedelta(days=30))  # not yet valid
    eur.refresh_from_db()
    assert not eur.stale  # neither changes what a recompute would use today

    day = timezone.now().date() - dt.timedelta(days=7)
    _enter_rate(capture, 0.9, day)
    eur.refresh_from_db()
    usd.refresh_from_db()
    assert eur.stale and not usd.stale
    reason = (
        f"The USD→EUR exchange rate changed after this run: USD→EUR 0.9 of {day:%Y-%m-%d} "
        f"(entered) replaces {SHIPPED_LABEL}."
    )
    assert plans.stale_rate_reasons(eur) == [reason]
    body = client_for(planner).get(f"/api/v1/plans/{eur.pk}/").json()
    assert body["stale"] is True and body["stale_reasons"] == [reason]
    page = client_for(planner).get(f"/planner/{eur.pk}/").content.decode()
    assert f"<dt>Stale</dt><dd>yes: {reason}</dd>" in page

    with capture(execute=False):
        plans.recompute_plan(eur)
    run_plan_inline(eur.pk)
    eur.refresh_from_db()
    assert not eur.stale and plans.stale_rate_reasons(eur) == []
    (row,) = eur.results["options"]
    assert row["compute_cost"] == pytest.approx(CARD_HOURS * A100_USD_PER_CARD_HOUR * 0.9)
    assert eur.results["exchange_rates"][0]["provenance"] == "entered"


def test_deleting_the_entered_rate_goes_back_to_the_reference_and_says_so(
    demo_fleet, planner, django_capture_on_commit_callbacks
):
    from planner import plans

    capture = django_capture_on_commit_callbacks
    rate = _enter_rate(capture, 0.9, dt.date(2025, 1, 1))
    plan = _plan_at(["Frankfurt DC1 (air)"], planner, capture)
    assert plan.results["exchange_rates"][0]["label"] == "USD→EUR 0.9 of 2025-01-01 (entered)"
    with capture(execute=True):
        rate.delete()
    plan.refresh_from_db()
    assert plan.stale
    assert plans.stale_rate_reasons(plan) == [
        "The USD→EUR exchange rate changed after this run: "
        f"{SHIPPED_LABEL} replaces USD→EUR 0.9 of 2025-01-01 (entered)."
    ]


def test_without_any_rate_the_option_is_unpriced_and_the_page_says_why_beside_it(
    demo_fleet, planner, client, django_capture_on_commit_callbacks
):
    """A site in dirhams: the ECB publishes no AED rate, so the USD card stays unpriced."""
    from inventory.models import Site

    Site.objects.create(name="Dubai DC", pue=1.4, tariff_per_kwh=0.35, currency="AED")
    plan = _plan_at(
        ["Dubai DC", "Frankfurt DC1 (air)"], planner, django_capture_on_commit_callbacks
    )
    rows = {row["site"]: row for row in plan.results["options"]}
    dubai = rows["Dubai DC"]
    assert not dubai["feasible"] and dubai["total_cost"] is None
    assert dubai["reason"].startswith(
        "not priced: card price in USD, site energy in AED and no USD→AED exchange rate"
    )
    assert rows["Frankfurt DC1 (air)"]["feasible"]

    client.force_login(planner)
    html = client.get(f"/planner/{plan.pk}/").content.decode()
    # The reason sits in the option's own cell, under its name, not in a last column.
    label_cell = html[html.index("A100 SXM4 80GB × 1,024 cards at Dubai DC") :]
    label_cell = label_cell[: label_cell.index("</th>")]
    assert "no USD→AED exchange rate" in label_cell
    assert "Does not fit: why" not in html
    assert f"<dt>Exchange rates</dt><dd>{SHIPPED_LABEL}</dd>" in html
