"""The migration loads the catalog the repository ships; the demo fleet loader is idempotent."""

import csv

import pytest

from inventory.catalog import CATALOG_CSV
from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site
from inventory.selectors import pool_totals, pools_with_node_groups
from inventory.services import load_demo_fleet

pytestmark = pytest.mark.django_db


def fixture_rows() -> list[dict[str, str]]:
    """The catalog as the repository ships it (each row cites its datasheet in `note`)."""
    with CATALOG_CSV.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_migration_loads_every_catalog_card_with_its_figures():
    rows = fixture_rows()
    catalog = {a.name: a for a in AcceleratorModel.objects.all()}
    assert len(rows) >= 18
    assert {row["model"] for row in rows} <= set(catalog)
    for row in rows:
        accel = catalog[row["model"]]
        assert accel.vendor == row["vendor"]
        assert accel.dense_bf16_tflops == pytest.approx(float(row["dense_bf16_tflops"]))
        expected_fp8 = float(row["dense_fp8_tflops"]) if row["dense_fp8_tflops"] else None
        assert accel.dense_fp8_tflops == (pytest.approx(expected_fp8) if expected_fp8 else None)
        assert accel.memory_gb == pytest.approx(float(row["memory_gb"]))
        assert accel.memory_bandwidth_tbs == pytest.approx(float(row["memory_bandwidth_tbs"]))
        assert accel.tdp_w == pytest.approx(float(row["tdp_w"]))
        assert accel.confidence == row["confidence"]
        assert 0 < accel.default_training_mfu <= 1


def test_published_anchor_figures_of_the_catalog():
    """Datasheet figures the planner leans on (NVIDIA A100 and H100 SXM datasheets)."""
    rows = {row["model"]: row for row in fixture_rows()}
    assert float(rows["A100 SXM4 80GB"]["dense_bf16_tflops"]) == 312
    assert float(rows["A100 SXM4 80GB"]["memory_bandwidth_tbs"]) == pytest.approx(2.039)
    assert float(rows["H100 SXM5 80GB"]["dense_bf16_tflops"]) == 989
    assert float(rows["H100 SXM5 80GB"]["tdp_w"]) == 700


def test_demo_fleet_matches_the_brief_and_is_idempotent():
    first = load_demo_fleet()
    snapshot = {
        model: sorted(model.objects.values_list("pk", flat=True))
        for model in (Site, Cluster, Pool, NodeGroup, AcceleratorModel)
    }
    second = load_demo_fleet()
    assert first == second
    for model, pks in snapshot.items():
        assert sorted(model.objects.values_list("pk", flat=True)) == pks, model.__name__

    pues = sorted(Site.objects.values_list("cooling_type", "pue"))
    assert pues == [("air", 1.5), ("direct_liquid", 1.1)]
    assert Cluster.objects.count() == 3
    pools = {p.name: pool_totals(p) for p in pools_with_node_groups()}
    mixed = [t for t in pools.values() if t.is_heterogeneous]
    assert len(mixed) == 1
    assert {m.accelerator: m.cards for m in mixed[0].mix} == {
        "A100 SXM4 80GB": 1000,
        "H100 SXM5 80GB": 1000,
    }
    assert Pool.objects.filter(purpose="inference").exists()


def test_demo_fleet_restores_edited_demo_values():
    load_demo_fleet()
    NodeGroup.objects.filter(name="a100-nodes").update(node_count=3)
    load_demo_fleet()
    assert NodeGroup.objects.get(name="a100-nodes").node_count == 125


def test_management_command_reports_counts(capsys):
    from django.core.management import call_command

    call_command("load_demo_fleet")
    assert "2 sites, 3 clusters" in capsys.readouterr().out
