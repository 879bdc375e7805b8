"""The training stack as an input (issue 27): the estimate, stored plans and the planner page
take `software_stack`; the per-card model then charges that stack's memory traffic, so plain
PyTorch trains the same model on the same card more slowly than Megatron, and a 2024 Megatron's
attention kernel, so long sequences train more slowly on it; an unknown stack is a 400 naming
the choices."""

from __future__ import annotations

import pytest

from engine.defaults import SOFTWARE_STACKS
from tests.support.builders import PLANS, plan_payload
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/training/"
# Llama 3.2 1B (Meta's config.json): 16 layers, hidden 2,048, gated MLP 8,192 wide, 32 query
# and 8 KV heads, a 128,256-token vocabulary, tied embeddings; on one H100, as
# benchmarks/gpu/measure.py trains it.
LLAMA_32_1B = {
    "layers": 16,
    "hidden_size": 2048,
    "ffn_hidden_size": 8192,
    "mlp_kind": "gated",
    "attention_heads": 32,
    "kv_heads": 8,
    "vocab_size": 128_256,
    "tied_embeddings": True,
}
ONE_CARD = {
    "tokens": 1e9,
    "accelerator": "H100 SXM5 80GB",
    "cards": 1,
    "seq_len": 2048,
    "global_batch_sequences": 8,
    "zero_stage": 0,
    **LLAMA_32_1B,
}


@pytest.fixture
def api(client_for, viewer):
    return client_for(viewer)


def _estimate(api, **extra) -> dict:
    response = api.post(URL, {**ONE_CARD, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_stacks_are_megatron_first():
    assert SOFTWARE_STACKS == ("megatron", "megatron_2024", "plain_pytorch")


def test_a_2024_megatron_loses_more_to_attention_the_longer_the_sequence(api):
    def slowdown(seq_len: int) -> float:
        shape = {"seq_len": seq_len, "global_batch_sequences": 16_384 // seq_len}
        today = _estimate(api, **shape)
        older = _estimate(api, software_stack="megatron_2024", **shape)
        return older["days"] / today["days"]

    short, long = slowdown(2048), slowdown(16_384)
    assert 1.0 < short < long


def test_plain_pytorch_trains_the_same_model_more_slowly_than_megatron(api):
    default = _estimate(api)
    megatron = _estimate(api, software_stack="megatron")
    plain = _estimate(api, software_stack="plain_pytorch")
    assert default["days"] == megatron["days"]  # Megatron is the default
    assert plain["days"] > megatron["days"]
    assert plain["factors"]["mfu"] < megatron["factors"]["mfu"]


def test_an_unknown_stack_is_a_400_naming_the_field(api):
    response = api.post(URL, {**ONE_CARD, "software_stack": "jax"}, format="json")
    assert response.status_code == 400, response.content
    assert "software_stack" in response.json()
    assert "jax" in " ".join(response.json()["software_stack"])


def test_a_plan_stores_its_stack_and_models_with_it(client_for, planner, demo_fleet):
    client = client_for(planner)

    def plan(stack: str | None) -> dict:
        payload = plan_payload(accelerators=["H100 SXM5 80GB"], cards=[1024], pools=None)
        payload["options_spec"]["sites"] = payload["options_spec"]["sites"][1:]
        if stack:
            payload["workload"]["software_stack"] = stack
        response = client.post(PLANS, payload, format="json")
        assert response.status_code == 202, response.content
        run_plan_inline(response.json()["id"])
        return client.get(f"{PLANS}{response.json()['id']}/").json()

    megatron, plain = plan(None), plan("plain_pytorch")
    assert megatron["workload"]["software_stack"] == "megatron"
    assert plain["workload"]["software_stack"] == "plain_pytorch"
    (fast,), (slow,) = megatron["results"]["options"], plain["results"]["options"]
    assert slow["days"] > fast["days"]
