"""Stored plans take the batch in tokens and may let it grow with data parallelism (issue #17),
as the stateless estimate does; a cap below the batch is a 400 naming the field."""

from __future__ import annotations

import pytest

from tests.support.builders import plan_payload
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db
PLANS = "/api/v1/plans/"


def _rows(client, workload_extra: dict) -> dict[int, dict]:
    payload = plan_payload(
        accelerators=["H100 SXM5 80GB"], cards=[1024, 8192], sites=None, pools=None
    )
    payload["workload"] = {**payload["workload"], "seq_len": 4096, **workload_extra}
    created = client.post(PLANS, payload, format="json")
    assert created.status_code == 202, created.content  # accepted: queued
    run_plan_inline(created.json()["id"])
    body = client.get(f"{PLANS}{created.json()['id']}/").json()
    assert body["status"] == "succeeded", body["error"]
    assert {k: body["workload"][k] for k in workload_extra} == workload_extra  # stored as given
    return {row["cards"]: row for row in body["results"]["options"]}


def test_a_growing_token_batch_lets_more_cards_run_data_parallel(client_for, planner, demo_fleet):
    client = client_for(planner)
    # 4M tokens = 1,024 sequences of 4,096: a fixed batch caps data parallelism at 8,192 cards.
    fixed = _rows(client, {"global_batch_tokens": 4_194_304})
    growing = _rows(client, {"global_batch_tokens": 4_194_304, "max_batch_tokens": 16_777_216})
    assert fixed[1024]["days"] == pytest.approx(growing[1024]["days"], rel=0.05)
    # At 8,192 cards the grown batch (up to Llama 3's 16M tokens) keeps more of them busy.
    assert growing[8192]["days"] < fixed[8192]["days"]
    assert growing[8192]["scaling"] > fixed[8192]["scaling"]


def test_a_cap_below_the_batch_is_refused_naming_the_field(client_for, planner, demo_fleet):
    payload = plan_payload()
    payload["workload"] |= {"global_batch_tokens": 8e6, "max_batch_tokens": 4e6}
    response = client_for(planner).post(PLANS, payload, format="json")
    assert response.status_code == 400
    assert "max_batch_tokens" in response.json()["workload"]
