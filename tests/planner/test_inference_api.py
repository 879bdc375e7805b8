"""POST /api/v1/estimates/inference/: the serving estimate over the catalog (docs/inference.md)."""

import pytest

from engine.inference.defaults import INFERENCE_DEFAULTS
from tests.support.inference_inputs import LLAMA_70B
from tests.support.memcap import address_space_cap

DEFAULT_BANDWIDTH_EFFICIENCY = INFERENCE_DEFAULTS["bandwidth_efficiency"].value

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/inference/"


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def post(api, body):
    return api.post(URL, body, format="json")


def test_anonymous_is_refused(client_for):
    assert post(client_for(None), {"model_params": 7e9}).status_code == 401


def test_two_h100_serve_llama_70b_fp8_with_every_output_and_its_provenance(api):
    response = post(
        api,
        {
            **LLAMA_70B,
            "weight_precision": "fp8",
            "kv_precision": "fp8",
            "accelerator": "H100 SXM5 80GB",
            "input_tokens": 1000,
            "output_tokens": 1000,
            "cards": 2,
            "tp": 2,
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    for key in ("cards", "tp", "replicas", "max_batch", "kv_bytes_per_token", "ttft_ms"):
        assert body[key] is not None, key
    for key in ("tpot_ms", "tokens_per_s", "mbu", "energy_kwh_per_million_tokens"):
        assert body[key] > 0, key
    assert body["cards"] == 2 and body["tp"] == 2 and body["replicas"] == 1
    assert body["kv_bytes_per_token"] == 163_840  # 2·80·8·128 bytes in FP8
    assert body["compute_precision"] == "fp8"
    assert body["cost_per_million_tokens"] > 0 and body["price_basis"] == "catalog rental"
    assert body["provenance"]["bandwidth_efficiency"] == "default"
    assert body["provenance"]["shape"] == "entered"
    assert body["provenance"]["tariff_per_kwh"].startswith("not given")
    assert body["settings"]["bandwidth_efficiency"] == pytest.approx(DEFAULT_BANDWIDTH_EFFICIENCY)


def test_target_compares_cards_and_marks_the_cheapest(api):
    body = post(
        api,
        {
            **LLAMA_70B,
            "weight_precision": "fp8",
            "kv_precision": "fp8",
            "accelerator": ["H100 SXM5 80GB", "H200 SXM 141GB", "A100 SXM4 80GB"],
            "input_tokens": 1000,
            "output_tokens": 500,
            "requests_per_s": 20,
            "tpot_ms": 80,
            "tariff_per_kwh": 0.1,
            "bandwidth_efficiency": 0.75,
        },
    ).json()
    assert len(body["options"]) == 3
    cheapest = [o for o in body["options"] if o["cheapest"]]
    assert len(cheapest) == 1 and cheapest[0]["pareto"]
    assert body["accelerator"] == cheapest[0]["accelerator"]
    assert body["tokens_per_s"] == pytest.approx(20 * 500)
    assert body["tpot_ms"] <= 80
    assert body["cards"] == body["replicas"] * body["tp"]
    assert body["provenance"]["bandwidth_efficiency"] == "entered"
    assert body["provenance"]["tariff_per_kwh"] == "entered"


def test_model_size_alone_infers_the_shape_and_the_whole_catalog_is_compared(api):
    body = post(
        api, {"model_params": 7e9, "input_tokens": 500, "output_tokens": 200, "tokens_per_s": 5000}
    ).json()
    assert body["provenance"]["shape"].startswith("inferred")
    assert body["shape"]["kv_heads"] == body["shape"]["attention_heads"]
    assert len(body["options"]) >= 10


def test_a_card_that_cannot_hold_the_model_says_why(api):
    body = post(
        api,
        {
            **LLAMA_70B,
            "accelerator": "L4",
            "input_tokens": 100,
            "output_tokens": 100,
            "cards": 1,
        },
    ).json()
    assert body["feasible"] is False
    assert "weights alone exceed" in body["reason"]
    assert body["cost_per_million_tokens"] is None  # nothing served: unknown, not zero


def test_p95_bounds_are_met_and_full_given_cards_have_no_settled_tail(api):
    body = {
        **LLAMA_70B, "weight_precision": "fp8", "kv_precision": "fp8",
        "accelerator": "H100 SXM5 80GB", "input_tokens": 1000, "output_tokens": 500,
    }  # fmt: skip
    full = post(api, {**body, "cards": 8}).json()
    assert full["ttft_p95_ms"] is None and full["utilization"] == 1.0  # no data, not zero
    assert full["tpot_p95_ms"] >= full["tpot_ms"]
    bounded = post(api, {**body, "cards": 8, "ttft_p95_ms": 1000, "tpot_p95_ms": 100}).json()
    assert bounded["feasible"], bounded["reason"]
    assert bounded["ttft_p95_ms"] <= 1000 and bounded["tpot_p95_ms"] <= 100
    assert bounded["utilization"] < 1 and bounded["tokens_per_s"] < full["tokens_per_s"]
    sized = post(api, {**body, "requests_per_s": 37, "ttft_p95_ms": 200}).json()
    assert sized["ttft_p95_ms"] <= 200 and sized["requests_per_s"] == pytest.approx(37)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model_params": None}, "model_params"),
        ({"input_tokens": 10**9}, "input_tokens"),
        ({"tpot_ms": "NaN"}, "tpot_ms"),
        ({"requests_per_s": 1e30}, "requests_per_s"),
        ({"weight_precision": "fp4"}, "weight_precision"),
        ({"accelerator": "Nonexistent 9000"}, "accelerator"),
        ({"accelerator": ["H100 SXM5 80GB"] * 51}, "accelerator"),
        ({"tokens_per_s": 100}, "requests_per_s"),
        ({"context_tokens": 10}, "context_tokens"),
        ({"layers": 80}, "hidden_size"),
        ({"bandwidth_efficiency": 1.5}, "bandwidth_efficiency"),
        ({"tp": 16}, "tp"),
        ({"ttft_p95_ms": -1}, "ttft_p95_ms"),
        ({"tpot_p95_ms": 1e12}, "tpot_p95_ms"),
        ({"tpot_p95_ms": "inf"}, "tpot_p95_ms"),
    ],
)
def test_hostile_or_incomplete_input_is_a_400_naming_the_field(api, change, field):
    body = {"model_params": 7e9, "input_tokens": 500, "output_tokens": 200, "cards": 8}
    with address_space_cap():
        response = post(api, {**body, **change})
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
