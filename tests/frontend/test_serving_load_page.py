"""The serving-load form on an inference pool's page: listed, added by a planner, refused
out of range with the field named; training pools have no such section."""

from __future__ import annotations

import pytest

from accounting.models import ServingLoad
from tests.accounting import conftest as accounting_fixtures

pytestmark = pytest.mark.django_db
alpha = accounting_fixtures.alpha  # the 16-card cluster fixture (pool "h100", training)

FORM = {
    "period_start": "2024-03-01",
    "period_end": "2024-04-01",
    "served_tokens_per_s": "1500",
    "model_params": "70000000000",
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "input_tokens": "1000",
    "output_tokens": "500",
    "notes": "",
}


@pytest.fixture
def serving_pool(alpha):  # noqa: F811  (pytest passes the fixture above)
    pool = alpha.pools.get()
    pool.purpose = "inference"
    pool.save()
    return pool


def test_a_planner_adds_a_serving_load_from_the_pool_page(serving_pool, client, planner):
    client.force_login(planner)
    page = client.get(f"/inventory/pools/{serving_pool.pk}/").content.decode()
    assert "Serving loads" in page and "No serving load entered" in page
    assert f"/inventory/pools/{serving_pool.pk}/serving-loads/new/" in page
    answer = client.post(f"/inventory/pools/{serving_pool.pk}/serving-loads/new/", FORM)
    assert answer.status_code == 302
    load = ServingLoad.objects.get()
    assert (load.pool, load.served_tokens_per_s, load.input_tokens) == (serving_pool, 1500, 1000)
    page = client.get(f"/inventory/pools/{serving_pool.pk}/").content.decode()
    assert "fp8 / fp8" in page and "1000 / 500" in page


def test_out_of_range_values_are_form_errors(serving_pool, client, planner):
    client.force_login(planner)
    url = f"/inventory/pools/{serving_pool.pk}/serving-loads/new/"
    answer = client.post(url, {**FORM, "served_tokens_per_s": "0", "period_end": "2024-02-01"})
    assert answer.status_code == 200
    errors = answer.context["form"].errors
    assert "served_tokens_per_s" in errors and "period_end" in errors
    assert not ServingLoad.objects.exists()


def test_a_training_pool_has_no_serving_section(alpha, client, viewer):  # noqa: F811
    client.force_login(viewer)
    page = client.get(f"/inventory/pools/{alpha.pools.get().pk}/").content.decode()
    assert "Serving loads" not in page
