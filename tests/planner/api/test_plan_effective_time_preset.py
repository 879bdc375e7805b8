"""The effective-time preset of a plan (issue 27): production practice by default, Meta's
research-cluster figures when chosen, stored with the plan; an unknown preset is a 400."""

from __future__ import annotations

import pytest

from tests.support.builders import PLANS, plan_payload
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

H100 = "H100 SXM5 80GB"


def _plan(client, **spec) -> dict:
    payload = plan_payload(accelerators=[H100], cards=[16_384], pools=None, sites=None, **spec)
    response = client.post(PLANS, payload, format="json")
    assert response.status_code == 202, response.content
    run_plan_inline(response.json()["id"])
    return client.get(f"{PLANS}{response.json()['id']}/").json()


def _option(plan: dict) -> dict:
    (row,) = plan["results"]["options"]
    return row


def test_a_plan_without_a_preset_models_production_practice(client_for, planner, demo_fleet):
    plan = _plan(client_for(planner))
    assert "site_kind" not in plan["options_spec"]  # stored as given: older plans alike
    row = _option(plan)
    assert row["mtbf_card_hours"] == 50_000  # Llama 3's H100 fleet
    assert row["mtbf_basis"] == "default for Hopper cards (mtbf_card_hours_hopper)"
    # Llama 3 (Dubey et al. 2024 §3.3.4): "higher than 90 %" on 16,384 H100.
    assert row["effective_time"] >= 0.90
    assert row["effective_time_provenance"] == "modeled"


def test_the_research_preset_is_stored_and_lowers_the_effective_time(
    client_for, planner, demo_fleet
):
    client = client_for(planner)
    production = _option(_plan(client, site_kind="production"))
    research_plan = _plan(client, site_kind="research")
    assert research_plan["options_spec"]["site_kind"] == "research"
    research = _option(research_plan)
    assert research["mtbf_card_hours"] == 29_500  # RSC-1 (Kokolis et al. 2024)
    assert research["mtbf_basis"] == "research-cluster preset (mtbf_card_hours_research)"
    assert research["effective_time"] < production["effective_time"]
    assert research["days"] > production["days"]


def test_an_unknown_preset_is_a_400_naming_it(client_for, planner, demo_fleet):
    payload = plan_payload(accelerators=[H100], cards=[1024], pools=None, site_kind="garage")
    response = client_for(planner).post(PLANS, payload, format="json")
    assert response.status_code == 400
    assert "site_kind" in response.json()["options_spec"], response.json()
