"""Plan payloads on the demo fleet, and running a plan's task in this process."""

from __future__ import annotations

import pytest

from tests.polling import progress_recorder, wait_for_status

PLANS = "/api/v1/plans/"


def plan_payload(**options_spec) -> dict:
    """GPT-3 175B (Baidu 2023) on new A100/H100 at two sites, plus the demo's mixed pool."""
    from inventory.models import Pool, Site

    site = Site.objects.get(name="Frankfurt DC1 (air)")
    pool = Pool.objects.get(name="mixed-a100-h100")
    spec = {
        "accelerators": ["A100 SXM4 80GB", "H100 SXM5 80GB"],
        "cards": [512, 1024, 2048],
        "sites": [
            site.pk,
            {"name": "Cloud EU", "pue": 1.3, "tariff_per_kwh": 0.2, "grid_carbon_g_per_kwh": 300},
        ],
        "pools": [pool.pk],
    }
    spec.update(options_spec)
    return {
        "name": "GPT-3 175B",
        "workload": {"model_params": 175e9, "tokens": 300e9, "flops_per_param_token": 8},
        "options_spec": {k: v for k, v in spec.items() if v is not None},
        "levers": [
            {"name": "liquid_cooling", "one_off_cost": 2_000_000},
            {"name": "colocation", "one_off_cost": 500_000},
        ],
    }


@pytest.fixture
def payload(demo_fleet):
    return plan_payload()


USD_TO_EUR = 0.92  # an administrator's dated rate, entered by the test (no market quote)


def usd_to_eur_rate():
    """The dated rate that prices the catalog's USD cards at the Frankfurt (EUR) demo site."""
    import datetime as dt

    from inventory.currency import ExchangeRate

    return ExchangeRate.objects.create(
        from_currency="USD", to_currency="EUR", rate=USD_TO_EUR, valid_on=dt.date(2020, 1, 1)
    )


def compute_now(plan_id: int) -> None:
    """Run the plan's current run in this process (the task body, no broker)."""
    from planner.models import Plan
    from planner.tasks import compute_plan

    plan = Plan.objects.get(pk=plan_id)
    compute_plan(plan.pk, str(plan.run_id))


def wait_for(client, plan_id: int, statuses=("succeeded", "failed"), timeout_s=60) -> dict:
    """Poll a plan until the worker finishes it; `seen_progress` lists the progress seen."""
    fetch, seen = progress_recorder(lambda: client.get(f"{PLANS}{plan_id}/").json())
    body = wait_for_status(fetch, f"plan {plan_id}", statuses, timeout_s)
    body["seen_progress"] = seen
    return body
