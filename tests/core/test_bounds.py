"""Bounded work per request (issue: hostile input): every reproduction answers a 400 naming the
field and its range, or a correct result, fast, with the process's address space capped so a
blow-up fails the test instead of the machine. (The engine's own limits:
tests/engine/test_limits.py.)"""

from __future__ import annotations

import json
import time

import pytest

from tests.support.builders import plan_payload
from tests.support.memcap import address_space_cap

pytestmark = pytest.mark.django_db
TRAINING = "/api/v1/estimates/training/"
PLANS = "/api/v1/plans/"
ACCOUNTING = "/api/v1/accounting/"


@pytest.fixture
def api(client_for, viewer, demo_fleet):
    return client_for(viewer)


@pytest.fixture
def planner_api(client_for, planner, demo_fleet):
    return client_for(planner)


def training(**extra) -> dict:
    return {
        "model_params": 7e9,
        "tokens": 1e12,
        "accelerator": "H100 SXM5 80GB",
        "cards": 1024,
        **extra,
    }


def capped(call, *args, **kwargs):
    """One request under a 1 GiB address-space headroom; returns (response, seconds)."""
    with address_space_cap():
        started = time.perf_counter()
        response = call(*args, **kwargs)
        return response, time.perf_counter() - started


def assert_names(response, field: str, text: str = "") -> None:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    body = response.json()
    assert field in body, body
    assert text in str(body[field]), body


def test_a_sane_estimate_still_answers(api):
    response, _ = capped(api.post, TRAINING, training(), format="json")
    assert response.status_code == 200, response.content
    assert response.json()["feasible"] in (True, False)


@pytest.mark.parametrize("params", [1e30, 1e26, 1e308, "1e30"])
def test_huge_model_params_is_a_cheap_400_naming_the_field(api, params):
    response, seconds = capped(api.post, TRAINING, training(model_params=params), format="json")
    assert_names(response, "model_params", "1e+14")
    assert seconds < 1.0  # refused before any grid is sized (a timing bound, not a benchmark)


@pytest.mark.parametrize(
    ("field", "value", "extra"),
    [
        ("tokens", 1e308, {}),
        ("tariff_per_kwh", 1e308, {}),
        ("amortization_years", 1e-320, {"capital_cost_per_card": 30_000}),
        ("global_batch_sequences", 2**63, {}),
        ("cards", 2**63, {}),
        ("seq_len", "1e400", {}),
        ("mfu", 1e-320, {}),
        ("pue", "1e308", {}),
        ("deadline_days", 1e-320, {"cards": None}),
    ],
)
def test_out_of_range_estimate_inputs_are_400_naming_the_field(api, field, value, extra):
    payload = {**training(**extra), field: value}
    payload = {key: value for key, value in payload.items() if value is not None}
    response, _ = capped(api.post, TRAINING, _json(payload), content_type="application/json")
    assert_names(response, field, "Must be")


def _json(payload: dict) -> str:
    """JSON text, writing an infinite float as the literal 1e400 (what an attacker sends)."""
    return json.dumps(payload).replace("Infinity", "1e400")


def test_a_json_number_beyond_a_double_is_a_400(api):
    body = _json(training()).replace('"cards": 1024', '"cards": 1e400')
    response, _ = capped(api.post, TRAINING, body, content_type="application/json")
    assert response.status_code == 400
    assert "1e400 is out of range" in response.json()["detail"]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "nan", "inf"])
def test_non_finite_strings_are_400(api, value):
    response, _ = capped(api.post, TRAINING, training(tokens=value), format="json")
    assert_names(response, "tokens", "1e+16 tokens")


def test_a_plan_with_a_billion_layers_is_refused_before_the_worker(planner_api):
    payload = plan_payload()
    payload["workload"].update(layers=10**9, hidden_size=12_288, attention_heads=96)
    response, _ = capped(planner_api.post, PLANS, payload, format="json")
    assert response.status_code == 400, response.content
    assert "layers" in str(response.json()["workload"])


def test_a_plan_of_1e30_parameters_is_refused(planner_api):
    payload = plan_payload()
    payload["workload"]["model_params"] = 1e30
    response, _ = capped(planner_api.post, PLANS, payload, format="json")
    assert response.status_code == 400
    assert "model_params" in response.json()["workload"]


def test_plan_compare_with_a_huge_id_is_400(api):
    response, _ = capped(api.get, f"{PLANS}compare/", {"ids": "99999999999999999999"})
    assert_names(response, "ids", "Must be")


def test_utilization_over_ten_thousand_years_by_day_is_a_fast_400(api):
    query = {"start": "0001-01-01", "end": "9999-12-31", "granularity": "day"}
    response, seconds = capped(api.get, f"{ACCOUNTING}utilization/", query)
    assert_names(response, "start", "2000-01-01")
    assert seconds < 1.0


def test_utilization_over_the_whole_range_by_day_is_refused_before_work(api):
    query = {"start": "2000-01-01", "end": "2100-12-31", "granularity": "day"}
    response, seconds = capped(api.get, f"{ACCOUNTING}utilization/", query)
    assert_names(response, "granularity", "5000 buckets")
    assert seconds < 1.0


@pytest.mark.parametrize(
    ("path", "query", "field"),
    [
        ("costs/", {"start": "1900-01-01", "end": "2100-01-01", "granularity": "total"}, "start"),
        ("chargeback/", {"start": "1970-01-01"}, "start"),
        ("utilization/", {"end": "2101-01-01"}, "end"),
    ],
)
def test_report_periods_outside_the_accepted_years_are_400(api, path, query, field):
    response, _ = capped(api.get, f"{ACCOUNTING}{path}", query)
    assert_names(response, field, "2100-12-31")


@pytest.mark.parametrize("path", ["costs/", "chargeback/", "utilization/"])
def test_reports_over_the_whole_accepted_range_answer(api, path):
    query = {"start": "2000-01-01", "end": "2100-12-31", "granularity": "total"}
    response, _ = capped(api.get, f"{ACCOUNTING}{path}", query)
    assert response.status_code == 200, response.content[:500]
