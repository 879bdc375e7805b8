"""Plan payloads on the demo fleet, and running a plan's task in this process."""

from __future__ import annotations

import time

import pytest

PLANS = "/api/v1/plans/"


def plan_payload(**options_spec) -> dict:
    """GPT-3 175B (seed 002) on new A100/H100 at two sites, plus the demo's mixed pool."""
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


def compute_now(plan_id: int) -> None:
    """Run the plan's current run in this process (the task body, no broker)."""
    from planner.models import Plan
    from planner.tasks import compute_plan

    plan = Plan.objects.get(pk=plan_id)
    compute_plan(plan.pk, str(plan.run_id))


def wait_for(client, plan_id: int, statuses=("succeeded", "failed"), timeout_s=60) -> dict:
    """Poll a plan until the worker finishes it; `seen_progress` lists the progress seen."""
    deadline = time.monotonic() + timeout_s
    seen = []
    while time.monotonic() < deadline:
        body = client.get(f"{PLANS}{plan_id}/").json()
        seen.append(body["progress"])
        if body["status"] in statuses:
            body["seen_progress"] = seen
            return body
        time.sleep(0.1)
    raise AssertionError(f"plan {plan_id} still {body['status']} after {timeout_s}s")
