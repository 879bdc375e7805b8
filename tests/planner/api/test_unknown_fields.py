"""Every estimate and plan request refuses a field it does not know: an unknown or misspelt
field is a 400 naming it (nested as the body is), never silently ignored."""

from __future__ import annotations

import pytest

from tests.support.builders import PLANS, plan_payload
from tests.support.inference_inputs import LLAMA_70B

pytestmark = pytest.mark.django_db

TRAINING = "/api/v1/estimates/training/"
INFERENCE = "/api/v1/estimates/inference/"
INFERENCE_PLANS = "/api/v1/inference-plans/"
TRAINING_BODY = {
    "model_params": 7e9,
    "tokens": 1e12,
    "accelerator": "H100 SXM5 80GB",
    "cards": 64,
}
INFERENCE_BODY = {
    **LLAMA_70B,
    "accelerator": "H100 SXM5 80GB",
    "input_tokens": 1000,
    "output_tokens": 500,
    "requests_per_s": 10,
}


def _error_at(body, path: tuple):
    for key in path:
        assert key in body, (path, body)
        body = body[key]
    return body


def _refused(response, *path) -> str:
    """The 400's message at `path` (e.g. "workload", "hiden_size"; a list's items by "0")."""
    assert response.status_code == 400, response.content
    message = _error_at(response.json(), path)
    return " ".join(message) if isinstance(message, list) else str(message)


@pytest.fixture
def api(client_for, planner):
    return client_for(planner)


# --- the stateless estimates ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "body", "extra", "path"),
    [
        (TRAINING, TRAINING_BODY, {"hiden_size": 4096}, ("hiden_size",)),
        (TRAINING, TRAINING_BODY, {"tensor_parallel": 8}, ("tensor_parallel",)),
        (INFERENCE, INFERENCE_BODY, {"hiden": 8192}, ("hiden",)),
        (INFERENCE, INFERENCE_BODY, {"sla_ms": 50}, ("sla_ms",)),
        ("/api/v1/estimates/effective-time/", {"cards": 1024}, {"mtbf_hours": 1}, ("mtbf_hours",)),
        (
            "/api/v1/estimates/utilization/",
            {"pue": 1.1, "mfu": 0.7, "scaling": 0.9, "effective_time": 0.99, "utilization": 0.9},
            {"utilisation": 0.5},
            ("utilisation",),
        ),
        (
            "/api/v1/estimates/pool/",
            {"members": [{"accelerator": "H100 SXM5 80GB", "cards": 8}]},
            {"mixing_penalties": 0.9},
            ("mixing_penalties",),
        ),
    ],
)
def test_each_estimate_refuses_an_unknown_field_naming_it(api, url, body, extra, path):
    assert api.post(url, body, format="json").status_code == 200  # the body alone is fine
    message = _refused(api.post(url, {**body, **extra}, format="json"), *path)
    assert "Unknown field." in message


def test_a_misspelt_field_is_named_with_the_field_it_resembles(api):
    body = {**TRAINING_BODY, "layers": 32, "hiden_size": 4096, "attention_heads": 32}
    response = api.post(TRAINING, body, format="json")
    assert "Did you mean hidden_size?" in _refused(response, "hiden_size")


def test_a_nested_unknown_field_is_named_where_it_is(api):
    members = [{"accelerator": "H100 SXM5 80GB", "cards": 8, "mfuu": 0.4}]
    response = api.post("/api/v1/estimates/pool/", {"members": members}, format="json")
    assert "Did you mean mfu?" in _refused(response, "members", "0", "mfuu")


def test_other_errors_are_reported_beside_the_unknown_field(api):
    body = {**TRAINING_BODY, "tokens": -1, "hiden_size": 4096}
    response = api.post(TRAINING, body, format="json")
    assert set(response.json()) == {"tokens", "hiden_size"}


# --- stored training plans --------------------------------------------------------------------


def _with(payload: dict, section: str, **extra) -> dict:
    changed = {**payload}
    if section == "levers":
        changed["levers"] = [{**payload["levers"][0], **extra}]
    else:
        changed[section] = {**payload.get(section, {}), **extra}
    return changed


@pytest.mark.parametrize(
    ("section", "extra", "path"),
    [
        ("workload", {"hiden_size": 12288}, ("workload", "hiden_size")),
        ("workload", {"tensor_parallel": 8}, ("workload", "tensor_parallel")),
        ("options_spec", {"card": [512]}, ("options_spec", "card")),
        ("overrides", {"mfuu": 0.5}, ("overrides", "mfuu")),
        ("levers", {"cost": 1}, ("levers", "0", "cost")),
    ],
)
def test_a_plan_refuses_an_unknown_field_in_each_section(api, demo_fleet, section, extra, path):
    response = api.post(PLANS, _with(plan_payload(), section, **extra), format="json")
    assert "Unknown field." in _refused(response, *path)


