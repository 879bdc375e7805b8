"""FP4 weights on the catalog's B200: the card's dense FP4 peak is in the catalog and an NVFP4
estimate or stored plan computes with it; a card without FP4 tensor cores is refused.

NVIDIA HGX B200 datasheet: FP4 Tensor Core 144 PFLOPS and FP8 72 PFLOPS for the eight GPUs,
both with sparsity; dense is half: 9 PFLOPS FP4 and 4.5 PFLOPS FP8 per GPU. The catalog's
Blackwell and Hopper figures are dense (the B200's FP8 4,500 and BF16 2,250).
"""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

pytestmark = pytest.mark.django_db

URL = "/api/v1/estimates/inference/"
PLANS = "/api/v1/inference-plans/"
B200 = "B200 180GB"
B200_DENSE_FP4_TFLOPS = 144_000 / 8 / 2  # 9,000: per GPU, without sparsity
B200_DENSE_FP8_TFLOPS = 72_000 / 8 / 2  # 4,500
# A compute-bound prefill: Llama-3-70B, 8,192 prompt tokens, one B200, batch of one.
PREFILL = {
    "model": "Llama-3-70B",
    "accelerator": B200,
    "weight_precision": "nvfp4",
    "kv_precision": "fp8",
    "input_tokens": 8192,
    "output_tokens": 128,
    "cards": 1,
    "batch": 1,
}
fill = importlib.import_module("inventory.migrations.0013_accelerator_dense_fp4_tflops")


def estimate(client, body: dict) -> dict:
    response = client.post(URL, body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_catalogs_b200_has_its_dense_fp4_peak_and_its_source():
    from inventory.models import AcceleratorModel

    b200 = AcceleratorModel.objects.get(name=B200)
    assert b200.dense_fp4_tflops == B200_DENSE_FP4_TFLOPS == 9000
    assert b200.dense_fp8_tflops == B200_DENSE_FP8_TFLOPS  # dense, as FP4: the same basis
    assert "FP4 18 PFLOPS with sparsity, 9 dense" in b200.source
    hopper = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    assert hopper.dense_fp4_tflops is None  # no FP4 tensor cores: no figure, not zero


def test_the_data_migration_fills_a_missing_fp4_peak_and_keeps_an_edited_one():
    from inventory.models import AcceleratorModel

    AcceleratorModel.objects.filter(name=B200).update(dense_fp4_tflops=None)
    fill.fill_fp4_peaks(apps, None)
    assert AcceleratorModel.objects.get(name=B200).dense_fp4_tflops == 9000
    AcceleratorModel.objects.filter(name=B200).update(dense_fp4_tflops=8000)
    fill.fill_fp4_peaks(apps, None)
    assert AcceleratorModel.objects.get(name=B200).dense_fp4_tflops == 8000


def test_an_nvfp4_estimate_on_b200_computes_at_the_fp4_peak(client_for, viewer):
    from inventory.models import AcceleratorModel

    client = client_for(viewer)
    fp4 = estimate(client, PREFILL)
    assert fp4["feasible"] and fp4["compute_precision"] == "nvfp4"
    # Half the FP4 peak: the prefill's matrix products take about twice as long.
    AcceleratorModel.objects.filter(name=B200).update(dense_fp4_tflops=B200_DENSE_FP4_TFLOPS / 2)
    halved = estimate(client, PREFILL)
    assert halved["ttft_ms"] / fp4["ttft_ms"] == pytest.approx(2.0, rel=0.1)


def test_nvfp4_on_a_card_without_fp4_cores_is_refused_with_the_reason(client_for, viewer):
    body = estimate(client_for(viewer), {**PREFILL, "accelerator": ["H100 SXM5 80GB", B200]})
    h100 = next(o for o in body["options"] if o["accelerator"] == "H100 SXM5 80GB")
    assert not h100["feasible"] and "FP4" in h100["reason"]
    assert body["accelerator"] == B200 and body["compute_precision"] == "nvfp4"


def test_an_fp4_plan_on_b200_uses_the_fp4_peak_and_says_so(client_for, planner):
    from inventory.models import AcceleratorModel

    client = client_for(planner)
    created = client.post(PLANS, {"name": "70B NVFP4", "inputs": PREFILL}, format="json")
    assert created.status_code == 201, created.content
    plan = created.json()
    assert plan["inputs"]["weight_precision"] == "nvfp4"
    assert plan["results"]["compute_precision"] == "nvfp4"
    assert plan["results"]["weight_gb_per_card"] == pytest.approx(
        70_553_706_496 * 4.5 / 8 / 1e9  # NVFP4: 4 bits and an FP8 scale per 16 values
    )
    # Without the FP4 figure the same plan cannot be served on the card (no data is not zero).
    AcceleratorModel.objects.filter(name=B200).update(dense_fp4_tflops=None)
    again = client.post(f"{PLANS}{plan['id']}/recompute/").json()
    assert not again["results"]["feasible"] and "FP4" in again["results"]["reason"]
