"""Stored inference plans (/api/v1/inference-plans/): saved, listed, exported, recomputed."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from tests.support.inference_inputs import LLAMA_70B

pytestmark = pytest.mark.django_db

URL = "/api/v1/inference-plans/"
ESTIMATE = "/api/v1/estimates/inference/"
INPUTS = {
    **LLAMA_70B,
    "weight_precision": "fp8",
    "kv_precision": "fp8",
    "accelerator": ["H100 SXM5 80GB", "A100 SXM4 80GB"],
    "input_tokens": 1000,
    "output_tokens": 500,
    "requests_per_s": 10,
    "tpot_ms": 50,
}


@pytest.fixture
def saved(client_for, planner):
    response = client_for(planner).post(
        URL, {"name": "Llama chat", "inputs": INPUTS}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_a_saved_plan_holds_the_estimate_of_its_inputs(client_for, viewer, saved):
    estimate = client_for(viewer).post(ESTIMATE, INPUTS, format="json").json()
    plan = client_for(viewer).get(f"{URL}{saved['id']}/").json()
    assert plan["inputs"]["accelerator"] == INPUTS["accelerator"]  # stored by catalog name
    assert plan["results"]["cards"] == estimate["cards"]
    assert plan["results"]["accelerator"] == estimate["accelerator"]
    assert plan["results"]["cost_per_million_tokens"] == pytest.approx(
        estimate["cost_per_million_tokens"]
    )
    listed = client_for(viewer).get(URL).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["name"] for row in rows] == ["Llama chat"]
    assert rows[0]["cards"] == estimate["cards"]


def test_changed_inputs_are_recomputed_and_others_may_not_change_it(
    client_for, planner, fleet_admin, saved
):
    from access.roles import PLANNER
    from tests.support.builders import make_user

    other = make_user("other-planner", PLANNER)
    body = {"inputs": {**INPUTS, "requests_per_s": 40}}
    refused = client_for(other).patch(f"{URL}{saved['id']}/", body, format="json")
    assert refused.status_code == 403
    changed = client_for(planner).patch(f"{URL}{saved['id']}/", body, format="json").json()
    assert changed["inputs"]["requests_per_s"] == 40
    assert changed["results"]["cards"] > saved["results"]["cards"]
    assert changed["computed_at"] > saved["computed_at"]
    recomputed = client_for(fleet_admin).post(f"{URL}{saved['id']}/recompute/").json()
    assert recomputed["results"]["cards"] == changed["results"]["cards"]


def test_a_catalog_change_shows_after_a_recompute(client_for, planner, saved):
    from inventory.models import AcceleratorModel

    AcceleratorModel.objects.filter(name="H100 SXM5 80GB").update(rental_price_per_card_hour=0.01)
    plan = client_for(planner).post(f"{URL}{saved['id']}/recompute/").json()
    h100 = next(o for o in plan["results"]["options"] if o["accelerator"] == "H100 SXM5 80GB")
    before = next(o for o in saved["results"]["options"] if o["accelerator"] == "H100 SXM5 80GB")
    assert h100["card_hour_price"] == 0.01 != before["card_hour_price"]


@pytest.mark.parametrize(
    ("inputs", "field"),
    [
        ({**INPUTS, "ttft_p95_ms": -5}, "ttft_p95_ms"),
        ({**INPUTS, "accelerator": ["Nonexistent 9000"]}, "accelerator"),
        ({**INPUTS, "requests_per_s": None}, "requests_per_s"),
    ],
)
def test_refused_inputs_name_the_field_and_store_nothing(client_for, planner, inputs, field):
    from planner.models import InferencePlan

    response = client_for(planner).post(URL, {"name": "bad", "inputs": inputs}, format="json")
    assert response.status_code == 400
    assert field in response.json()["inputs"], response.json()
    assert not InferencePlan.objects.exists()


def test_viewers_read_but_do_not_save(client_for, viewer):
    response = client_for(viewer).post(URL, {"name": "x", "inputs": INPUTS}, format="json")
    assert response.status_code == 403
    assert client_for(None).get(URL).status_code in (401, 403)


def test_options_export_as_csv_and_xlsx_reads_back_equal(client_for, viewer, saved):
    client = client_for(viewer)
    rows = client.get(f"{URL}{saved['id']}/options/").json()
    assert [row["accelerator"] for row in rows] == [
        o["accelerator"] for o in saved["results"]["options"]
    ]
    for fmt, read in (("csv", pd.read_csv), ("xlsx", pd.read_excel)):
        response = client.get(f"{URL}{saved['id']}/options/", {"format": fmt})
        assert response.status_code == 200
        assert f"inference-plan-{saved['id']}-options" in response["Content-Disposition"]
        frame = read(io.BytesIO(response.content))
        assert list(frame.columns) == list(rows[0])
        assert list(frame["cards"]) == [row["cards"] for row in rows]
        assert frame["tpot_ms"].tolist() == pytest.approx([row["tpot_ms"] for row in rows])
