"""The planner page's effective-time preset (issue 27): a choice stored in the plan, shown on
the plan page; a value that is not a choice is an error next to the field."""

from __future__ import annotations

import re

import pytest

from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

PLANNER_URL = "/planner/"


def _data(**changes) -> dict:
    from inventory.models import AcceleratorModel

    data = {
        "name": "Preset plan",
        "params_billions": "70",
        "tokens_billions": "2000",
        "flops_per_param_token": "6",
        "precision": "bf16",
        "seq_len": "4096",
        "global_batch_sequences": "1024",
        "zero_stage": "1",
        "parallelism": "choose",
        "accelerators": [str(AcceleratorModel.objects.get(name="H100 SXM5 80GB").pk)],
        "size_mode": "cards",
        "cards": "1024",
        "history_days": "90",
        "cost_basis": "rental",
        **changes,
    }
    return {key: value for key, value in data.items() if value is not None}


def test_the_form_offers_both_presets_production_first(client, planner, demo_fleet):
    client.force_login(planner)
    html = client.get(PLANNER_URL).content.decode()
    select = re.search(r'<select name="site_kind".*?</select>', html, re.S)
    assert select, html[:2000]
    values = re.findall(r'<option value="([^"]+)"', select.group(0))
    assert values == ["production", "research"]
    assert "Meta&#x27;s research-cluster" in select.group(0)


def test_the_chosen_preset_is_stored_and_shown_on_the_plan(
    client, planner, demo_fleet, django_capture_on_commit_callbacks
):
    from planner.models import Plan

    client.force_login(planner)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(PLANNER_URL, _data(site_kind="research"))
    assert response.status_code == 302, response.content.decode()[:3000]
    plan = Plan.objects.get()
    assert plan.options_spec["site_kind"] == "research"
    run_plan_inline(plan.pk)
    page = client.get(f"{PLANNER_URL}{plan.pk}/").content.decode()
    assert "Research cluster defaults where usage is not measured" in page
    assert "Effective training time (ETTR)" in page


def test_a_form_without_the_field_plans_production_practice(
    client, planner, demo_fleet, django_capture_on_commit_callbacks
):
    from planner.models import Plan

    client.force_login(planner)
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post(PLANNER_URL, _data()).status_code == 302
    assert Plan.objects.get().options_spec["site_kind"] == "production"


def test_a_preset_that_is_not_a_choice_is_an_error_next_to_it(client, planner, demo_fleet):
    client.force_login(planner)
    html = client.post(PLANNER_URL, _data(site_kind="garage")).content.decode()
    errors = re.search(r'id="id_site_kind_error"[^>]*>(.*?)</ul>', html, re.S)
    assert errors and "garage" in errors.group(1)


def test_the_form_offers_the_training_stacks_megatron_first(client, planner, demo_fleet):
    client.force_login(planner)
    html = client.get(PLANNER_URL).content.decode()
    select = re.search(r'<select name="software_stack".*?</select>', html, re.S)
    assert select, html[:2000]
    assert re.findall(r'<option value="([^"]+)"', select.group(0)) == [
        "megatron",
        "megatron_2024",
        "plain_pytorch",
    ]


@pytest.mark.parametrize(
    ("posted", "stored"),
    [(None, "megatron"), ("megatron_2024",) * 2, ("plain_pytorch",) * 2],
)
def test_the_chosen_stack_is_stored_and_shown_on_the_plan(
    client, planner, demo_fleet, django_capture_on_commit_callbacks, posted, stored
):
    from planner.models import Plan

    client.force_login(planner)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(PLANNER_URL, _data(software_stack=posted))
    assert response.status_code == 302, response.content.decode()[:3000]
    plan = Plan.objects.get()
    assert plan.workload["software_stack"] == stored
    run_plan_inline(plan.pk)
    assert f"stack {stored}" in client.get(f"/planner/{plan.pk}/").content.decode()


def test_a_stack_that_is_not_a_choice_is_an_error_next_to_the_field(client, planner, demo_fleet):
    client.force_login(planner)
    response = client.post(PLANNER_URL, _data(software_stack="jax"))
    assert response.status_code == 200
    assert "Select a valid choice. jax is not one of the available choices." in (
        response.content.decode()
    )