def test_a_plan_refuses_an_unknown_top_level_field_and_site_figure(api, demo_fleet):
    response = api.post(PLANS, {**plan_payload(), "nmae": "typo"}, format="json")
    assert "Unknown field." in _refused(response, "nmae")
    payload = plan_payload(sites=[{"name": "Cloud", "puee": 1.3}])
    response = api.post(PLANS, payload, format="json")
    assert response.status_code == 400, response.content
    assert "puee" in str(response.json()["options_spec"]["sites"])


@pytest.fixture
def stored_plan(api, demo_fleet, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        response = api.post(PLANS, plan_payload(), format="json")
    assert response.status_code == 202, response.content
    return response.json()


def test_patch_put_clone_and_compare_refuse_unknown_fields(
    api, stored_plan, django_capture_on_commit_callbacks
):
    url = f"{PLANS}{stored_plan['id']}/"
    workload = {**stored_plan["workload"], "hiden_size": 12288}
    response = api.patch(url, {"workload": workload}, format="json")
    assert "Did you mean hidden_size?" in _refused(response, "workload", "hiden_size")
    assert "Unknown field." in _refused(api.patch(url, {"nmae": "x"}, format="json"), "nmae")
    # A PUT of the representation as read: the read-only fields are not inputs.
    read = api.get(url).json()
    response = api.put(url, read, format="json")
    assert response.status_code == 400
    assert {"id", "status", "results"} <= set(response.json())
    inputs = {key: read[key] for key in ("name", "workload", "options_spec", "overrides")}
    with django_capture_on_commit_callbacks(execute=False):
        assert api.put(url, {**inputs, "levers": read["levers"]}, format="json").status_code == 200
    clone = api.post(f"{url}clone/", {"nme": "copy"}, format="json")
    assert "Did you mean name?" in _refused(clone, "nme")
    compare = api.get(f"{PLANS}compare/", {"ids": str(stored_plan["id"]), "idz": "2"})
    assert "Unknown field." in _refused(compare, "idz")
    as_json = api.get(f"{PLANS}compare/", {"ids": str(stored_plan["id"]), "format": "json"})
    assert as_json.status_code == 200  # the renderer's own parameter


def test_a_patch_with_only_known_fields_still_works(
    api, stored_plan, django_capture_on_commit_callbacks
):
    url = f"{PLANS}{stored_plan['id']}/"
    with django_capture_on_commit_callbacks(execute=False):
        renamed = api.patch(url, {"name": "Renamed"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Renamed"


# --- stored inference plans -------------------------------------------------------------------


def test_inference_plans_refuse_unknown_fields_in_the_body_and_the_inputs(api):
    inputs = {**INFERENCE_BODY, "hiden": 8192}
    response = api.post(INFERENCE_PLANS, {"name": "chat", "inputs": inputs}, format="json")
    assert "Unknown field." in _refused(response, "inputs", "hiden")
    response = api.post(
        INFERENCE_PLANS, {"name": "chat", "inputs": INFERENCE_BODY, "owner": 1}, format="json"
    )
    assert "Unknown field." in _refused(response, "owner")
    saved = api.post(INFERENCE_PLANS, {"name": "chat", "inputs": INFERENCE_BODY}, format="json")
    assert saved.status_code == 201, saved.content
    url = f"{INFERENCE_PLANS}{saved.json()['id']}/"
    assert "Did you mean name?" in _refused(api.patch(url, {"nam": "x"}, format="json"), "nam")


def test_an_analysis_request_refuses_an_unknown_field(api, demo_fleet):
    response = api.post("/api/v1/analyses/", {"scope": "fleet", "scop": "pool"}, format="json")
    assert "Did you mean scope?" in _refused(response, "scop")


# --- the mixin itself -------------------------------------------------------------------------


def test_a_read_only_field_sent_by_a_client_is_refused():
    from rest_framework import serializers

    from core.strict import READ_ONLY_FIELD, StrictFieldsMixin

    class Named(StrictFieldsMixin, serializers.Serializer):
        id = serializers.IntegerField(read_only=True)
        name = serializers.CharField()

    payload = Named(data={"id": 3, "name": "x"})
    assert not payload.is_valid()
    assert payload.errors == {"id": [READ_ONLY_FIELD]}
    assert Named(data={"name": "x"}).is_valid()
