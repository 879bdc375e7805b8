"""A serving load may name its model in the model catalog (issue #32): the API and the pool
page's form take `model_name`, fill `model_params` with the catalog's total, refuse a count
that disagrees with it, and refuse an unknown name saying where the names are."""

from __future__ import annotations

import pytest

from accounting.models import ServingLoad
from engine.model_catalog import load_catalog

pytestmark = pytest.mark.django_db

URL = "/api/v1/serving-loads/"
# Qwen Team 2025, "Qwen3 Technical Report" (arXiv:2505.09388), Table 2: 235B total.
QWEN_TOTAL = 235e9
# Jiang et al. 2024, "Mixtral of Experts" (arXiv:2401.04088): 46.7B total parameters.
MIXTRAL_TOTAL = 46.7e9


@pytest.fixture
def serving_pool(alpha):
    pool = alpha.pools.get()
    pool.purpose = "inference"
    pool.save()
    return pool


def body(pool, **changes) -> dict:
    answer = {
        "pool": pool.pk,
        "period_start": "2024-03-01T00:00:00Z",
        "period_end": "2024-03-31T00:00:00Z",
        "served_tokens_per_s": 1500.0,
        "weight_precision": "fp8",
        "kv_precision": "fp8",
        "input_tokens": 1000,
        "output_tokens": 500,
        **changes,
    }
    return {key: value for key, value in answer.items() if value is not None}


def test_a_named_model_fills_its_parameters(serving_pool, client_for, planner):
    answer = client_for(planner).post(
        URL, body(serving_pool, model_name="qwen3 235b a22b"), format="json"
    )
    assert answer.status_code == 201, answer.content
    assert answer.json()["model_name"] == "Qwen3-235B-A22B"  # the catalog's spelling
    assert answer.json()["model_params"] == QWEN_TOTAL
    load = ServingLoad.objects.get()
    assert (load.model_name, load.model_params) == ("Qwen3-235B-A22B", QWEN_TOTAL)


def test_a_count_must_agree_with_the_named_model(serving_pool, client_for, planner):
    client = client_for(planner)
    close = client.post(
        URL, body(serving_pool, model_name="Qwen3-235B-A22B", model_params=236e9), format="json"
    )
    assert close.status_code == 201, close.content
    assert close.json()["model_params"] == 236e9  # rounded differently, kept as entered
    wrong = client.post(
        URL, body(serving_pool, model_name="Qwen3-235B-A22B", model_params=22e9), format="json"
    )
    assert wrong.status_code == 400
    message = wrong.json()["model_params"][0]
    assert "Qwen3-235B-A22B has 235 B parameters in all" in message and "22 B" in message
    assert ServingLoad.objects.count() == 1


def test_an_unknown_name_lists_where_names_are(serving_pool, client_for, planner):
    answer = client_for(planner).post(
        URL, body(serving_pool, model_name="Qwen3-999B", model_params=70e9), format="json"
    )
    assert answer.status_code == 400
    message = answer.json()["model_name"][0]
    assert "No model “Qwen3-999B” in the model catalog" in message
    assert "Known models:" in message and all(n in message for n in load_catalog().names())
    assert "model picker" in message
    assert not ServingLoad.objects.exists()


def test_without_a_name_the_count_is_required(serving_pool, client_for, planner):
    client = client_for(planner)
    answer = client.post(URL, body(serving_pool), format="json")
    assert answer.status_code == 400
    assert "model_name" in answer.json()["model_params"][0]
    plain = client.post(URL, body(serving_pool, model_params=70e9), format="json")
    assert plain.status_code == 201 and plain.json()["model_name"] == ""


def test_renaming_the_model_refills_the_count(serving_pool, client_for, planner):
    client = client_for(planner)
    created = client.post(URL, body(serving_pool, model_name="Qwen3-235B-A22B"), format="json")
    url = f"{URL}{created.json()['id']}/"
    etag = client.get(url)["ETag"]
    changed = client.patch(url, {"model_name": "Mixtral-8x7B"}, format="json", HTTP_IF_MATCH=etag)
    assert changed.status_code == 200, changed.content
    assert changed.json()["model_params"] == MIXTRAL_TOTAL
    etag = changed["ETag"]
    unnamed = client.patch(url, {"model_name": ""}, format="json", HTTP_IF_MATCH=etag)
    assert unnamed.status_code == 200, unnamed.content
    assert (unnamed.json()["model_name"], unnamed.json()["model_params"]) == ("", MIXTRAL_TOTAL)


def test_the_pool_page_form_takes_the_model_name(serving_pool, client, planner):
    client.force_login(planner)
    url = f"/inventory/pools/{serving_pool.pk}/serving-loads/new/"
    form = {
        "period_start": "2024-03-01",
        "period_end": "2024-04-01",
        "served_tokens_per_s": "1500",
        "model_name": "Mixtral-8x7B",
        "model_params": "",
        "weight_precision": "fp8",
        "kv_precision": "fp8",
        "input_tokens": "1000",
        "output_tokens": "500",
        "notes": "",
    }
    assert 'name="model_name"' in client.get(url).content.decode()
    refused = client.post(url, {**form, "model_name": "Mixtral-9x9B"})
    assert refused.status_code == 200
    assert "model_name" in refused.context["form"].errors
    assert client.post(url, form).status_code == 302
    load = ServingLoad.objects.get()
    assert (load.model_name, load.model_params) == ("Mixtral-8x7B", MIXTRAL_TOTAL)
    page = client.get(f"/inventory/pools/{serving_pool.pk}/").content.decode()
    assert "Mixtral-8x7B: 46,700,000,000" in page
