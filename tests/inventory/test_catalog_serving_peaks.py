"""The catalog carries what serving needs: memory bandwidth and FP8/INT8 peaks (issue 19)."""

import importlib

import pytest
from django.apps import apps

from inventory.catalog import catalog_rows
from inventory.models import AcceleratorModel

pytestmark = pytest.mark.django_db
fill = importlib.import_module("inventory.migrations.0007_accelerator_dense_int8_tops")


def test_every_fixture_card_has_bandwidth_and_its_low_precision_peaks_loaded():
    catalog = {a.name: a for a in AcceleratorModel.objects.all()}
    for row in catalog_rows():
        card = catalog[row["name"]]
        assert card.memory_bandwidth_tbs == pytest.approx(row["memory_bandwidth_tbs"])
        assert card.dense_int8_tops == row["dense_int8_tops"]
        assert "Datasheet:" in row["source"]
        for low in (row["dense_fp8_tflops"], row["dense_int8_tops"]):
            # An 8-bit peak is never below the 16-bit one on the same card.
            assert low is None or low >= row["dense_bf16_tflops"]
    assert catalog["H100 SXM5 80GB"].dense_int8_tops == 1979
    assert catalog["A100 SXM4 40GB"].dense_fp8_tflops is None  # no FP8 hardware: no data


def test_data_migration_fills_missing_int8_peaks_and_keeps_edited_ones():
    AcceleratorModel.objects.filter(name="A100 SXM4 80GB").update(dense_int8_tops=None)
    AcceleratorModel.objects.filter(name="L4").update(dense_int8_tops=200)
    fill.fill_int8_peaks(apps, None)
    assert AcceleratorModel.objects.get(name="A100 SXM4 80GB").dense_int8_tops == 624
    assert AcceleratorModel.objects.get(name="L4").dense_int8_tops == 200


def test_int8_peak_out_of_range_is_refused_naming_the_field():
    from django.core.exceptions import ValidationError

    card = AcceleratorModel.objects.get(name="L4")
    card.dense_int8_tops = 1e9
    with pytest.raises(ValidationError) as caught:
        card.clean()
    assert "dense_int8_tops" in caught.value.message_dict
