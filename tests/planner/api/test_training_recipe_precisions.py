"""A recipe's gradient and optimizer-state precisions as inputs (issue 27): NeMo's
Nemotron-4 340B recipe keeps bf16 optimizer state and gradients (optim.dtype bf16,
grad_sync_dtype bf16; docs/capacity-planning.md, memory), which roughly halves the training
state a card holds. The estimate and stored plans take both; Megatron-Core's defaults (bf16
gradients, fp32 master weights and moments) apply when they are not given; an unknown
precision is a 400 naming the choices."""

from __future__ import annotations

import pytest

from engine.memory import GRADIENT_BYTES, OPTIMIZER_STATE_BYTES, STATE_PRECISIONS
from tests.support.builders import PLANS, plan_payload
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/training/"
# An 8B-parameter model on 8 H100 with no state sharding (ZeRO 0): the state is all there is
# to compare, and it is the same split whatever the precisions.
ESTIMATE = {
    "model_params": 8e9,
    "tokens": 1e11,
    "accelerator": "H100 SXM5 80GB",
    "cards": 8,
    "seq_len": 2048,
    "global_batch_sequences": 64,
    "zero_stage": 0,
    "tp_degree": 8,
}


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def _state_bytes(api, **extra) -> float:
    response = api.post(URL, {**ESTIMATE, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["memory"]["state_bytes"]


def test_the_defaults_are_megatron_cores_and_the_choices_are_the_byte_tables():
    assert (GRADIENT_BYTES["bf16"], OPTIMIZER_STATE_BYTES["fp32"]) == (2.0, 12.0)
    assert set(STATE_PRECISIONS) == set(GRADIENT_BYTES) == set(OPTIMIZER_STATE_BYTES)


def test_bf16_optimizer_state_holds_less_and_fp32_gradients_more(api):
    default = _state_bytes(api)
    assert _state_bytes(api, gradient_precision="bf16", optimizer_state_precision="fp32") == (
        default
    )
    lean = _state_bytes(api, optimizer_state_precision="bf16")
    wide = _state_bytes(api, gradient_precision="fp32")
    # Weights 2 + gradients 2 + state 12 bytes a parameter by default: 16; bf16 state: 8;
    # fp32 gradients: 18 (each up to the same rounding of the whole-model figure).
    assert lean == pytest.approx(default * 8 / 16, rel=0.02)
    assert wide == pytest.approx(default * 18 / 16, rel=0.02)


@pytest.mark.parametrize("field", ["gradient_precision", "optimizer_state_precision"])
def test_an_unknown_precision_is_a_400_naming_the_field(api, field):
    response = api.post(URL, {**ESTIMATE, field: "fp16"}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()


def test_a_plan_stores_the_recipe_precisions(client_for, planner, demo_fleet):
    client = client_for(planner)
    payload = plan_payload(accelerators=["H100 SXM5 80GB"], cards=[1024], pools=None)
    payload["options_spec"]["sites"] = payload["options_spec"]["sites"][1:]
    payload["workload"]["optimizer_state_precision"] = "bf16"
    response = client.post(PLANS, payload, format="json")
    assert response.status_code == 202, response.content
    run_plan_inline(response.json()["id"])
    stored = client.get(f"{PLANS}{response.json()['id']}/").json()
    assert stored["workload"]["optimizer_state_precision"] == "bf16"
    assert stored["workload"]["gradient_precision"] == "bf16"
    assert stored["results"]["options"], stored["results"]
