"""Inference plans in the browser app: saved from the Inference tab, listed beside training
plans, a plan page with its export, changed through the tab and recomputed."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.support.inference_inputs import TAB_QUERY as QUERY

pytestmark = pytest.mark.django_db

SAVE = reverse("frontend:inference-plan-save")
TAB = reverse("frontend:planner-inference")


def _save(client, **changes):
    data = {**QUERY, "name": "Chat on H100 or L4", **changes}
    return client.post(SAVE, data, format="multipart")  # a browser form, not JSON


@pytest.fixture
def saved(client_for, planner):
    from planner.models import InferencePlan

    response = _save(client_for(planner))
    plan = InferencePlan.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("frontend:inference-plan-detail", args=[plan.pk])
    return plan


def test_the_tab_offers_saving_to_planners_only(client_for, planner, viewer):
    assert "Save as an inference plan" in client_for(planner).get(TAB, QUERY).content.decode()
    assert "Save as an inference plan" not in client_for(viewer).get(TAB, QUERY).content.decode()
    assert _save(client_for(viewer)).status_code == 403


def test_a_saved_plan_has_the_tabs_result_a_page_and_a_row_in_the_planner(
    client_for, viewer, saved
):
    from planner import inference_plans

    estimate = client_for(viewer).get(TAB, QUERY).context["result"]
    assert saved.results["accelerator"] == estimate["accelerator"]
    assert saved.results["cards"] == estimate["cards"]
    assert saved.inputs["accelerator"] == QUERY["accelerator"]
    page = client_for(viewer).get(reverse("frontend:inference-plan-detail", args=[saved.pk]))
    html = page.content.decode()
    assert page.status_code == 200 and "Inference plan: Chat on H100 or L4" in html
    assert f"/api/v1/inference-plans/{saved.pk}/options/?format=xlsx" in html
    assert "Latency against throughput per card model" in html
    assert len(re.findall(r"<tr[ >]", html)) >= len(inference_plans.option_rows(saved)) + 1
    assert "Recompute" not in html  # a viewer may read, not change
    listed = client_for(viewer).get(reverse("frontend:planner")).content.decode()
    assert "Inference plans" in listed and "Chat on H100 or L4" in listed


def test_changed_inputs_through_the_tab_recompute_the_plan(client_for, planner, saved):
    client = client_for(planner)
    edit = client.get(reverse("frontend:inference-plan-detail", args=[saved.pk]))
    edit_url = re.search(r'href="([^"]*plan=\d+[^"]*)"', edit.content.decode()).group(1)
    tab = client.get(edit_url.replace("&amp;", "&")).content.decode()
    assert "Save these inputs to “Chat on H100 or L4”" in tab
    response = _save(client, requests_per_s="40", plan=str(saved.pk))
    assert response.status_code == 302
    saved.refresh_from_db()
    assert saved.inputs["requests_per_s"] == 40
    busier = client.get(TAB, {**QUERY, "requests_per_s": "40"}).context["result"]
    assert saved.results["cards"] == busier["cards"]


def test_only_the_owner_or_an_admin_changes_or_recomputes(client_for, fleet_admin, saved):
    from access.roles import PLANNER
    from tests.support.builders import make_user

    other = client_for(make_user("someone-else", PLANNER))
    recompute = reverse("frontend:inference-plan-recompute", args=[saved.pk])
    assert other.post(recompute).status_code == 403
    assert _save(other, plan=str(saved.pk), requests_per_s="40").status_code == 403
    before = saved.computed_at
    assert client_for(fleet_admin).post(recompute).status_code == 302
    saved.refresh_from_db()
    assert saved.computed_at > before


def test_refused_inputs_are_not_saved_and_say_why(client_for, planner):
    from planner.models import InferencePlan

    response = _save(client_for(planner), ttft_p95_ms="-1")
    assert response.status_code == 302 and response["Location"].startswith(TAB)
    assert not InferencePlan.objects.exists()
    follow = client_for(planner).get(response["Location"])
    assert follow.status_code == 400 and "ttft_p95_ms" in follow.content.decode()


def test_the_page_says_when_a_compared_card_changed_since(client_for, planner, saved):
    from inventory.models import AcceleratorModel

    url = reverse("frontend:inference-plan-detail", args=[saved.pk])
    assert "card catalog changed" not in client_for(planner).get(url).content.decode()
    l4 = AcceleratorModel.objects.get(name="L4")
    l4.rental_price_per_card_hour = 0.5
    l4.save()  # an edit, kept in the catalog's history
    html = client_for(planner).get(url).content.decode()
    assert "The card catalog changed since this plan was computed (L4)" in html
    client_for(planner).post(reverse("frontend:inference-plan-recompute", args=[saved.pk]))
    assert "card catalog changed" not in client_for(planner).get(url).content.decode()
