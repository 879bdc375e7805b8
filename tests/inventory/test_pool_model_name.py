"""A pool may name the catalog model it trains (issue #32): the model, the API, the pool form
and the bulk import take `model_name`; an unknown name is refused naming close names and where
the names are; the pool frame then carries the model's total, active and replicated counts."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from django.core.exceptions import ValidationError

from engine.model_catalog import find_model
from engine.moe_training import MoeTraining
from inventory.frames import pool_frame
from inventory.models import Pool
from tests.support.builders import add_h100_pool, alpha_cluster

pytestmark = pytest.mark.django_db

POOLS = "/api/v1/pools/"


@pytest.fixture
def cluster():
    return alpha_cluster()


@pytest.fixture
def planner_client(client, planner):
    client.force_login(planner)
    return client


def _errors(pool: Pool) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        pool.full_clean()
    return caught.value.message_dict


def test_an_unknown_name_is_refused_with_close_names_and_where_to_find_them(cluster):
    message = _errors(Pool(cluster=cluster, name="x", model_name="DeepSeek-V9"))["model_name"][0]
    assert "No model “DeepSeek-V9”" in message
    assert "DeepSeek-V3" in message  # a close name
    assert "model catalog" in message and "Choosing a model" in message


def test_an_alias_is_stored_as_the_catalog_name(cluster):
    pool = Pool(cluster=cluster, name="x", model_name=" deepseek-ai/DeepSeek-V3 ")
    pool.full_clean()
    assert pool.model_name == "DeepSeek-V3"


def test_the_pools_own_model_params_must_agree_with_the_catalog(cluster):
    # DeepSeek-V3's total is 671 B (arXiv:2412.19437 §1); 685 B (its card, with the MTP
    # module) is within 5 %, 70 B is another model.
    agreeing = Pool(cluster=cluster, name="x", model_name="DeepSeek-V3",
                    assumptions={"model_params": 685e9})  # fmt: skip
    agreeing.full_clean()
    wrong = Pool(cluster=cluster, name="y", model_name="DeepSeek-V3",
                 assumptions={"model_params": 70e9})  # fmt: skip
    assert "disagrees with DeepSeek-V3" in _errors(wrong)["assumptions"][0]


def test_the_api_takes_the_name_and_refuses_an_unknown_one(client_for, planner, cluster):
    client = client_for(planner)
    refused = client.post(
        POOLS, {"cluster": cluster.pk, "name": "moe", "model_name": "Mixtral-9x7B"}, format="json"
    )
    assert refused.status_code == 400
    assert "Mixtral-8x7B" in refused.json()["model_name"][0]
    created = client.post(
        POOLS, {"cluster": cluster.pk, "name": "moe", "model_name": "mixtral 8x7b"}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["model_name"] == "Mixtral-8x7B"
    pool_id = created.json()["id"]
    cleared = client.patch(f"{POOLS}{pool_id}/", {"model_name": ""}, format="json")
    assert cleared.status_code == 200 and cleared.json()["model_name"] == ""


def test_the_pool_form_takes_the_name(planner_client, cluster):
    form = {"cluster": cluster.pk, "name": "form-pool", "purpose": "training", "assumptions": ""}
    refused = planner_client.post("/inventory/pools/new/", form | {"model_name": "nope-9"})
    assert refused.status_code == 200 and "No model" in refused.content.decode()
    response = planner_client.post("/inventory/pools/new/", form | {"model_name": "DeepSeek-R1"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Pool.objects.get(name="form-pool").model_name == "DeepSeek-R1"


def _import(planner_client, rows: str):
    response = planner_client.post("/inventory/import/pools/", {"pasted_rows": rows})
    assert response.status_code == 302, response.content.decode()[:2000]
    return response["Location"], planner_client.get(response["Location"]).content.decode()


def test_the_bulk_import_takes_the_name_and_says_which_row_is_unknown(planner_client, cluster):
    header = "site,cluster,name,purpose,model_name\n"
    _, preview = _import(planner_client, header + "Test DC,alpha,bad,training,GPT-9\n")
    assert "No model" in preview and "GPT-9" in preview
    location, preview = _import(planner_client, header + "Test DC,alpha,moe,training,DBRX\n")
    token = re.search(r'name="token" value="([0-9a-f]+)"', preview).group(1)
    assert planner_client.post(location, {"token": token}).status_code == 302
    assert Pool.objects.get(name="moe").model_name == "DBRX"


def test_the_pool_frame_carries_the_named_models_counts(cluster):
    add_h100_pool(cluster, "v3", model_name="DeepSeek-V3")
    frame = pool_frame(cluster.pk, None, 720.0).set_index("pool")
    model = find_model("DeepSeek-V3")
    row = frame.loc["v3"]
    assert row["model_params"] == model.total_params()
    assert row["model_active_params"] == model.active_params()
    routed = MoeTraining(model.moe_shape()).routed_params
    assert row["model_replicated_params"] == pytest.approx(model.total_params() - routed)
    # Counted from the shape: about 37 B active of 671 B (arXiv:2412.19437 §1).
    assert row["model_active_params"] == pytest.approx(37e9, rel=0.03)
    assert row["model_params"] == pytest.approx(671e9, rel=0.01)
    unnamed = frame.loc["h100"]
    assert pd.isna(unnamed["model_name"]) and pd.isna(unnamed["model_active_params"])


def test_a_named_model_outranks_a_cluster_wide_model_params(cluster):
    cluster.assumptions = {"model_params": 7e9}
    cluster.save()
    add_h100_pool(cluster, "llama", model_name="Llama-3.1-70B")
    frame = pool_frame(cluster.pk, None, 720.0).set_index("pool")
    assert frame.loc["llama", "model_params"] == find_model("Llama-3.1-70B").params
    assert frame.loc["h100", "model_params"] == 7e9  # the cluster's, as before


def test_without_named_models_the_frame_is_as_before(cluster):
    frame = pool_frame(cluster.pk, None, 720.0)
    assert not {"model_name", "model_active_params", "model_replicated_params"} & set(frame)
