"""Serving loads (/api/v1/serving-loads/): the planner enters, the viewer reads, lists export
as CSV/XLSX, and every out-of-range value is a 400 naming its field."""

from __future__ import annotations

import io

import pytest
from openpyxl import load_workbook

from accounting.models import ServingLoad

URL = "/api/v1/serving-loads/"


@pytest.fixture
def serving_pool(alpha):
    from inventory.models import PoolPurpose

    pool = alpha.pools.get()
    pool.purpose = PoolPurpose.INFERENCE
    pool.save()
    return pool


def body(pool, **changes) -> dict:
    return {
        "pool": pool.pk,
        "period_start": "2024-03-01T00:00:00Z",
        "period_end": "2024-03-31T00:00:00Z",
        "served_tokens_per_s": 1500.0,
        "model_params": 70e9,
        "weight_precision": "fp8",
        "kv_precision": "fp8",
        "input_tokens": 1000,
        "output_tokens": 500,
        **changes,
    }


@pytest.mark.django_db
def test_planner_creates_viewer_lists_and_cannot_write(serving_pool, client_for, planner, viewer):
    created = client_for(planner).post(URL, body(serving_pool), format="json")
    assert created.status_code == 201, created.content
    assert created.json()["pool_name"] == serving_pool.name
    reader = client_for(viewer)
    listed = reader.get(URL, {"pool": serving_pool.pk})
    assert listed.status_code == 200 and listed.json()["count"] == 1
    assert listed.json()["results"][0]["served_tokens_per_s"] == 1500.0
    assert reader.post(URL, body(serving_pool), format="json").status_code == 403
    assert client_for(None).get(URL).status_code == 401


@pytest.mark.django_db
def test_list_exports_csv_and_xlsx(serving_pool, client_for, viewer):
    ServingLoad.objects.create(**{**body(serving_pool), "pool": serving_pool})
    client = client_for(viewer)
    csv = client.get(URL, {"format": "csv"})
    assert csv.status_code == 200
    text = b"".join(csv.streaming_content).decode()
    header, row = text.splitlines()[:2]
    assert "served_tokens_per_s" in header and "1500" in row
    xlsx = client.get(URL, {"format": "xlsx"})
    assert xlsx.status_code == 200
    sheet = load_workbook(io.BytesIO(xlsx.content)).active
    values = [cell.value for cell in next(sheet.iter_rows(min_row=1, max_row=1))]
    assert "served_tokens_per_s" in values


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("served_tokens_per_s", 0),
        ("served_tokens_per_s", 1e13),
        ("model_params", 1e15),
        ("input_tokens", 0),
        ("output_tokens", 20_000_000),
        ("period_start", "1999-12-31T00:00:00Z"),
        ("period_end", "2101-01-01T00:00:00Z"),
        ("period_end", "2024-02-01T00:00:00Z"),  # before the start
        ("weight_precision", "fp3"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_field(
    serving_pool, client_for, planner, field, value
):
    answer = client_for(planner).post(URL, body(serving_pool, **{field: value}), format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()
    assert not ServingLoad.objects.exists()


@pytest.mark.django_db
def test_a_training_pool_takes_no_serving_load(alpha, client_for, planner):
    answer = client_for(planner).post(URL, body(alpha.pools.get()), format="json")
    assert answer.status_code == 400 and "pool" in answer.json()


@pytest.mark.django_db
def test_period_filters_and_an_offset_postgresql_refuses(serving_pool, client_for, viewer):
    ServingLoad.objects.create(**{**body(serving_pool), "pool": serving_pool})
    client = client_for(viewer)
    inside = client.get(URL, {"ends_after": "2024-03-15T00:00:00Z"})
    assert inside.status_code == 200 and inside.json()["count"] == 1
    after = client.get(URL, {"ends_after": "2024-04-01T00:00:00Z"})
    assert after.status_code == 200 and after.json()["count"] == 0
    before = client.get(URL, {"starts_before": "2024-03-01T00:00:00Z"})
    assert before.json()["count"] == 0
    wild = client.get(URL, {"ends_after": "2024-03-15T00:00:00+23:00"})  # ISO allows it
    assert wild.status_code in (200, 400)
