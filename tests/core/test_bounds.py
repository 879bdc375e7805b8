"""Bounded work per request (issue: hostile input): every reproduction answers a 400 naming the
field and its range, or a correct result, fast, with the process's address space capped so a
blow-up fails the test instead of the machine."""

from __future__ import annotations

import json
import time

import pytest

from engine.limits import LIMITS, EngineInputError
from tests.memcap import address_space_cap, run_capped

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
    from tests.planner.api.conftest import plan_payload

    payload = plan_payload()
    payload["workload"].update(layers=10**9, hidden_size=12_288, attention_heads=96)
    response, _ = capped(planner_api.post, PLANS, payload, format="json")
    assert response.status_code == 400, response.content
    assert "layers" in str(response.json()["workload"])


def test_a_plan_of_1e30_parameters_is_refused(planner_api):
    from tests.planner.api.conftest import plan_payload

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


def test_the_engine_refuses_a_huge_grid_before_allocating():
    """Called directly (no serializer), the engine still sizes its grid first."""
    result = run_capped(
        """
        from engine.limits import EngineInputError
        from engine.parallelism import enumerate_splits
        try:
            enumerate_splits([1024], [8], layers=10**9, heads=96, global_batch=1536)
        except EngineInputError as exc:
            print(sorted(exc.errors))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['layers']"


def test_the_engine_refuses_huge_workloads_by_field():
    from engine.capacity import TrainingWorkload

    with pytest.raises(EngineInputError) as refused:
        TrainingWorkload(params=1e30, tokens=1e308, seq_len=2**63)
    assert {"params", "tokens", "seq_len"} <= set(refused.value.errors)


def test_every_limit_is_finite_and_ordered():
    for name, bound in LIMITS.items():
        assert 0 <= bound.low < bound.high < 1e33, name
        assert bound.unit is not None and bound.why, name


def test_the_deployment_doc_lists_every_limit_as_the_code_has_it():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    section = doc.split("## Input limits", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:4]
    expected = {
        name: [f"{bound.low:g}", f"{bound.high:g}", bound.unit] for name, bound in LIMITS.items()
    }
    assert rows == expected
