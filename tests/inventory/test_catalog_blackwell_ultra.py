"""The catalog's NVLink domains and its Blackwell Ultra, GB200/GB300 NVL72, MI325X and MI355X
cards (issues 27 and 32): loaded by migration 0014, each figure from a cited datasheet, and the
domain reaching the engine through the training estimate."""

import importlib

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError

from inventory.catalog import catalog_rows
from inventory.models import AcceleratorModel

pytestmark = pytest.mark.django_db
migration = importlib.import_module("inventory.migrations.0014_nvlink_domain_and_blackwell_ultra")

NEW_CARDS = ("GB200 NVL72 186GB", "GB300 NVL72 279GB", "B300 SXM 270GB", "MI325X", "MI355X")


def _card(name: str) -> AcceleratorModel:
    return AcceleratorModel.objects.get(name=name)


def test_the_new_cards_are_loaded_with_their_domain_and_a_cited_datasheet():
    rows = {row["name"]: row for row in catalog_rows()}
    for name in NEW_CARDS:
        card = _card(name)
        assert card.nvlink_domain_cards == rows[name]["nvlink_domain_cards"]
        assert "https://" in card.source and "Datasheet:" in card.source
        # A lower precision's peak is never below a higher one's: FP8 >= BF16, FP4 >= FP8.
        assert card.dense_fp8_tflops >= card.dense_bf16_tflops
        assert card.dense_fp4_tflops is None or card.dense_fp4_tflops >= card.dense_fp8_tflops
    assert _card("GB200 NVL72 186GB").nvlink_domain_cards == 72
    assert _card("GB300 NVL72 279GB").nvlink_domain_cards == 72
    assert _card("B300 SXM 270GB").nvlink_domain_cards == 8
    assert _card("MI355X").nvlink_domain_cards == 8


def test_nvl72_cards_are_the_racks_published_totals_over_72():
    # https://www.nvidia.com/en-us/data-center/gb200-nvl72/: FP16/BF16 360 PFLOPS and FP8 720
    # PFLOPS with sparsity (half dense), 13.4 TB HBM3e at 576 TB/s, for 72 GPUs.
    gb200 = _card("GB200 NVL72 186GB")
    assert gb200.dense_bf16_tflops * 2 * 72 == 360_000
    assert gb200.dense_fp8_tflops * 2 * 72 == 720_000
    assert gb200.memory_bandwidth_tbs * 72 == pytest.approx(576)
    assert gb200.memory_gb * 72 == pytest.approx(13_400, rel=0.001)
    # https://www.nvidia.com/en-us/data-center/gb300-nvl72/: FP4 1,080 PFLOPS dense.
    assert _card("GB300 NVL72 279GB").dense_fp4_tflops * 72 == 1_080_000
    # https://www.nvidia.com/en-us/data-center/hgx/: HGX B300 FP4 108 PFLOPS dense for 8.
    assert _card("B300 SXM 270GB").dense_fp4_tflops * 8 == 108_000


def test_amd_cards_carry_their_datasheet_figures():
    # https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html
    mi325x = _card("MI325X")
    assert (mi325x.memory_gb, mi325x.memory_bandwidth_tbs, mi325x.tdp_w) == (256, 6.0, 1000)
    assert mi325x.dense_fp8_tflops == 2614.9 and mi325x.dense_fp4_tflops is None
    # https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html: 7 Infinity
    # Fabric links of 153.6 GB/s.
    mi355x = _card("MI355X")
    assert (mi355x.memory_gb, mi355x.memory_bandwidth_tbs, mi355x.tdp_w) == (288, 8.0, 1400)
    assert mi355x.intra_node_interconnect_gbs == pytest.approx(7 * 153.6)


def test_hgx_boards_have_a_domain_of_eight_and_pcie_only_cards_none():
    for name in ("H100 SXM5 80GB", "H200 SXM 141GB", "B200 180GB", "MI300X"):
        assert _card(name).nvlink_domain_cards == 8, name
    assert _card("H100 PCIe 80GB").nvlink_domain_cards == 2  # NVLink bridge pairs
    # PCIe only: the intra-node rate is PCIe's across the node, so the node stays the domain.
    assert _card("L40S").nvlink_domain_cards is None


def test_the_data_migration_fills_missing_domains_and_keeps_edited_ones():
    AcceleratorModel.objects.filter(name="H100 SXM5 80GB").update(nvlink_domain_cards=None)
    AcceleratorModel.objects.filter(name="B200 180GB").update(nvlink_domain_cards=72)
    AcceleratorModel.objects.filter(name="MI325X").delete()
    migration.fill_domains_and_add_cards(apps, None)
    assert _card("H100 SXM5 80GB").nvlink_domain_cards == 8
    assert _card("B200 180GB").nvlink_domain_cards == 72  # an edit is kept
    assert _card("MI325X").nvlink_domain_cards == 8  # a missing card is added again


@pytest.mark.parametrize("domain", [0, 577])
def test_a_domain_out_of_range_is_refused_naming_the_field(domain):
    card = _card("B200 180GB")
    card.nvlink_domain_cards = domain
    with pytest.raises(ValidationError) as caught:
        card.full_clean()
    assert "nvlink_domain_cards" in caught.value.message_dict


def test_the_api_lists_the_domain(client_for, viewer):
    body = client_for(viewer).get("/api/v1/accelerator-models/", {"name": "MI355X"}).json()
    rows = body["results"] if isinstance(body, dict) else body
    assert {row["name"]: row["nvlink_domain_cards"] for row in rows}["MI355X"] == 8


def test_the_training_estimate_lets_tp_span_the_nvl72_domain(client_for, viewer):
    # Llama 3.1 70B (Meta's config.json). TP 16 is refused on an 8-card board and on the
    # 72-card rack (16 does not divide 72); a 16-card domain takes it.
    base = {
        "tokens": 1e12, "cards": 576, "seq_len": 8192, "global_batch_sequences": 2048,
        "mfu": 0.4, "layers": 80, "hidden_size": 8192, "ffn_hidden_size": 28672,
        "mlp_kind": "gated", "attention_heads": 64, "kv_heads": 8, "vocab_size": 128_256,
    }  # fmt: skip
    api = client_for(viewer)
    url = "/api/v1/estimates/training/"
    on_hgx = api.post(url, {**base, "accelerator": "B200 180GB", "tp_degree": 16}, format="json")
    assert on_hgx.status_code == 400
    assert "8 cards of one NVLink domain" in str(on_hgx.json()["tp_degree"])
    wide = {**base, "accelerator": "GB200 NVL72 186GB", "tp_degree": 16}
    on_rack = api.post(url, wide, format="json")
    assert on_rack.status_code == 400
    assert "72 cards of one NVLink domain" in str(on_rack.json()["tp_degree"])
    AcceleratorModel.objects.filter(name="GB200 NVL72 186GB").update(nvlink_domain_cards=16)
    spans = api.post(url, wide, format="json")
    assert spans.status_code == 200, spans.content
    assert spans.json()["parallelism"]["tp"] == 16
